#include "refit/models/storage_check.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit::models {
namespace {

// Contiguous runs of parameter elements a check may enumerate per rank: regions whose bounding
// ranges interleave are compared run by run, and 2^26 runs (a second or so) is far above any
// framework's layout (whose regions are runs of rows, apart from each other).
constexpr std::int64_t kMaxCheckedRuns = std::int64_t{1} << 26;

struct Context {
  const ReshardProblem& problem;
  const RankStorage& rank_storage;
  Rank rank;
  bool source;
  std::string where;  // "<where>.ranks[i]"
  std::int64_t runs_left = kMaxCheckedRuns;

  std::string region(std::size_t j) const { return fmt::format("{}.regions[{}]", where, j); }
  const FrameworkParameter& parameter_of(const StoredRegion& r) const {
    return rank_storage.parameters[static_cast<std::size_t>(r.parameter)];
  }
};

[[nodiscard]] Result<void> check_parameters(const Context& c) {
  std::unordered_set<std::string_view> names;
  for (std::size_t k = 0; k < c.rank_storage.parameters.size(); ++k) {
    const auto& p = c.rank_storage.parameters[k];
    const auto at = fmt::format("{}.parameters[{}]", c.where, k);
    if (p.name.empty()) return mismatch(fmt::format("{}: a parameter without a name", at));
    if (!names.insert(p.name).second)
      return mismatch(
          fmt::format("{}: a second parameter named '{}' (the rank's names must be unique)", at, p.name));
    if (std::ranges::any_of(p.shape, [](std::int64_t d) { return d < 0; }))
      return out_of_range(fmt::format("{}: parameter '{}' has a negative size in its shape", at, p.name));
    const auto elements = REFIT_TRY_IN(checked_product(p.shape, limits::kMaxElements, "elements"),
                                       fmt::format("{}: parameter '{}'", at, p.name));
    REFIT_TRY_IN(checked_mul(elements, dtype_size(p.dtype), limits::kMaxBytes, "bytes"),
                 fmt::format("{}: parameter '{}'", at, p.name));
  }
  return {};
}

// The region's own fields: its tensor, its box inside the rank's box, its parameter and dtype, and
// offset and strides that keep it inside the parameter.
[[nodiscard]] Result<void> check_region(const Context& c, std::size_t j) {
  const auto& r = c.rank_storage.regions[j];
  const auto at = c.region(j);
  if (r.tensor >= c.problem.tensors().size())
    return mismatch(
        fmt::format("{}: tensor {} of a problem of {}", at, r.tensor, c.problem.tensors().size()));
  const auto& t = c.problem.tensors()[r.tensor];
  if (r.parameter < 0 || static_cast<std::size_t>(r.parameter) >= c.rank_storage.parameters.size())
    return mismatch(
        fmt::format("{}: parameter {} of the rank's {}", at, r.parameter, c.rank_storage.parameters.size()));
  const auto& p = c.parameter_of(r);
  if (c.source && !held_at_source(t.tensor))
    return mismatch(fmt::format("{}: tensor '{}' is made by its senders; no training parameter holds it", at,
                                t.tensor.name));
  const auto dims = t.tensor.shape.size();
  if (r.box.offset.size() != dims || r.box.extent.size() != dims || r.strides.size() != dims)
    return mismatch(
        fmt::format("{}: a box or strides of other than tensor '{}''s {} dims", at, t.tensor.name, dims));
  const auto held = REFIT_TRY_IN((c.source ? t.source : t.destination).local_box(c.rank), at);
  if (!r.box.empty() && !held.contains(r.box))
    return mismatch(fmt::format("{}: box {} of tensor '{}' is not part of the rank's box {}", at,
                                r.box.to_string(), t.tensor.name, held.to_string()));
  if (p.dtype != held_dtype(t.tensor, c.source))
    return mismatch(fmt::format("{}: parameter '{}' is {}, but tensor '{}' is {} on this side", at, p.name,
                                dtype_name(p.dtype), t.tensor.name,
                                dtype_name(held_dtype(t.tensor, c.source))));
  if (r.box.empty()) return {};
  const auto end = strided_end(r.offset, r.box.extent, r.strides);
  if (!end || r.offset < 0)
    return mismatch(
        fmt::format("{}: offset {} and strides [{}] do not lay the box out in parameter '{}' (negative, "
                    "zero where the box has several elements, or past 2^63)",
                    at, r.offset, fmt::join(r.strides, ", "), p.name));
  if (*end > p.elements())
    return mismatch(fmt::format("{}: the region reaches element {} of parameter '{}', which has {}", at, *end,
                                p.name, p.elements()));
  return {};
}

// The regions of each tensor tile the rank's box of it: inside it (check_region), no two sharing
// an element, and as many elements as the box.
[[nodiscard]] Result<void> check_tensor_tiling(const Context& c, std::uint32_t tensor, const Box& box,
                                               std::vector<std::size_t> regions) {
  const auto& name = c.problem.tensors()[tensor].tensor.name;
  if (regions.empty())
    return mismatch(fmt::format("{}: no region holds the rank's box {} of tensor '{}': its bytes would be {}",
                                c.where, box.to_string(), name, c.source ? "read from nowhere" : "dropped"));
  const auto& all = c.rank_storage.regions;
  std::ranges::sort(regions, {}, [&](std::size_t j) { return all[j].box.offset[0]; });
  std::vector<std::size_t> active;  // regions whose rows reach past the current one's first row
  std::int64_t covered = 0;
  for (const std::size_t j : regions) {
    const Box& b = all[j].box;
    std::erase_if(active,
                  [&](std::size_t k) { return all[k].box.offset[0] + all[k].box.extent[0] <= b.offset[0]; });
    for (const std::size_t k : active)
      if (overlap(all[k].box, b))
        return mismatch(
            fmt::format("{} and {}: boxes {} and {} of tensor '{}' share elements (each element "
                        "of the rank's box lies in one region)",
                        c.region(k), c.region(j), all[k].box.to_string(), b.to_string(), name));
    active.push_back(j);
    covered += b.volume();
  }
  if (covered != box.volume())
    return mismatch(fmt::format(
        "{}: the regions of tensor '{}' hold {} of the {} elements of the rank's box {}: "
        "the others' bytes would be {}",
        c.where, name, covered, box.volume(), box.to_string(), c.source ? "read from nowhere" : "dropped"));
  return {};
}

[[nodiscard]] Result<void> check_tiling(const Context& c) {
  std::vector<std::vector<std::size_t>> by_tensor(c.problem.tensors().size());
  for (std::size_t j = 0; j < c.rank_storage.regions.size(); ++j)
    if (!c.rank_storage.regions[j].box.empty()) by_tensor[c.rank_storage.regions[j].tensor].push_back(j);
  for (std::uint32_t t = 0; t < c.problem.tensors().size(); ++t) {
    if (c.source && !held_at_source(c.problem.tensors()[t].tensor)) continue;  // its senders make it
    const auto& layout = c.source ? c.problem.tensors()[t].source : c.problem.tensors()[t].destination;
    const auto box = layout.local_box(c.rank);
    if (!box || box->empty()) continue;  // check_region refused regions of tensors the rank lacks
    REFIT_TRY(check_tensor_tiling(c, t, *box, std::move(by_tensor[t])));
  }
  return {};
}

// A region as contiguous runs of parameter elements: `run` elements at offset + sum(i[d] x
// strides[d]) for every index i of `extents` (dims by decreasing stride, contiguous inner dims
// merged into the run).
struct Runs {
  std::int64_t offset = 0;
  std::int64_t run = 1;
  std::vector<std::int64_t> extents, strides;
  std::int64_t count() const {
    return std::accumulate(extents.begin(), extents.end(), std::int64_t{1}, std::multiplies<>());
  }
};

Runs runs_of(const StoredRegion& r) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, extent), extents > 1
  for (std::size_t d = 0; d < r.strides.size(); ++d)
    if (r.box.extent[d] > 1) dims.emplace_back(r.strides[d], r.box.extent[d]);
  std::ranges::sort(dims, std::greater<>());
  Runs out{.offset = r.offset, .run = 1, .extents = {}, .strides = {}};
  while (!dims.empty() && dims.back().first == out.run) {
    out.run *= dims.back().second;
    dims.pop_back();
  }
  for (const auto& [stride, extent] : dims) {
    out.strides.push_back(stride);
    out.extents.push_back(extent);
  }
  return out;
}

// Whether each run lies past the whole of the runs inside it: then no two elements meet and the
// runs come in increasing order.
bool nested(const Runs& r) {
  std::int64_t span = r.run;
  for (std::size_t d = r.strides.size(); d-- > 0;) {
    if (r.strides[d] < span) return false;
    span += (r.extents[d] - 1) * r.strides[d];
  }
  return true;
}

struct Run {
  std::int64_t start, end;
  std::size_t region;
};

// Appends the runs of `r` that meet [lo, hi); false once the context's budget is spent.
bool append_runs(Context& c, const Runs& r, std::size_t region, std::int64_t lo, std::int64_t hi,
                 std::vector<Run>& out) {
  c.runs_left -= r.count();
  if (c.runs_left < 0) return false;
  std::vector<std::int64_t> index(r.extents.size(), 0);
  for (std::int64_t n = r.count(); n > 0; --n) {
    std::int64_t start = r.offset;
    for (std::size_t d = 0; d < index.size(); ++d) start += index[d] * r.strides[d];
    if (start < hi && start + r.run > lo) out.push_back({start, start + r.run, region});
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++index[d] < r.extents[d]) break;
      index[d] = 0;
    }
  }
  return true;
}

// The first two runs of `runs` that share an element.
std::optional<std::pair<std::size_t, std::size_t>> first_meeting(std::vector<Run>& runs) {
  std::ranges::sort(runs, {}, &Run::start);
  for (std::size_t i = 1; i < runs.size(); ++i)
    if (runs[i].start < runs[i - 1].end) return std::pair{runs[i - 1].region, runs[i].region};
  return std::nullopt;
}

[[nodiscard]] Result<void> too_interleaved(const Context& c) {
  return out_of_range(
      fmt::format("{}: the regions' runs interleave too finely to check (past {} runs of "
                  "elements); lay parameters out in runs of rows",
                  c.where, kMaxCheckedRuns));
}

[[nodiscard]] Result<void> sharing(const Context& c, std::size_t a, std::size_t b) {
  const auto& p = c.parameter_of(c.rank_storage.regions[b]).name;
  if (a == b)
    return mismatch(fmt::format("{}: its strides put two elements of its box in one place of parameter '{}'",
                                c.region(a), p));
  return mismatch(fmt::format("{} and {}: elements of both lie in one place of parameter '{}'",
                              c.region(std::min(a, b)), c.region(std::max(a, b)), p));
}

// Regions a and b, whose bounding ranges meet, compared run by run where they meet.
[[nodiscard]] Result<void> check_pair(Context& c, std::size_t a, std::size_t b, const std::vector<Runs>& runs,
                                      const std::vector<std::pair<std::int64_t, std::int64_t>>& range) {
  const auto lo = std::max(range[a].first, range[b].first);
  const auto hi = std::min(range[a].second, range[b].second);
  std::vector<Run> meeting;
  if (!append_runs(c, runs[a], a, lo, hi, meeting) || !append_runs(c, runs[b], b, lo, hi, meeting))
    return too_interleaved(c);
  if (const auto pair = first_meeting(meeting)) return sharing(c, pair->first, pair->second);
  return {};
}

// No two elements of the rank's regions in one place: each region with itself, then each pair whose
// bounding ranges meet (a sweep over each parameter's regions by first element).
[[nodiscard]] Result<void> check_memory(Context& c) {
  const auto& all = c.rank_storage.regions;
  std::vector<Runs> runs(all.size());
  std::vector<std::pair<std::int64_t, std::int64_t>> range(all.size());  // [first, last + 1) elements
  std::vector<std::vector<std::size_t>> by_parameter(c.rank_storage.parameters.size());
  for (std::size_t j = 0; j < all.size(); ++j) {
    if (all[j].box.empty()) continue;
    runs[j] = runs_of(all[j]);
    range[j] = {all[j].offset, *strided_end(all[j].offset, all[j].box.extent, all[j].strides)};
    by_parameter[static_cast<std::size_t>(all[j].parameter)].push_back(j);
    if (nested(runs[j])) continue;
    std::vector<Run> own;
    if (!append_runs(c, runs[j], j, range[j].first, range[j].second, own)) return too_interleaved(c);
    if (const auto pair = first_meeting(own)) return sharing(c, pair->first, pair->second);
  }
  for (auto& regions : by_parameter) {
    std::ranges::sort(regions, {}, [&](std::size_t j) { return range[j].first; });
    std::vector<std::size_t> active;
    for (const std::size_t j : regions) {
      std::erase_if(active, [&](std::size_t k) { return range[k].second <= range[j].first; });
      for (const std::size_t k : active) REFIT_TRY(check_pair(c, k, j, runs, range));
      active.push_back(j);
    }
  }
  return {};
}

}  // namespace

Result<void> check_rank_storage(const StorageMap& map, std::size_t index, const ReshardProblem& problem,
                                bool source, const std::string& where) {
  Context c{.problem = problem,
            .rank_storage = map.ranks[index],
            .rank = Rank{map.first_rank + static_cast<std::int32_t>(index)},
            .source = source,
            .where = fmt::format("{}.ranks[{}]", where, index),
            .runs_left = kMaxCheckedRuns};
  REFIT_TRY(check_parameters(c));
  for (std::size_t j = 0; j < c.rank_storage.regions.size(); ++j) REFIT_TRY(check_region(c, j));
  REFIT_TRY(check_tiling(c));
  return check_memory(c);
}

Result<void> check_storage(const StorageMap& map, const ReshardProblem& problem, bool source,
                           const std::string& where) {
  for (std::size_t i = 0; i < map.ranks.size(); ++i)
    REFIT_TRY(check_rank_storage(map, i, problem, source, where));
  return {};
}

}  // namespace refit::models
