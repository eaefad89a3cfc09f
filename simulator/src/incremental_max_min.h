#pragma once
// Max-min fair rates of the active flows, kept up to date as flows come and go, with work in
// proportion to the rates that change rather than to the flows that exist.
//
// Progressive filling (max_min.h) raises a water level L; a resource saturates when its load
// reaches its capacity, freezing its unfrozen flows at L. After flows are added or removed, the
// new filling is identical to the previous one except around the change, so update() replays it
// lazily. A resource is dirty once its filling may differ: it carries an added or removed flow,
// or a flow whose rate differs from before. Clean resources are never looked at: they saturate
// at their old level, freezing their flows at their old rates, as before. Dirty resources are
// replayed in level order from a heap, each predicting its saturation level (its share) from
// its flows:
//   frozen in this replay                   at their new rate;
//   bottlenecked at a clean resource        at their old rate once L passes it (a cap): when
//                                           that bottleneck freezes them, as before;
//   bottlenecked here or at a dirty one,    rising with L.
//   or changed in this replay
// Events change a prediction: a flow frozen elsewhere only raises it (checked when the entry
// surfaces); a flow released lowers it (recomputed at once). A dirty resource whose flows' old
// rate the level passes before it saturates releases them: they rise on, so their other
// resources become dirty. A flow frozen at a rate that differs from its old one dirties its
// other resources, unless one takes the change without any of its own flows moving (absorbs():
// a resource no flow is bottlenecked on, losing load; or one whose level stays within the band
// that keeps its flows' rates). The replay ends when no dirty resource has rising flows; the
// rates are then those of a full progressive filling of the new flow set, while only dirty
// resources were scanned: a handful per event, where re-solving the connected component would
// touch thousands of flows.
//
// "Differs" means by more than a relative 1e-9 (rounding), or with a rate tolerance t, a rise
// by more than t: a flow keeps its rate while its share grows by less, so a change that moves
// others by less than t stops spreading. Falls always apply: no resource ever carries more than
// its capacity. Two effects of the tolerance need care. Flows kept below their share mean a
// resource may become dirty after the level passed some of its flows' rates; those froze then
// (other resources counted on it) unless nothing saturated on that assumption, and a resource
// found full that way saturates at its share below the running level. And the flows a clean
// resource keeps below its level make its share move by what they leave (stops_sharing()).
// Weighted (max_min.h): a flow of weight w rises at w times the level, so everything below
// compares levels (a flow's rate / w, which is what Flow keeps) and sums loads (w x level);
// "flows" counted for a share are their total weight.
// Random churn shows each flow within (1 + t)^2 of the fastest flow on a resource that is full
// to within (1 + t)^2 (tests/simulator/incremental_max_min_test.cc); at t = 0, exact max-min.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/index.h"
#include "refit/simulator/model.h"

namespace refit::sim {

class IncrementalMaxMin {
 public:
  // Flows are the model's tasks; rate_tolerance is t above (0: exact up to rounding).
  IncrementalMaxMin(const Model& model, double rate_tolerance);

  // The flow's rate is 0 until the next update().
  void add(std::int32_t task);
  void remove(std::int32_t task);
  // The flow of `from` carries on as the flow of `to`, at its rate; they cross the same resources.
  void hand_over(std::int32_t from, std::int32_t to);
  // Recomputes the rates after the adds and removes since the last call. Returns the flows whose
  // rate changed (added ones included), valid until the next call; the others keep their rate
  // bit for bit.
  std::span<const std::int32_t> update();

  double rate(std::int32_t task) const {
    const Flow& f = flows_[dense_of_[at(task)]];
    return f.rate * f.weight;
  }
  // Active flows crossing the resource.
  std::size_t load_count(std::int32_t resource) const { return crossing_[at(resource)].size(); }

 private:
  enum class Mark : std::uint8_t { kFree, kFrozen };
  enum class EntryKind : std::uint8_t { kSaturate, kRelease };
  // Active flows live in a dense array, so that the flows of the few resources an update scans
  // sit in a few cache lines however large the model is.
  // Rates here are levels: the flow's rate / its weight.
  struct Flow {
    double rate = 0.0;                      // of the last update
    double new_rate = 0.0;                  // once frozen in the running update
    double weight = 1.0;                    // the model's share_weight
    const ResourceId* resources = nullptr;  // the model's list
    std::int32_t task = -1;
    std::int32_t bottleneck = -1;  // the resource that froze it last; -1 for a new flow
    std::uint32_t epoch = 0;       // == epoch_: touched by the running update, see mark
    std::uint16_t resource_count = 0;
    Mark mark = Mark::kFree;
    bool sharing = false;  // one of its bottleneck's sharing flows (see Resource)
    std::span<const ResourceId> crossed() const { return {resources, resource_count}; }
  };
  struct Crossing {
    std::uint32_t flow;  // dense index
    std::uint32_t slot;  // Model::resource_slot of the (task, resource) pair
  };
  struct Resource {
    // Kept across updates, from when it last saturated: the flows it froze at its share then
    // and that still have it as bottleneck (sharing), the water level they share (its capacity
    // is theirs plus the load of its other flows), the band that level may move in before one
    // of them would change rate (floor: the fastest of them; ceiling: the slowest one's rise
    // tolerance), and how far rate changes of its other flows moved the level since (drift).
    std::int32_t sharing = 0;
    double sharing_weight = 0.0;  // their total weight
    double level = 0.0;
    double floor = 0.0;
    double ceiling = 0.0;
    double drift = 0.0;
    std::uint32_t epoch = 0;    // == epoch_: dirty in the running update
    std::uint32_t version = 0;  // of its current kSaturate entry
    // When it became dirty and when it was last predicted (ticks_ order them): a flow released
    // by a resource that was dirty before this one was predicted counted as rising already.
    std::uint64_t dirtied = 0;
    std::uint64_t predicted = 0;
    bool saturated = false;  // its flows are all frozen
    bool stale = false;      // a flow of it froze since its entry was pushed: the entry is low
    bool release_pending = false;
  };
  struct Entry {
    double level;
    std::int32_t resource;
    std::uint32_t version;
    EntryKind kind;
  };
  // std heap functions build a max-heap; this order puts the lowest level on top, saturations
  // before releases at the same level, then resources in index order (determinism).
  struct After {
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.level != b.level) return a.level > b.level;
      if (a.kind != b.kind) return a.kind > b.kind;
      return a.resource > b.resource;
    }
  };
  struct Prediction {
    double level;  // where the resource saturates (may be below the running level if it is
                   // full already); +infinity if it never does
    double kept;   // lowest rate of its untouched flows bottlenecked here; +infinity if none
  };

  bool touched(const Flow& f) const { return f.epoch == epoch_; }
  bool dirty(std::int32_t resource) const { return resources_[at(resource)].epoch == epoch_; }
  void note_changed_resource(std::int32_t resource);
  void push(double level, std::int32_t resource, EntryKind kind);
  void make_dirty(std::int32_t resource);
  bool held_elsewhere(const Flow& f, std::int32_t resource) const;
  Prediction predict(std::int32_t resource);
  void push_saturation(std::int32_t resource, double level);
  void predict_and_push(std::int32_t resource);
  void saturate(std::int32_t resource, double share);
  void release(std::int32_t resource);
  void freeze(std::uint32_t flow, std::int32_t at, double rate);
  bool absorbs(std::int32_t resource, const Flow& f, double from, double to);
  bool stops_sharing(std::int32_t resource, const Flow& f, double from, double to);

  const Model& model_;
  const double tolerance_;
  std::vector<double> capacity_;
  // Per resource: the active flows crossing it. Removing one is O(1): slot_position_ says where
  // each (task, resource) pair sits in its resource's list.
  std::vector<std::vector<Crossing>> crossing_;
  std::vector<std::uint32_t> slot_position_;
  std::vector<Resource> resources_;
  std::vector<Flow> flows_;                // by dense index
  std::vector<std::uint32_t> dense_of_;    // by task, while active
  std::vector<std::uint32_t> free_dense_;  // dense indices to reuse
  std::vector<std::uint32_t> added_;
  std::vector<std::int32_t> changed_resources_;  // by add/remove since the last update
  std::vector<char> is_changed_resource_;

  // The running update. Marks compare with epoch_, bumped per update, so nothing is cleared.
  std::uint32_t epoch_ = 0;
  std::uint64_t ticks_ = 0;
  double level_ = 0.0;
  std::vector<Entry> heap_;
  std::vector<std::pair<double, double>> caps_;  // scratch of predict(): (level, weight)
  std::vector<std::int32_t> changed_;            // tasks
};

}  // namespace refit::sim
