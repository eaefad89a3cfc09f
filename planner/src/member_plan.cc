// member_plan (membership.h): the full plan's transfers to members, and the boxes that members
// received through ranks outside the membership sent once more into their domains.
#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "engine_layouts.h"
#include "refit/core/index.h"
#include "refit/core/overlap.h"
#include "refit/core/try.h"
#include "refit/planner/links.h"
#include "refit/planner/membership.h"

namespace refit {
namespace {

// A box a member received through a rank outside the membership: it must enter its domain again.
struct Orphan {
  std::int32_t domain;
  std::uint32_t tensor;
  Box box;
  Rank receiver;
  Bytes chunk;
  auto key() const { return std::tie(domain, tensor, box); }
};

// The full plan's transfers to ranks present (training ranks and members), less the segments
// that came through absent ranks (their vias still the full plan's ids), and those segments.
struct Sorted {
  std::vector<Transfer> kept;
  std::vector<std::int32_t> kept_index;  // by full id: index in `kept`, -1 when dropped
  std::vector<Orphan> orphans;
};

// A segment is lost when the transfer it forwards from was dropped, or lost part of this box.
bool lost(const Sorted& s, const std::vector<std::vector<Segment>>& removed, const Segment& seg) {
  if (seg.via == kFromSourceShard) return false;
  if (s.kept_index[at(seg.via)] < 0) return true;
  return std::ranges::any_of(removed[at(seg.via)], [&](const Segment& r) {
    return r.tensor == seg.tensor && overlap(r.box, seg.box);
  });
}

// Takes the transfers out of `full`; most are kept whole, moved rather than copied.
Sorted sort_out(Plan& full, const PlacedCluster& cluster, const std::vector<bool>& present) {
  Sorted out;
  out.kept_index.assign(full.transfers.size(), -1);
  std::vector<std::vector<Segment>> removed(full.transfers.size());
  for (auto& t : full.transfers) {
    if (!present[at(t.receiver.value)]) continue;
    auto& gone = removed[at(t.id)];
    for (const auto& s : t.segments)
      if (lost(out, removed, s)) gone.push_back(s);
    if (!gone.empty()) {
      std::erase_if(t.segments, [&](const Segment& s) { return lost(out, removed, s); });
      for (const auto& s : gone) t.bytes -= full.segment_bytes(s);
    }
    // A training rank only passes on what it gathers (gather-broadcast): whoever needed it from
    // there lost it too and gets it again.
    if (t.receiver.value >= full.source_ranks)
      for (const auto& s : gone)
        out.orphans.push_back(Orphan{.domain = cluster.domain_of(t.receiver),
                                     .tensor = s.tensor,
                                     .box = s.box,
                                     .receiver = t.receiver,
                                     .chunk = t.chunk});
    if (t.segments.empty()) continue;
    out.kept_index[at(t.id)] = static_cast<std::int32_t>(out.kept.size());
    out.kept.push_back(std::move(t));
  }
  return out;
}

// Sends orphans again: per (domain, tensor, box) from a training rank that holds the box, into
// the domain once, then over NVLink to the group's other members. Senders and landing GPUs go by
// the NIC load the kept transfers already put on them, plus what it added.
class Resender {
 public:
  Resender(const Plan& full, const ReshardProblem& problem, const PlacedCluster& cluster,
           const std::vector<Transfer>& kept)
      : full_(full),
        problem_(problem),
        cluster_(cluster),
        shards_(problem.tensors().size()),
        tx_(cluster.cluster().nics().size(), 0.0),
        rx_(cluster.cluster().nics().size(), 0.0),
        near_sent_(static_cast<std::size_t>(problem.world_size()), 0.0) {
    for (const auto& t : kept)
      if (t.link == LinkKind::kNetwork) charge(t.sender, t.receiver, t.bytes);
  }

  [[nodiscard]] Result<void> send(std::span<const Orphan> group) {
    const Orphan& o = group.front();
    const auto& holders = REFIT_TRY(holders_of(o.tensor, o.box));
    const Bytes bytes = full_.segment_bytes(Segment{.tensor = o.tensor, .box = o.box});
    if (const auto near = least_loaded(holders, o.domain)) {
      for (const auto& m : group) add(sends_, *near, m.receiver, o, kFromSourceShard, bytes);
      near_sent_[at(near->value)] += static_cast<double>(bytes.value) * static_cast<double>(group.size());
      return {};
    }
    const auto sender = least_loaded(holders, std::nullopt);
    std::vector<Rank> members;
    for (const auto& m : group) members.push_back(m.receiver);
    const auto landing = least_loaded(members, std::nullopt);
    if (!sender || !landing)
      return mismatch(
          fmt::format("tensor '{}': {} must cross the network to domain {}, but {} has no NIC",
                      full_.tensors[o.tensor].name, o.box.to_string(), o.domain,
                      sender ? "none of its members there" : "none of the training ranks holding it"));
    charge(*sender, *landing, bytes);
    const auto h = add(sends_, *sender, *landing, o, kFromSourceShard, bytes);
    for (const Rank r : members)
      if (r != *landing) add(relays_, *landing, r, o, h, bytes);
    return {};
  }

  // The new transfers, then `kept` with vias renumbered; ids in that order.
  MemberPlan finish(std::vector<Transfer> kept, const std::vector<std::int32_t>& kept_index) && {
    Plan out{.strategy = full_.strategy,
             .execution = full_.execution,
             .tensors = full_.tensors,
             .source_ranks = full_.source_ranks,
             .destination_ranks = full_.destination_ranks,
             .transfers = std::move(sends_.transfers)};
    for (auto& t : relays_.transfers) out.transfers.push_back(std::move(t));
    const auto resent = static_cast<std::int32_t>(out.transfers.size());
    for (auto& t : kept) {
      for (auto& s : t.segments)
        if (s.via != kFromSourceShard) s.via = resent + kept_index[at(s.via)];
      out.transfers.push_back(std::move(t));
    }
    for (std::size_t i = 0; i < out.transfers.size(); ++i) out.transfers[i].id = static_cast<std::int32_t>(i);
    return MemberPlan{.plan = std::move(out), .resent = resent};
  }

  // The orphans cut along the source layout's distinct shards (which tile the tensor), so that
  // each part has holders: a gathered box that a relay forwarded is held by no one rank.
  std::vector<Orphan> by_source_shards(std::vector<Orphan> orphans) {
    std::vector<Orphan> out;
    for (auto& o : orphans) {
      const auto& shards = source_shards(o.tensor);
      if (std::ranges::any_of(shards, [&](const Shard& s) { return s.box.contains(o.box); })) {
        out.push_back(std::move(o));
        continue;
      }
      for (const auto& s : shards)
        if (auto part = intersect(s.box, o.box)) {
          out.push_back(o);
          out.back().box = std::move(*part);
        }
    }
    return out;
  }

 private:
  // New transfers coalesced per (sender, receiver).
  struct Stage {
    std::vector<Transfer> transfers;
    std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t> index;
  };

  std::int32_t add(Stage& stage, Rank from, Rank to, const Orphan& o, std::int32_t via, Bytes bytes) {
    auto [it, inserted] =
        stage.index.try_emplace({from.value, to.value}, static_cast<std::int32_t>(stage.transfers.size()));
    if (inserted)
      stage.transfers.push_back(Transfer{.id = it->second,
                                         .sender = from,
                                         .receiver = to,
                                         .link = link_between(cluster_, from, to),
                                         .segments = {},
                                         .bytes = Bytes{0},
                                         .chunk = o.chunk});
    auto& t = stage.transfers[at(it->second)];
    t.segments.push_back(Segment{.tensor = o.tensor, .box = o.box, .via = via});
    t.bytes += bytes;
    return it->second;
  }

  void charge(Rank from, Rank to, Bytes bytes) {
    if (const auto n = cluster_.nic_of(from)) tx_[at(*n)] += static_cast<double>(bytes.value);
    if (const auto n = cluster_.nic_of(to)) rx_[at(*n)] += static_cast<double>(bytes.value);
  }

  const std::vector<Shard>& source_shards(std::uint32_t tensor) {
    auto& shards = shards_[tensor];
    if (!shards) shards = distinct_shards(problem_.tensors()[tensor].source);
    return *shards;
  }

  // The training ranks holding all of `box`.
  [[nodiscard]] Result<std::reference_wrapper<const std::vector<Rank>>> holders_of(std::uint32_t tensor,
                                                                                   const Box& box) {
    for (const auto& s : source_shards(tensor))
      if (s.box.contains(box)) return std::cref(s.holders);
    return mismatch(fmt::format("tensor '{}': no training rank holds all of {}", full_.tensors[tensor].name,
                                box.to_string()));
  }

  // Among `ranks`: with a domain, the one there that sent least over NVLink here (none when none
  // is there); without, the one whose NIC is least busy (tx for training ranks, rx for members).
  std::optional<Rank> least_loaded(const std::vector<Rank>& ranks, std::optional<std::int32_t> domain) const {
    std::optional<Rank> best;
    double best_load = 0;
    for (const Rank r : ranks) {
      double load = 0;
      if (domain) {
        if (cluster_.domain_of(r) != *domain) continue;
        load = near_sent_[at(r.value)];
      } else {
        const auto n = cluster_.nic_of(r);
        if (!n) continue;
        const auto& busy = problem_.is_source(r) ? tx_ : rx_;
        load = busy[at(*n)] / cluster_.cluster().nics()[at(*n)].bandwidth.value;
      }
      if (!best || load < best_load) best = r, best_load = load;
    }
    return best;
  }

  const Plan& full_;
  const ReshardProblem& problem_;
  const PlacedCluster& cluster_;
  std::vector<std::optional<std::vector<Shard>>> shards_;  // per tensor, made when first needed
  std::vector<double> tx_, rx_;                            // bytes per NIC
  std::vector<double> near_sent_;  // bytes per training rank sent over NVLink by this resender
  Stage sends_, relays_;
};

}  // namespace

Result<MemberPlan> member_plan(Plan full, const ReshardProblem& problem, const PlacedCluster& cluster,
                               const MemberEngines& m) {
  REFIT_TRY(check_member_engines(m, problem));
  REFIT_TRY(check_no_landing(problem, "a membership plan"));
  if (full.source_ranks != problem.source_ranks() || full.destination_ranks != problem.destination_ranks())
    return mismatch(fmt::format("plan is for {}+{} ranks, the problem has {}+{}", full.source_ranks,
                                full.destination_ranks, problem.source_ranks(), problem.destination_ranks()));
  if (full.tensors.size() != problem.tensors().size())
    return mismatch(
        fmt::format("plan has {} tensors, the problem {}", full.tensors.size(), problem.tensors().size()));
  std::vector<bool> present(at(problem.world_size()), false);
  for (std::int32_t r = 0; r < problem.source_ranks(); ++r) present[at(r)] = true;
  for (const auto e : m.members)
    for (const Rank r : engine_ranks(problem, m.engines, e)) present[at(r.value)] = true;
  auto sorted = sort_out(full, cluster, present);
  Resender resend(full, problem, cluster, sorted.kept);
  sorted.orphans = resend.by_source_shards(std::move(sorted.orphans));
  std::ranges::sort(sorted.orphans, {},
                    [](const Orphan& o) { return std::tuple(o.key(), o.receiver.value); });
  for (std::size_t begin = 0; begin < sorted.orphans.size();) {
    std::size_t end = begin + 1;
    while (end < sorted.orphans.size() && sorted.orphans[end].key() == sorted.orphans[begin].key()) ++end;
    REFIT_TRY(resend.send(std::span(sorted.orphans).subspan(begin, end - begin)));
    begin = end;
  }
  return std::move(resend).finish(std::move(sorted.kept), sorted.kept_index);
}

}  // namespace refit
