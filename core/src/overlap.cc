#include "refit/core/overlap.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

namespace refit {

std::vector<Shard> distinct_shards(const Layout& layout) {
  std::vector<Shard> shards;
  std::map<Box, std::size_t> index;
  const auto& mesh = layout.mesh();
  for (std::int64_t p = 0; p < mesh.size(); ++p) {
    Box box = layout.box_at_position(p);
    if (box.empty()) continue;
    auto [it, inserted] = index.try_emplace(std::move(box), shards.size());
    if (inserted) shards.push_back(Shard{.box = it->first, .holders = {}});
    shards[it->second].holders.push_back(mesh.rank_at(p));
  }
  return shards;
}

namespace {

// Non-empty source shards form a product grid of per-dim interval partitions: every tensor dim
// is split only by its own mesh axes, and the axes of different dims vary independently.
// So a destination box meets exactly the shards whose per-dim intervals it meets.
class SourceGrid {
 public:
  explicit SourceGrid(const std::vector<Shard>& shards) {
    if (shards.empty()) return;
    const std::size_t rank = shards.front().box.rank();
    intervals_.resize(rank);
    for (const auto& s : shards)
      for (std::size_t d = 0; d < rank; ++d)
        intervals_[d].push_back({s.box.offset[d], s.box.offset[d] + s.box.extent[d]});
    for (auto& v : intervals_) {
      std::ranges::sort(v);
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
    for (std::size_t i = 0; i < shards.size(); ++i) {
      std::vector<std::size_t> cell(rank);
      for (std::size_t d = 0; d < rank; ++d)
        cell[d] = static_cast<std::size_t>(
            std::ranges::lower_bound(intervals_[d], Span{shards[i].box.offset[d], 0}) -
            intervals_[d].begin());
      cell_to_shard_.emplace(pack(cell), i);
    }
  }

  // Calls f(shard index) for every source shard meeting `box`.
  template <class F>
  void for_each_meeting(const Box& box, F&& f) const {
    const std::size_t rank = intervals_.size();
    if (rank == 0) return;
    std::vector<std::size_t> lo(rank), hi(rank);
    for (std::size_t d = 0; d < rank; ++d) {
      const auto& v = intervals_[d];
      const auto first = box.offset[d];
      const auto last = first + box.extent[d];
      lo[d] = static_cast<std::size_t>(
          std::ranges::partition_point(v, [&](const Span& s) { return s.end <= first; }) - v.begin());
      hi[d] = static_cast<std::size_t>(
          std::ranges::partition_point(v, [&](const Span& s) { return s.begin < last; }) - v.begin());
      if (lo[d] >= hi[d]) return;
    }
    std::vector<std::size_t> cur = lo;
    while (true) {
      if (auto it = cell_to_shard_.find(pack(cur)); it != cell_to_shard_.end()) f(it->second);
      std::size_t d = rank;
      while (d > 0) {
        --d;
        if (++cur[d] < hi[d]) break;
        cur[d] = lo[d];
        if (d == 0) return;
      }
    }
  }

 private:
  struct Span {
    std::int64_t begin;
    std::int64_t end;
    auto operator<=>(const Span&) const = default;
  };
  std::uint64_t pack(const std::vector<std::size_t>& cell) const {
    std::uint64_t key = 0;
    for (std::size_t d = 0; d < cell.size(); ++d) key = key * (intervals_[d].size() + 1) + cell[d];
    return key;
  }

  std::vector<std::vector<Span>> intervals_;  // per dim: sorted, disjoint, non-empty
  std::unordered_map<std::uint64_t, std::size_t> cell_to_shard_;
};

}  // namespace

Result<Overlap> overlaps(const Layout& src, const Layout& dst) {
  if (src.tensor_shape() != dst.tensor_shape())
    return mismatch(fmt::format("source shape {} differs from destination shape {}",
                                Box::whole(src.tensor_shape()).to_string(),
                                Box::whole(dst.tensor_shape()).to_string()));
  Overlap out;
  out.sources = distinct_shards(src);
  const SourceGrid grid(out.sources);
  for (auto& shard : distinct_shards(dst)) {
    DestinationShard d{.shard = std::move(shard), .pieces = {}};
    grid.for_each_meeting(d.shard.box, [&](std::size_t s) {
      if (auto piece = intersect(out.sources[s].box, d.shard.box))
        d.pieces.push_back(Piece{.box = std::move(*piece), .source = static_cast<std::uint32_t>(s)});
    });
    out.destinations.push_back(std::move(d));
  }
  return out;
}

const DestinationShard* Overlap::destination_of(Rank r) const {
  for (const auto& d : destinations)
    if (std::ranges::find(d.shard.holders, r) != d.shard.holders.end()) return &d;
  return nullptr;
}

}  // namespace refit
