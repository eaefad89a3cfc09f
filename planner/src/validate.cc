// Plan::validate: the executors trust a plan that passes, so every rule of plan.h is checked here.
#include <algorithm>
#include <optional>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "counting_sort.h"
#include "refit/core/try.h"
#include "refit/planner/plan.h"

namespace refit {
namespace {

// Mesh position of every rank for one layout (-1 where the rank is not in the mesh).
std::vector<std::int32_t> positions(const Layout& l, std::int32_t world) {
  std::vector<std::int32_t> pos(static_cast<std::size_t>(world), -1);
  for (std::int64_t p = 0; p < l.mesh().size(); ++p)
    pos[static_cast<std::size_t>(l.mesh().rank_at(p).value)] = static_cast<std::int32_t>(p);
  return pos;
}

// The parts of some boxes inside a target box, for check_tiling. A part is the box itself where
// the target holds all of it, or the target where the box holds all of it (as they usually do: a
// plan moves whole pieces), so only the boxes the target cuts are made anew.
class Parts {
 public:
  explicit Parts(std::size_t most = 0) { reset(most); }
  // Empty again, for up to `most` boxes (kept capacity: no allocation once it is large enough).
  void reset(std::size_t most) {
    parts_.clear();
    cut_.clear();
    cut_.reserve(most);  // no reallocation while adding: parts_ points into it
  }
  void add(const Box& box, const Box& target) {
    if (target.contains(box))
      parts_.push_back(&box);
    else if (box.contains(target))
      parts_.push_back(&target);
    else if (auto part = intersect(box, target))
      parts_.push_back(&cut_.emplace_back(std::move(*part)));
  }
  std::vector<const Box*>& boxes() { return parts_; }

 private:
  std::vector<Box> cut_;
  std::vector<const Box*> parts_;
};

// The boxes each transfer that a later segment forwards from delivered, by (transfer, tensor):
// one flat array, each transfer's entries contiguous and sorted by tensor, so that a relay's
// lookup is a binary search in its upstream transfer's entries, not a hash of every pair.
class DeliveredIndex {
 public:
  struct Entry {
    std::uint32_t tensor;
    const Box* box;
  };
  explicit DeliveredIndex(const Plan& plan) : first_(plan.transfers.size() + 1, 0) {
    std::vector<bool> forwarded(plan.transfers.size(), false);
    for (const auto& t : plan.transfers)
      for (const auto& s : t.segments)
        if (s.via >= 0) forwarded[static_cast<std::size_t>(s.via)] = true;
    for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
      first_[i] = entries_.size();
      if (!forwarded[i]) continue;
      for (const auto& s : plan.transfers[i].segments)
        entries_.push_back({.tensor = s.tensor, .box = &s.box});
      std::ranges::stable_sort(entries_.begin() + static_cast<std::ptrdiff_t>(first_[i]), entries_.end(), {},
                               &Entry::tensor);
    }
    first_.back() = entries_.size();
  }
  // What transfer `via` delivered of `tensor`, in segment order (nothing for a transfer nothing
  // forwards from).
  std::span<const Entry> of(std::int32_t via, std::uint32_t tensor) const {
    const auto i = static_cast<std::size_t>(via);
    const auto mine = std::span(entries_).subspan(first_[i], first_[i + 1] - first_[i]);
    const auto found = std::ranges::equal_range(mine, tensor, {}, &Entry::tensor);
    return {found.begin(), found.end()};
  }

 private:
  std::vector<Entry> entries_;
  std::vector<std::size_t> first_;  // per transfer, where its entries begin; one past the last at the end
};

struct Context {
  const Plan& plan;
  const ReshardProblem& problem;
  std::vector<std::vector<std::int32_t>> source_positions;       // per tensor
  std::vector<std::vector<std::int32_t>> destination_positions;  // per tensor
  // Per tensor, by source mesh position: its box, made when a segment first needs it (a rank
  // sends many segments of one shard).
  std::vector<std::vector<std::optional<Box>>> source_boxes;
  DeliveredIndex delivered;
  // Per tensor made at landing ranks: its weight's values, scales and landing copy (-1 elsewhere).
  std::vector<std::int32_t> values_of, scales_of, copy_of;
  Parts parts;  // scratch of check_delivered, kept so that its capacity is reused
};

[[nodiscard]] Result<void> check_tensors(const Plan& plan, const ReshardProblem& problem) {
  if (plan.source_ranks != problem.source_ranks() || plan.destination_ranks != problem.destination_ranks())
    return mismatch(fmt::format("plan is for {}+{} ranks, the problem has {}+{}", plan.source_ranks,
                                plan.destination_ranks, problem.source_ranks(), problem.destination_ranks()));
  if (plan.tensors.size() != problem.tensors().size())
    return mismatch(
        fmt::format("plan has {} tensors, the problem {}", plan.tensors.size(), problem.tensors().size()));
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& mine = plan.tensors[i];
    const auto& theirs = problem.tensors()[i].tensor;
    const auto at = fmt::format("tensors[{}] '{}'", i, mine.name);
    if (mine.name != theirs.name)
      return mismatch(fmt::format("tensors[{}]: plan has '{}', the problem '{}'", i, mine.name, theirs.name));
    if (mine.shape != theirs.shape)
      return mismatch(fmt::format("{}: plan has shape [{}], the problem [{}]", at,
                                  fmt::join(mine.shape, ", "), fmt::join(theirs.shape, ", ")));
    if (mine.dtype != theirs.dtype)
      return mismatch(fmt::format("{}: plan has dtype {}, the problem {}", at, dtype_name(mine.dtype),
                                  dtype_name(theirs.dtype)));
    if (mine.quantization != theirs.quantization)
      return mismatch(
          fmt::format("{}: plan and problem quantize it differently (give the --quantize and "
                      "--quantize-at the plan was made with)",
                      at));
  }
  return {};
}

// Boxes must tile `target`: disjoint and adding up to its volume (kMismatch otherwise).
[[nodiscard]] Result<void> check_tiling(std::vector<const Box*>& boxes, const Box& target) {
  std::int64_t volume = 0;
  for (const Box* b : boxes) volume += b->volume();
  std::ranges::sort(boxes, {}, [](const Box* b) { return b->offset[0]; });
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (std::size_t j = i + 1; j < boxes.size(); ++j) {
      const Box& a = *boxes[i];
      const Box& b = *boxes[j];
      if (b.offset[0] >= a.offset[0] + a.extent[0]) break;
      if (overlap(a, b))
        return mismatch(fmt::format("{} is written twice ({} and {})", intersect(a, b)->to_string(),
                                    a.to_string(), b.to_string()));
    }
  if (volume != target.volume())
    return mismatch(fmt::format("receives {} of the {} elements of its box {}", volume, target.volume(),
                                target.to_string()));
  return {};
}

// `box` of `tensor` is what transfer `via` delivered of `tensor`, exactly once.
[[nodiscard]] Result<void> check_delivered(Context& c, std::int32_t via, std::uint32_t tensor,
                                           const Box& box) {
  const auto delivered = c.delivered.of(via, tensor);
  c.parts.reset(delivered.size());
  for (const auto& d : delivered) c.parts.add(*d.box, box);
  // The plan contradicts itself (not the problem): a relay of bytes its feeder did not bring.
  if (auto ok = check_tiling(c.parts.boxes(), box); !ok)
    return invalid(fmt::format("transfer {} did not deliver {} of tensor '{}' exactly once: {}", via,
                               box.to_string(), c.plan.tensors[tensor].name, ok.error().message));
  return {};
}

// `region` of `tensor` is made in quantize step `step`, exactly once.
[[nodiscard]] Result<void> check_made_in(const Transfer& step, std::uint32_t tensor, const Box& region) {
  Parts parts(step.segments.size());
  for (const auto& s : step.segments)
    if (s.tensor == tensor) parts.add(s.box, region);
  return check_tiling(parts.boxes(), region);
}

// A step makes values and scales together: the values of every block its scales scale (the
// scale needs the whole block), and the scales of every block its values fall in (the executors
// quantize the blocks its scales name).
[[nodiscard]] Result<void> check_blocks_made(const Context& c, const Transfer& step, const Segment& s) {
  const auto values = static_cast<std::uint32_t>(c.values_of[s.tensor]);
  const auto scales = static_cast<std::uint32_t>(c.scales_of[s.tensor]);
  const auto& weight = c.plan.tensors[values];
  const auto scheme = weight.quantization->scheme;
  const bool is_scales = s.tensor == scales;
  const Box region =
      is_scales ? quant_blocks_of(scheme, s.box, weight.shape) : quant_scale_box(scheme, s.box);
  if (auto ok = check_made_in(step, is_scales ? values : scales, region); !ok)
    return mismatch(fmt::format("{} {} of tensor '{}' need the {} of {} made in the same step: {}",
                                is_scales ? "scales" : "values", s.box.to_string(), weight.name,
                                is_scales ? "values" : "scales", region.to_string(), ok.error().message));
  return {};
}

const Box& source_box(Context& c, std::uint32_t tensor, std::int32_t position) {
  auto& boxes = c.source_boxes[tensor];
  if (boxes.empty()) boxes.resize(static_cast<std::size_t>(c.problem.tensors()[tensor].source.mesh().size()));
  auto& box = boxes[static_cast<std::size_t>(position)];
  if (!box) box = c.problem.tensors()[tensor].source.box_at_position(position);
  return *box;
}

// The sender holds `s` in its source layout (for fp8 made at landing ranks, its landing layout).
[[nodiscard]] Result<void> check_held(Context& c, const Transfer& t, const Segment& s) {
  const auto& spec = c.problem.tensors()[s.tensor];
  const auto pos = c.source_positions[s.tensor][static_cast<std::size_t>(t.sender.value)];
  if (pos < 0 || !source_box(c, s.tensor, pos).contains(s.box))
    return mismatch(fmt::format("rank {} sends {} of tensor '{}' without holding it", t.sender.value,
                                s.box.to_string(), spec.tensor.name));
  return {};
}

// fp8 values and scales made at landing ranks: a quantize step makes them (values from the landing
// copy its `via` brought, scales there), and only relays of what a step made send them on.
[[nodiscard]] Result<void> check_made_at_landing(Context& c, const Transfer& t, const Segment& s) {
  const auto& name = c.plan.tensors[s.tensor].name;
  const bool scales = c.plan.tensors[s.tensor].quantization->is_scales();
  if (!t.quantizes()) {
    if (s.via == kFromSourceShard)
      return mismatch(fmt::format("rank {} sends {} of tensor '{}' as a source, but a quantize step makes it",
                                  t.sender.value, s.box.to_string(), name));
    return check_delivered(c, s.via, s.tensor, s.box);
  }
  if (scales != (s.via == kFromSourceShard))
    return mismatch(
        fmt::format("in a quantize step, scales are made there and values come from a landing "
                    "copy's transfer; {} of tensor '{}' {}",
                    s.box.to_string(), name, scales ? "names a via" : "names none"));
  if (scales)
    REFIT_TRY(check_held(c, t, s));
  else
    REFIT_TRY(check_delivered(c, s.via, static_cast<std::uint32_t>(c.copy_of[s.tensor]), s.box));
  return check_blocks_made(c, t, s);
}

[[nodiscard]] Result<void> check_segment_source(Context& c, const Transfer& t, const Segment& s) {
  const auto& spec = c.problem.tensors()[s.tensor];
  if (spec.tensor.quantization && spec.tensor.quantization->made_at_landing())
    return check_made_at_landing(c, t, s);
  if (s.via == kFromSourceShard) return check_held(c, t, s);
  return check_delivered(c, s.via, s.tensor, s.box);
}

// Each segment's data is held by its sender (validate_structure() checked the rest).
[[nodiscard]] Result<void> check_transfer(Context& c, const Transfer& t) {
  for (std::size_t k = 0; k < t.segments.size(); ++k)
    REFIT_TRY_IN(check_segment_source(c, t, t.segments[k]), fmt::format("segments[{}]", k));
  return {};
}

struct Received {
  std::int32_t rank;
  std::uint32_t tensor;
  const Box* box;  // as sent; cut to the rank's destination box once per (tensor, rank)
};

// The received boxes lie all over the plan, in no order that memory prefetching could guess:
// asked for this many entries ahead, they have arrived by the time they are read, instead of each
// being a wait on memory (most of checking coverage).
constexpr std::size_t kPrefetchAhead = 8;
void prefetch(const Box* box) {
  __builtin_prefetch(box);
  __builtin_prefetch(reinterpret_cast<const char*>(box) + sizeof(Box) - 1);
}

[[nodiscard]] Result<void> check_coverage(const Context& c) {
  std::vector<Received> received;
  for (const auto& t : c.plan.transfers) {
    const auto r = t.receiver.value;
    if (r < c.plan.source_ranks) continue;
    for (const auto& s : t.segments)
      if (c.destination_positions[s.tensor][static_cast<std::size_t>(r)] >= 0)
        received.push_back({.rank = r, .tensor = s.tensor, .box = &s.box});
  }
  // By (tensor, rank) in linear time: a plan has about a segment per element of `received`.
  received =
      planner_detail::counting_sorted(std::move(received), static_cast<std::size_t>(c.plan.world_size()),
                                      [](const Received& x) { return static_cast<std::size_t>(x.rank); });
  received =
      planner_detail::counting_sorted(std::move(received), c.plan.tensors.size(),
                                      [](const Received& x) { return static_cast<std::size_t>(x.tensor); });
  std::size_t next = 0;
  Parts parts(0);
  for (std::uint32_t t = 0; t < c.problem.tensors().size(); ++t) {
    const auto& dst = c.problem.tensors()[t].destination;
    std::vector<std::pair<std::int32_t, std::int64_t>> by_rank;  // (rank, mesh position)
    for (std::int64_t p = 0; p < dst.mesh().size(); ++p) by_rank.emplace_back(dst.mesh().rank_at(p).value, p);
    std::ranges::sort(by_rank);
    for (const auto& [rank, p] : by_rank) {
      const auto first = next;
      while (next < received.size() && received[next].tensor == t && received[next].rank == rank) ++next;
      const Box mine = dst.box_at_position(p);
      if (mine.empty()) continue;
      parts.reset(next - first);
      for (auto i = first; i < next; ++i) {
        if (i + kPrefetchAhead < received.size()) prefetch(received[i + kPrefetchAhead].box);
        parts.add(*received[i].box, mine);
      }
      // What the plan delivers disagrees with the box the problem gives this rank.
      REFIT_TRY_IN(check_tiling(parts.boxes(), mine),
                   fmt::format("destination rank {}, tensor '{}'", rank, c.plan.tensors[t].name));
    }
  }
  return {};
}

void index_landing(Context& c) {
  c.values_of.assign(c.plan.tensors.size(), -1);
  c.scales_of.assign(c.plan.tensors.size(), -1);
  c.copy_of.assign(c.plan.tensors.size(), -1);
  for (const auto& w : landing_weights(c.plan.tensors))
    for (const auto t : {w.values, w.scales}) {
      c.values_of[t] = static_cast<std::int32_t>(w.values);
      c.scales_of[t] = static_cast<std::int32_t>(w.scales);
      c.copy_of[t] = static_cast<std::int32_t>(w.copy);
    }
}

}  // namespace

Result<void> validate(const Plan& plan, const ReshardProblem& problem) {
  // The tensors first: a plan edited to another dtype is named as such, not as its byte counts.
  REFIT_TRY(check_tensors(plan, problem));
  REFIT_TRY(validate_structure(plan));
  Context c{.plan = plan,
            .problem = problem,
            .source_positions = {},
            .destination_positions = {},
            .source_boxes = std::vector<std::vector<std::optional<Box>>>(problem.tensors().size()),
            .delivered = DeliveredIndex(plan),
            .values_of = {},
            .scales_of = {},
            .copy_of = {},
            .parts = Parts()};
  for (const auto& t : problem.tensors()) {
    c.source_positions.push_back(positions(t.source, plan.world_size()));
    c.destination_positions.push_back(positions(t.destination, plan.world_size()));
  }
  index_landing(c);
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const auto& t = plan.transfers[i];
    REFIT_TRY_IN(check_transfer(c, t),
                 fmt::format("transfers[{}] ({} -> {})", i, t.sender.value, t.receiver.value));
  }
  return check_coverage(c);
}

}  // namespace refit
