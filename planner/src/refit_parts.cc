#include "refit_parts.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <span>
#include <utility>

#include "refit/core/disjoint_sets.h"
#include "refit/core/index.h"

namespace refit::planner_detail {
namespace {

// A tensor's source holders by NVLink domain: (domain, rank) pairs sorted, per source shard.
using HoldersByDomain = std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>>;

HoldersByDomain holders_by_domain(const PlanContext& c, std::uint32_t t) {
  HoldersByDomain out;
  for (const auto& s : c.overlaps[t].sources) {
    auto& pairs = out.emplace_back();
    for (const Rank h : s.holders) pairs.emplace_back(c.cluster.domain_of(h), h.value);
    std::ranges::sort(pairs);
  }
  return out;
}

// The holders of source `s` inside `domain`.
std::span<const std::pair<std::int32_t, std::int32_t>> near(const HoldersByDomain& by, std::uint32_t s,
                                                            std::int32_t domain) {
  const auto& pairs = by[s];
  const auto first =
      std::ranges::lower_bound(pairs, std::pair(domain, std::numeric_limits<std::int32_t>::min()));
  const auto last =
      std::ranges::lower_bound(pairs, std::pair(domain + 1, std::numeric_limits<std::int32_t>::min()));
  return {first, last};
}

// The holders the strategy may send piece `p` to `group` from: those inside its domain, else its
// share of them, else (no NIC among the share) all of them. Calls `use(rank)` for each; returns
// which of the three it was (0, 1, 2), which a part's record keeps.
template <class Use>
int senders(const PlanContext& c, const HoldersByDomain& by, std::uint32_t t, const Piece& p,
            const DomainGroup& group, Use&& use) {
  if (const auto inside = near(by, p.source, group.domain); !inside.empty()) {
    for (const auto& [domain, r] : inside) use(r);
    return 0;
  }
  const auto& holders = c.overlaps[t].sources[p.source].holders;
  const auto [first, last] = holder_share(holders.size(), group.copy, group.copies);
  const auto share = std::span(holders).subspan(first, last - first);
  if (std::ranges::any_of(share, [&](Rank r) { return c.cluster.nic_of(r).has_value(); })) {
    for (const Rank r : share) use(r.value);
    return 1;
  }
  for (const Rank r : holders) use(r.value);
  return 2;
}

}  // namespace

std::vector<std::int32_t> parts_of_ranks(const PlanContext& c, const DomainGroups& groups) {
  const auto world = at(c.problem.world_size());
  const auto gpus = c.cluster.cluster().gpus().size();
  DisjointSets sets(world + gpus + c.cluster.cluster().nics().size());
  for (std::size_t r = 0; r < world; ++r) {
    const Rank rank{static_cast<std::int32_t>(r)};
    sets.join(r, world + at(c.cluster.gpu_of(rank).value));
    if (const auto n = c.cluster.nic_of(rank)) sets.join(r, world + gpus + at(*n));
  }
  for (std::uint32_t t = 0; t < c.overlaps.size(); ++t) {
    const auto by = holders_by_domain(c, t);
    for (std::size_t d = 0; d < groups[t].size(); ++d)
      for (const auto& group : groups[t][d]) {
        const auto root = at(group.replicas.front().value);
        for (const Rank r : group.replicas) sets.join(at(r.value), root);
        for (const auto& p : c.overlaps[t].destinations[d].pieces)
          senders(c, by, t, p, group, [&](std::int32_t r) { sets.join(at(r), root); });
      }
  }
  std::vector<std::int32_t> part_of_root(world + gpus + c.cluster.cluster().nics().size(), -1);
  std::int32_t parts = 0;
  for (const auto& by_dest : groups)
    for (const auto& gs : by_dest)
      for (const auto& g : gs)
        if (auto& k = part_of_root[sets.find(at(g.replicas.front().value))]; k < 0) k = parts++;
  std::vector<std::int32_t> out(world);
  for (std::size_t r = 0; r < world; ++r) out[r] = part_of_root[sets.find(r)];
  return out;
}

namespace {

// What the strategy reads of each part (refit_parts.h), as a record of integers per part: ranks
// shifted by their part's first rank of their side, GPUs, NICs and domains by their order among
// the part's. write(emit) calls emit(part, value) for every value of every part's record in turn.
class PartRecords {
 public:
  PartRecords(const PlanContext& c, const DomainGroups& groups, std::vector<std::int32_t> part_of)
      : c_(c), groups_(groups), part_of_(std::move(part_of)) {
    const auto parts = at(std::ranges::max(part_of_) + 1);
    first_.assign(2 * parts, std::numeric_limits<std::int32_t>::max());
    gpus_.resize(parts), nics_.resize(parts), domains_.resize(parts);
    for (std::int32_t r = 0; r < c.problem.world_size(); ++r) {
      const auto k = part_of_[at(r)];
      if (k < 0) continue;
      auto& first = first_[2 * at(k) + (c.problem.is_source(Rank{r}) ? 0 : 1)];
      first = std::min(first, r);
      gpus_[at(k)].push_back(c.cluster.gpu_of(Rank{r}).value);
      if (const auto n = c.cluster.nic_of(Rank{r})) nics_[at(k)].push_back(*n);
      domains_[at(k)].push_back(c.cluster.domain_of(Rank{r}));
    }
    for (auto* kind : {&gpus_, &nics_, &domains_})
      for (auto& ids : *kind) {
        std::ranges::sort(ids);
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      }
  }

  std::size_t parts() const { return gpus_.size(); }
  RankShift shift(std::size_t k) const {
    const auto by = [&](std::size_t side) {
      return first_[2 * k + side] == std::numeric_limits<std::int32_t>::max()
                 ? 0
                 : first_[2 * k + side] - first_[side];
    };
    return {.source = by(0), .destination = by(1)};
  }

  template <class Emit>
  void write(Emit&& emit) const {
    for (std::int32_t r = 0; r < c_.problem.world_size(); ++r)
      if (const auto k = part_of_[at(r)]; k >= 0) write_rank(k, Rank{r}, emit);
    for (std::uint32_t t = 0; t < c_.overlaps.size(); ++t) {
      const auto by = holders_by_domain(c_, t);
      for (std::size_t d = 0; d < groups_[t].size(); ++d)
        for (const auto& group : groups_[t][d]) write_group(t, d, group, by, emit);
      for (std::size_t s = 0; s < c_.overlaps[t].sources.size(); ++s)
        for (const Rank h : c_.overlaps[t].sources[s].holders)
          if (const auto k = part_of_[at(h.value)]; k >= 0)
            for (const std::int64_t v : {std::int64_t{t}, static_cast<std::int64_t>(s), shifted(h.value)})
              emit(k, v);
    }
  }

 private:
  static std::int64_t index(const std::vector<std::int32_t>& sorted, std::int32_t id) {
    return std::ranges::lower_bound(sorted, id) - sorted.begin();
  }
  std::int64_t shifted(std::int32_t r) const {
    const auto k = at(part_of_[at(r)]);
    return r - first_[2 * k + (c_.problem.is_source(Rank{r}) ? 0 : 1)];
  }

  template <class Emit>
  void write_rank(std::int32_t k, Rank r, Emit& emit) const {
    const auto nic = c_.cluster.nic_of(r);
    const double bandwidth = nic ? c_.cluster.cluster().nics()[at(*nic)].bandwidth.value : 0.0;
    for (const std::int64_t v :
         {shifted(r.value), std::int64_t{c_.problem.is_source(r)},
          index(gpus_[at(k)], c_.cluster.gpu_of(r).value), nic ? index(nics_[at(k)], *nic) : -1,
          std::bit_cast<std::int64_t>(bandwidth), index(domains_[at(k)], c_.cluster.domain_of(r))})
      emit(k, v);
  }

  // A group's tensor, shard, replicas and, per piece, the holders it may take it from, ended by
  // which holders they are (negative, so that no rank reads as one).
  template <class Emit>
  void write_group(std::uint32_t t, std::size_t d, const DomainGroup& group, const HoldersByDomain& by,
                   Emit& emit) const {
    const auto k = part_of_[at(group.replicas.front().value)];
    for (const std::int64_t v :
         {std::int64_t{t}, static_cast<std::int64_t>(d), static_cast<std::int64_t>(group.replicas.size())})
      emit(k, v);
    for (const Rank r : group.replicas) emit(k, shifted(r.value));
    for (const auto& p : c_.overlaps[t].destinations[d].pieces) {
      const int which = senders(c_, by, t, p, group, [&](std::int32_t r) { emit(k, shifted(r)); });
      emit(k, -1 - which);
    }
  }

  const PlanContext& c_;
  const DomainGroups& groups_;
  std::vector<std::int32_t> part_of_;
  std::vector<std::int32_t> first_;  // per part and side (source, destination): its first rank
  std::vector<std::vector<std::int32_t>> gpus_, nics_, domains_;  // per part, sorted
};

// Whether every part's record equals the first's, value by value (the first's is kept, the
// others compared as they come).
bool all_alike(const PartRecords& records) {
  std::vector<std::int64_t> first;
  records.write([&](std::int32_t k, std::int64_t v) {
    if (k == 0) first.push_back(v);
  });
  std::vector<std::size_t> read(records.parts(), 0);
  bool alike = true;
  records.write([&](std::int32_t k, std::int64_t v) {
    if (k == 0 || !alike) return;
    auto& i = read[at(k)];
    alike = i < first.size() && first[i++] == v;
  });
  return alike &&
         std::ranges::all_of(read.begin() + 1, read.end(), [&](std::size_t n) { return n == first.size(); });
}

}  // namespace

std::optional<PartCopies> copies_of_first_part(const PlanContext& c, const DomainGroups& groups) {
  auto part_of = parts_of_ranks(c, groups);
  if (std::ranges::max(part_of) < 1) return std::nullopt;
  DomainGroups first(groups.size());
  for (std::size_t t = 0; t < groups.size(); ++t)
    for (const auto& gs : groups[t]) {
      auto& kept = first[t].emplace_back();
      for (const auto& g : gs)
        if (part_of[at(g.replicas.front().value)] == 0) kept.push_back(g);
    }
  const PartRecords records(c, groups, std::move(part_of));
  if (!all_alike(records)) return std::nullopt;
  PartCopies out{.first = std::move(first), .shifts = {}};
  for (std::size_t k = 0; k < records.parts(); ++k) out.shifts.push_back(records.shift(k));
  return out;
}

}  // namespace refit::planner_detail
