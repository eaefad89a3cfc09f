#include "component_signature.h"

#include <algorithm>
#include <bit>
#include <unordered_map>

#include "routes.h"

#include "refit/core/index.h"

namespace refit::sim {
namespace {

std::int64_t bits(double x) { return std::bit_cast<std::int64_t>(x); }

// First-appearance numbering of one kind of name.
class Renumbering {
 public:
  // The new number of `name`, and whether it was met just now.
  std::pair<std::int64_t, bool> of(std::int64_t name) {
    const auto [it, fresh] = ids_.try_emplace(name, static_cast<std::int64_t>(ids_.size()));
    return {it->second, fresh};
  }

 private:
  std::unordered_map<std::int64_t, std::int64_t> ids_;
};

class SignatureWriter {
 public:
  explicit SignatureWriter(SignatureContext& context)
      : context_(context), problem_(context.problem()), cluster_(context.cluster()) {}

  // `ids` are the component's transfers, ascending: a `via` is written as its feeder's index there.
  void transfer(const Plan& plan, const Transfer& t, std::span<const std::int32_t> ids) {
    rank(t.sender);
    rank(t.receiver);
    // Whether the sender's thread copies it: one word for that, not the nodes, which would tell
    // apart components that simulate alike (GPUs of one NVLink domain on several nodes).
    out_.insert(out_.end(), {static_cast<std::int64_t>(t.link), copied_by_sender(t, cluster_) ? 1 : 0,
                             t.bytes.value, t.chunk.value, static_cast<std::int64_t>(t.segments.size())});
    for (const auto& s : t.segments) {
      out_.insert(
          out_.end(),
          {s.tensor, s.via == kFromSourceShard ? -1 : std::ranges::lower_bound(ids, s.via) - ids.begin()});
      box(s.box);
      for (const Rank r : {t.sender, t.receiver})
        for (const bool source : {true, false}) held(plan, r, s.tensor, source);
    }
  }

  // What the transfers written since the last clear() added to the signature.
  std::span<const std::int64_t> words() const { return out_; }
  void clear() { out_.clear(); }

 private:
  void box(const Box& b) {
    out_.push_back(static_cast<std::int64_t>(b.rank()));
    for (std::size_t d = 0; d < b.rank(); ++d) out_.insert(out_.end(), {b.offset[d], b.extent[d]});
  }

  // A rank's box of a tensor on one side is fixed, so it is written where the (renumbered rank,
  // tensor, side) first occurs and nowhere after: equal signatures still mean equal boxes.
  void held(const Plan& plan, Rank r, std::uint32_t tensor, bool source) {
    const auto key =
        (static_cast<std::size_t>(tensor) * at(plan.world_size()) + at(r.value)) * 2 + (source ? 1 : 0);
    if (written_.empty()) written_.resize(2 * problem_.tensors().size() * at(plan.world_size()));
    if (written_[key]) return;
    written_[key] = true;
    const auto position = context_.position(tensor, source, r);
    if (!position) return out_.push_back(-1);
    const auto& spec = problem_.tensors()[tensor];
    box((source ? spec.source : spec.destination).box_at_position(*position));
  }

  void rank(Rank r) {
    const auto [id, fresh] = ranks_.of(r.value);
    out_.push_back(id);
    if (fresh) out_.push_back(problem_.is_source(r) ? 1 : 0), gpu(cluster_.gpu_of(r));
  }

  void gpu(GpuId g) {
    const auto [id, fresh] = gpus_.of(g.value);
    out_.push_back(id);
    if (!fresh) return;
    const auto& spec = cluster_.cluster().gpu(g);
    out_.insert(out_.end(), {bits(spec.nvlink_bandwidth.value), bits(spec.copy_bandwidth.value),
                             bits(context_.nic_bandwidth_of_gpu(g))});
    for (const auto rate : spec.quantize_bandwidth) out_.push_back(bits(rate.value));
    if (spec.nccl_costs)
      out_.insert(out_.end(), {bits(spec.nccl_costs->per_op.value), bits(spec.nccl_costs->per_step.value)});
    else
      out_.push_back(-1);
    const auto n = cluster_.cluster().nic_of(g);
    if (!n)
      out_.push_back(-1);
    else
      nic(*n);
    domain(spec.domain);
  }

  void nic(std::int32_t n) {
    const auto [id, fresh] = nics_.of(n);
    out_.push_back(id);
    if (!fresh) return;
    const auto& spec = cluster_.cluster().nics()[at(n)];
    out_.insert(out_.end(), {bits(spec.bandwidth.value), bits(spec.latency.value),
                             bits(spec.chunk_overhead.value), bits(spec.transfer_overhead.value)});
  }

  void domain(std::int32_t d) {
    const auto [id, fresh] = domains_.of(d);
    out_.push_back(id);
    if (fresh && cluster_.cluster().fabric().oversubscription > 1.0)
      out_.insert(out_.end(), {bits(cluster_.cluster().domain_nic_bandwidth(d).value),
                               bits(cluster_.cluster().fabric().oversubscription)});
  }

  SignatureContext& context_;
  const ReshardProblem& problem_;
  const PlacedCluster& cluster_;
  Renumbering ranks_, gpus_, nics_, domains_;
  std::vector<bool> written_;  // by (tensor, rank, side): whether its box is written
  std::vector<std::int64_t> out_;
};

// Writes the signature of `ids` a transfer at a time into `take`, which may stop it by returning
// false; whether it ran to the end.
template <class Take>
bool write_signature(const Plan& plan, std::span<const std::int32_t> ids, SignatureContext& context,
                     Take&& take) {
  SignatureWriter w(context);
  for (const auto id : ids) {
    w.transfer(plan, plan.transfers[at(id)], ids);
    if (!take(w.words())) return false;
    w.clear();
  }
  return true;
}

}  // namespace

SignatureContext::SignatureContext(const ReshardProblem& problem, const PlacedCluster& cluster)
    : problem_(problem),
      cluster_(cluster),
      reach_(cluster.cluster().gpus().size(), 0.0),
      positions_of_(2 * problem.tensors().size(), -1) {
  for (const auto& n : cluster.cluster().nics())
    for (const auto g : n.gpus) reach_[at(g.value)] += n.bandwidth.value;
}

std::optional<std::int64_t> SignatureContext::position(std::uint32_t tensor, bool source, Rank r) {
  auto& index = positions_of_[2 * tensor + (source ? 1 : 0)];
  if (index < 0) {
    const auto& spec = problem_.tensors()[tensor];
    const Mesh& mesh = (source ? spec.source : spec.destination).mesh();
    const auto [it, fresh] = by_ranks_.try_emplace(&mesh.ranks(), positions_.size());
    if (fresh) {
      auto& by_rank = positions_.emplace_back(static_cast<std::size_t>(problem_.world_size()), -1);
      for (std::int64_t i = 0; i < mesh.size(); ++i)
        by_rank[at(mesh.rank_at(i).value)] = static_cast<std::int32_t>(i);
    }
    index = static_cast<std::int32_t>(it->second);
  }
  const auto p = positions_[at(index)][at(r.value)];
  return p < 0 ? std::nullopt : std::optional<std::int64_t>(p);
}

std::vector<std::int64_t> component_signature(const Plan& plan, std::span<const std::int32_t> ids,
                                              SignatureContext& context) {
  std::vector<std::int64_t> out;
  write_signature(plan, ids, context, [&](std::span<const std::int64_t> words) {
    out.insert(out.end(), words.begin(), words.end());
    return true;
  });
  return out;
}

bool has_signature(const Plan& plan, std::span<const std::int32_t> ids, SignatureContext& context,
                   std::span<const std::int64_t> kept) {
  std::size_t next = 0;  // into kept: where the words written so far end
  const bool whole = write_signature(plan, ids, context, [&](std::span<const std::int64_t> words) {
    if (words.size() > kept.size() - next || !std::ranges::equal(words, kept.subspan(next, words.size())))
      return false;
    next += words.size();
    return true;
  });
  return whole && next == kept.size();
}

}  // namespace refit::sim
