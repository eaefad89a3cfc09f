#include "component_signature.h"

#include <bit>
#include <unordered_map>
#include <unordered_set>

namespace refit::sim {
namespace {

std::size_t at(std::int32_t i) { return static_cast<std::size_t>(i); }
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
  SignatureWriter(const ReshardProblem& problem, const PlacedCluster& cluster)
      : problem_(problem), cluster_(cluster), reach_(cluster.cluster().gpus().size(), 0.0) {
    for (const auto& n : cluster.cluster().nics())
      for (const auto g : n.gpus) reach_[at(g.value)] += n.bandwidth.value;
  }

  // `position` numbers the component's transfers in order: a `via` is written as its feeder's.
  void transfer(const Plan& plan, const Transfer& t,
                const std::unordered_map<std::int32_t, std::int32_t>& position) {
    rank(t.sender);
    rank(t.receiver);
    out_.insert(out_.end(), {static_cast<std::int64_t>(t.link), t.bytes.value, t.chunk.value,
                             static_cast<std::int64_t>(t.segments.size())});
    for (const auto& s : t.segments) {
      out_.insert(out_.end(), {s.tensor, s.via == kFromSourceShard ? -1 : position.at(s.via)});
      box(s.box);
      for (const Rank r : {t.sender, t.receiver})
        for (const bool source : {true, false}) held(plan, r, s.tensor, source);
    }
  }

  std::vector<std::int64_t> take() && { return std::move(out_); }

 private:
  void box(const Box& b) {
    out_.push_back(static_cast<std::int64_t>(b.rank()));
    for (std::size_t d = 0; d < b.rank(); ++d) out_.insert(out_.end(), {b.offset[d], b.extent[d]});
  }

  // A rank's box of a tensor on one side is fixed, so it is written where the (renumbered rank,
  // tensor, side) first occurs and nowhere after: equal signatures still mean equal boxes.
  void held(const Plan& plan, Rank r, std::uint32_t tensor, bool source) {
    const auto key = (static_cast<std::int64_t>(tensor) * plan.world_size() + r.value) * 2 + (source ? 1 : 0);
    if (!written_.insert(key).second) return;
    const auto& spec = problem_.tensors()[tensor];
    const Layout& layout = source ? spec.source : spec.destination;
    const auto position = layout.mesh().position_of_rank(r);
    if (!position) return out_.push_back(-1);
    box(layout.box_at_position(*position));
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
                             bits(reach_[at(g.value)])});
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
    out_.insert(out_.end(), {bits(spec.bandwidth.value), bits(spec.latency.value)});
  }

  void domain(std::int32_t d) {
    const auto [id, fresh] = domains_.of(d);
    out_.push_back(id);
    if (fresh && cluster_.cluster().fabric().oversubscription > 1.0)
      out_.insert(out_.end(), {bits(cluster_.cluster().domain_nic_bandwidth(d).value),
                               bits(cluster_.cluster().fabric().oversubscription)});
  }

  const ReshardProblem& problem_;
  const PlacedCluster& cluster_;
  std::vector<double> reach_;  // per GPU: bandwidth of the NICs that serve it
  Renumbering ranks_, gpus_, nics_, domains_;
  std::unordered_set<std::int64_t> written_;  // (tensor, rank, side) whose box is written
  std::vector<std::int64_t> out_;
};

}  // namespace

std::vector<std::int64_t> component_signature(const Plan& plan, std::span<const std::int32_t> ids,
                                              const ReshardProblem& problem, const PlacedCluster& cluster) {
  SignatureWriter w(problem, cluster);
  std::unordered_map<std::int32_t, std::int32_t> position;
  for (const auto id : ids) position.emplace(id, static_cast<std::int32_t>(position.size()));
  for (const auto id : ids) w.transfer(plan, plan.transfers[at(id)], position);
  return std::move(w).take();
}

}  // namespace refit::sim
