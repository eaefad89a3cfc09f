#include "incremental_max_min.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace refit::sim {
namespace {

// Relative change below which a rate counts as unchanged. Replaying a resource recomputes its
// level from sums that round differently from last time; treating the last bits as a change
// would dirty neighbours and re-predict completions for nothing.
constexpr double kRateTolerance = 1e-9;
constexpr double kNever = std::numeric_limits<double>::infinity();

}  // namespace

IncrementalMaxMin::IncrementalMaxMin(const Model& model, double rate_tolerance)
    : model_(model),
      tolerance_(std::max(kRateTolerance, rate_tolerance)),
      capacity_(static_cast<std::size_t>(model.resource_count())),
      crossing_(capacity_.size()),
      slot_position_(model.resource_slot_count()),
      resources_(capacity_.size()),
      dense_of_(static_cast<std::size_t>(model.task_count())),
      is_changed_resource_(capacity_.size(), 0) {
  for (std::int32_t r = 0; r < model.resource_count(); ++r)
    capacity_[at(r)] = model.capacity(ResourceId{r}).value;
}

void IncrementalMaxMin::note_changed_resource(std::int32_t resource) {
  if (is_changed_resource_[at(resource)]) return;
  is_changed_resource_[at(resource)] = 1;
  changed_resources_.push_back(resource);
}

void IncrementalMaxMin::add(std::int32_t task) {
  std::uint32_t d = static_cast<std::uint32_t>(flows_.size());
  if (free_dense_.empty()) {
    flows_.emplace_back();
  } else {
    d = free_dense_.back();
    free_dense_.pop_back();
  }
  dense_of_[at(task)] = d;
  const auto crossed = model_.resources(TaskId{task});
  flows_[d] = Flow{.weight = model_.share_weight(TaskId{task}),
                   .resources = crossed.data(),
                   .task = task,
                   .resource_count = static_cast<std::uint16_t>(crossed.size())};
  const auto slot = static_cast<std::uint32_t>(model_.resource_slot(TaskId{task}));
  for (std::uint32_t k = 0; k < crossed.size(); ++k) {
    auto& list = crossing_[at(crossed[k].value)];
    slot_position_[slot + k] = static_cast<std::uint32_t>(list.size());
    list.push_back({.flow = d, .slot = slot + k});
    note_changed_resource(crossed[k].value);
  }
  added_.push_back(d);
}

void IncrementalMaxMin::remove(std::int32_t task) {
  const auto crossed = model_.resources(TaskId{task});
  const auto slot = static_cast<std::uint32_t>(model_.resource_slot(TaskId{task}));
  for (std::uint32_t k = 0; k < crossed.size(); ++k) {
    auto& list = crossing_[at(crossed[k].value)];
    const std::uint32_t position = slot_position_[slot + k];
    list[position] = list.back();
    slot_position_[list[position].slot] = position;
    list.pop_back();
    note_changed_resource(crossed[k].value);
  }
  free_dense_.push_back(dense_of_[at(task)]);
}

void IncrementalMaxMin::hand_over(std::int32_t from, std::int32_t to) {
  const std::uint32_t d = dense_of_[at(from)];
  dense_of_[at(to)] = d;
  Flow& f = flows_[d];
  f.task = to;
  f.resources = model_.resources(TaskId{to}).data();
  const auto old_slot = model_.resource_slot(TaskId{from});
  const auto new_slot = model_.resource_slot(TaskId{to});
  for (std::uint32_t k = 0; k < f.resource_count; ++k) {
    const std::uint32_t position = slot_position_[old_slot + k];
    slot_position_[new_slot + k] = position;
    crossing_[at(f.resources[k].value)][position].slot = static_cast<std::uint32_t>(new_slot + k);
  }
}

void IncrementalMaxMin::push(double level, std::int32_t resource, EntryKind kind) {
  heap_.push_back(
      {.level = level, .resource = resource, .version = resources_[at(resource)].version, .kind = kind});
  std::push_heap(heap_.begin(), heap_.end(), After{});
}

// The level at which the resource saturates if its flows behave as predicted (see the header):
// water-filling of what the frozen flows leave over the free flows and the capped ones.
IncrementalMaxMin::Prediction IncrementalMaxMin::predict(std::int32_t resource) {
  resources_[at(resource)].predicted = ++ticks_;
  double left = capacity_[at(resource)];
  double kept = kNever;
  std::size_t rising = 0;
  double rising_weight = 0.0;
  caps_.clear();
  for (const Crossing c : crossing_[at(resource)]) {
    const Flow& f = flows_[c.flow];
    const bool rises = touched(f) ? f.mark != Mark::kFrozen : f.bottleneck == resource || dirty(f.bottleneck);
    if (rises) {
      // A flow bottlenecked at a dirty resource is not capped: that one is replayed too, and may
      // release it.
      ++rising;
      rising_weight += f.weight;
      if (!touched(f) && f.bottleneck == resource) kept = std::min(kept, f.rate);
    } else if (touched(f)) {
      left -= f.new_rate * f.weight;
    } else if (f.rate <= level_) {
      left -= f.rate * f.weight;
    } else {
      caps_.emplace_back(f.rate, f.weight);
    }
  }
  rising += caps_.size();
  for (const auto& [cap, weight] : caps_) rising_weight += weight;
  // Caps below the fair share freeze before it and leave more to the others, so the share only
  // grows: absorb them until none is left below it (a pass or two, no sorting).
  for (;;) {
    if (rising == 0) return {.level = kNever, .kept = kept};
    const double share = left / rising_weight;
    const std::size_t before = caps_.size();
    std::erase_if(caps_, [&](const std::pair<double, double>& c) {
      if (c.first >= share) return false;
      left -= c.first * c.second;
      --rising;
      rising_weight -= c.second;
      return true;
    });
    if (caps_.size() == before) return {.level = std::max(0.0, share), .kept = kept};
  }
}

void IncrementalMaxMin::push_saturation(std::int32_t resource, double level) {
  Resource& r = resources_[at(resource)];
  r.stale = false;
  ++r.version;
  if (level < kNever) push(level, resource, EntryKind::kSaturate);
}

void IncrementalMaxMin::predict_and_push(std::int32_t resource) {
  push_saturation(resource, predict(resource).level);
}

// Its flows bottlenecked here will rise past their old rate unless it saturates by then: from
// the lowest of those rates on, so that other resources that took them as capped at their rate
// never freeze them above it (see freeze()). One that the level passed already (kept below its
// share by the tolerance) stays at its rate if a resource that saturated counted on that.
void IncrementalMaxMin::make_dirty(std::int32_t resource) {
  Resource& r = resources_[at(resource)];
  r.epoch = epoch_;
  r.dirtied = ++ticks_;
  r.saturated = false;
  r.release_pending = false;
  r.sharing = 0;  // until it saturates again
  r.sharing_weight = 0.0;
  Prediction p = predict(resource);
  if (p.kept < level_) {
    for (const Crossing c : crossing_[at(resource)]) {
      const Flow& f = flows_[c.flow];
      if (!touched(f) && f.bottleneck == resource && f.rate < level_ && held_elsewhere(f, resource))
        freeze(c.flow, resource, f.rate);
    }
    p = predict(resource);
  }
  if (p.kept < kNever) {
    r.release_pending = true;
    push(std::max(level_, p.kept * (1.0 + tolerance_)), resource, EntryKind::kRelease);
  }
  push_saturation(resource, p.level);
}

// Whether another resource of the flow saturated in this update taking its rate as fixed.
bool IncrementalMaxMin::held_elsewhere(const Flow& f, std::int32_t resource) const {
  return std::any_of(f.crossed().begin(), f.crossed().end(), [&](ResourceId q) {
    return q.value != resource && dirty(q.value) && resources_[at(q.value)].saturated;
  });
}

void IncrementalMaxMin::freeze(std::uint32_t flow, std::int32_t at, double rate) {
  Flow& f = flows_[flow];
  const double from = f.rate;
  const bool moved = rate > from * (1.0 + tolerance_) || rate < from * (1.0 - kRateTolerance);
  const bool left_clean = f.sharing && f.bottleneck != at && !dirty(f.bottleneck);
  f.epoch = epoch_;
  f.mark = Mark::kFrozen;
  f.new_rate = moved ? rate : from;
  f.sharing = false;  // saturate() says whether it shares `at`
  if (moved) changed_.push_back(f.task);
  const std::int32_t was = std::exchange(f.bottleneck, at);
  if (left_clean && !stops_sharing(was, f, from, f.new_rate)) make_dirty(was);
  for (const ResourceId q : f.crossed()) {
    if (q.value == at || (left_clean && q.value == was)) continue;
    if (dirty(q.value))
      resources_[refit::at(q.value)].stale = true;  // frozen, it takes no more: q saturates later
    else if (moved && !absorbs(q.value, f, from, f.new_rate))
      make_dirty(q.value);
  }
}

// Whether a clean resource can take the rate change of one of its other flows without any of
// its sharing flows moving, so that replaying it would change nothing: a resource nobody shares
// has room to spare (or is full by a tie), and a flow slowing down frees more; otherwise the
// change moves the level, which must stay in its band, and the flow must stay below it.
bool IncrementalMaxMin::absorbs(std::int32_t resource, const Flow& f, double from, double to) {
  Resource& r = resources_[at(resource)];
  if (r.sharing == 0) return to <= from;
  const double drift = r.drift + (to - from) * f.weight;
  const double level = r.level - drift / r.sharing_weight;
  if (level > r.ceiling || level < r.floor * (1.0 - kRateTolerance) || to > level * (1.0 + kRateTolerance))
    return false;
  r.drift = drift;
  return true;
}

// A sharing flow of a clean resource froze elsewhere (from one rate to another): the others
// share what it leaves. Whether they can keep their rates doing so.
bool IncrementalMaxMin::stops_sharing(std::int32_t resource, const Flow& f, double from, double to) {
  Resource& r = resources_[at(resource)];
  const double w = r.sharing_weight;
  --r.sharing;
  r.sharing_weight -= f.weight;
  if (r.sharing == 0) return to <= from;
  r.level = (w * r.level - r.drift - to * f.weight) / r.sharing_weight;
  r.drift = 0.0;
  return r.level <= r.ceiling && r.level >= r.floor * (1.0 - kRateTolerance) &&
         to <= r.level * (1.0 + kRateTolerance);
}

// Freezes every flow still rising here at the resource's fair share; a flow capped below the
// share by a clean bottleneck froze there already. The share is the running level, or below it
// for a resource found full when it became dirty: a release held back by the tolerance let the
// level pass the share it had kept all along.
void IncrementalMaxMin::saturate(std::int32_t resource, double share) {
  Resource& r = resources_[at(resource)];
  r.saturated = true;  // before freezing: resources this dirties see what it counted on
  r.sharing = 0;
  r.sharing_weight = 0.0;
  r.floor = 0.0;
  r.ceiling = kNever;
  for (const Crossing c : crossing_[at(resource)]) {
    Flow& f = flows_[c.flow];
    if (touched(f)) {
      if (f.mark == Mark::kFrozen) continue;
    } else if (f.bottleneck != resource && !dirty(f.bottleneck) && f.rate < share) {
      continue;
    }
    freeze(c.flow, resource, share);
    f.sharing = true;
    ++r.sharing;
    r.sharing_weight += f.weight;
    r.floor = std::max(r.floor, f.new_rate);
    r.ceiling = std::min(r.ceiling, f.new_rate * (1.0 + tolerance_));
  }
  r.level = share;
  r.drift = 0.0;
}

// The level passed the old rate of the flows bottlenecked here: they rise on, so they are no
// longer capped on their other resources. A dirty resource predicted since this one became dirty
// counted them as rising already (predict()): its prediction stands.
void IncrementalMaxMin::release(std::int32_t resource) {
  const std::uint64_t dirtied = resources_[at(resource)].dirtied;
  for (const Crossing c : crossing_[at(resource)]) {
    Flow& f = flows_[c.flow];
    if (touched(f) || f.bottleneck != resource) continue;
    f.epoch = epoch_;
    f.mark = Mark::kFree;
    for (const ResourceId q : f.crossed()) {
      if (q.value == resource) continue;
      const Resource& other = resources_[at(q.value)];
      if (!dirty(q.value))
        make_dirty(q.value);
      else if (!other.saturated && other.predicted < dirtied)
        predict_and_push(q.value);
    }
  }
}

std::span<const std::int32_t> IncrementalMaxMin::update() {
  changed_.clear();
  if (changed_resources_.empty()) return changed_;
  ++epoch_;
  level_ = 0.0;
  heap_.clear();
  for (const std::uint32_t d : added_) {
    flows_[d].epoch = epoch_;
    flows_[d].mark = Mark::kFree;
  }
  added_.clear();
  for (const std::int32_t r : changed_resources_) {
    is_changed_resource_[at(r)] = 0;
    make_dirty(r);
  }
  changed_resources_.clear();
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), After{});
    const Entry e = heap_.back();
    heap_.pop_back();
    Resource& r = resources_[at(e.resource)];
    if (e.kind == EntryKind::kRelease) {
      if (!r.release_pending || r.saturated) continue;
      r.release_pending = false;
      level_ = std::max(level_, e.level);
      release(e.resource);
    } else if (!r.saturated && e.version == r.version) {
      if (r.stale) {
        predict_and_push(e.resource);
        continue;
      }
      level_ = std::max(level_, e.level);
      saturate(e.resource, e.level);
    }
  }
  for (const std::int32_t task : changed_) {
    Flow& f = flows_[dense_of_[at(task)]];
    f.rate = f.new_rate;
  }
  return changed_;
}

}  // namespace refit::sim
