#pragma once
// Where the plan model cuts each transfer into pieces (tasks), and the order and streams its
// pairs send in (plan_model.cc says why). A relay pipelines from each of its upstreams, as the
// executors' chunk waits let it: its head waits for the upstream chunks its head forwards, and
// the piece from the first chunk that forwards the most of an upstream for that (the lowering's
// chunk waits); a transfer of a pair whose receiver grants `window` chunks ahead waits for the
// pair's chunk `window` chunks before its first. Each transfer is cut where others wait for it.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/index.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/planner/plan.h"
#include "refit/simulator/calls.h"

namespace refit::sim {

class PieceCuts {
 public:
  // A transfer waits for chunk `chunks` of `holder` (counted from 1 within it) to land.
  struct Grant {
    std::int32_t holder = -1;
    std::int64_t chunks = 0;
  };
  // Where a pipelined relay waits for one of its upstreams: its piece from chunk `from` (counted
  // from 0 within it) starts once `upstream` has delivered its first `chunks` chunks.
  struct RelayWait {
    std::int64_t from = 0;
    std::int32_t upstream = -1;
    std::int64_t chunks = 0;
  };
  // `call_of`: per transfer its call in `calls` (call_of_each_transfer), empty without calls;
  // `window` >= 0 chunks granted per pair (0: no grants). `lowered` outlives the cuts.
  [[nodiscard]] static Result<PieceCuts> make(const lowering::LoweredPlan& lowered, const CallSchedule* calls,
                                              std::span<const std::int32_t> call_of, std::int64_t window);

  // The transfers that run, in the order their senders issue them: by call, then plan order.
  std::span<const std::int32_t> order() const { return order_; }
  // Streams numbered from 0: one per (call queue, sender, receiver) pair when pairs stream.
  std::int32_t streams() const { return streams_; }
  std::int32_t stream(std::int32_t t) const { return stream_[at(t)]; }
  Grant grant(std::int32_t t) const { return grant_[at(t)]; }
  // t's waits by `from`: what its first group of chunks forwards (one chunk, or a slice where
  // relays store and forward slices), and for each upstream the most of it any chunk of t
  // forwards, from the group of the first chunk that forwards that much (a pair's chunks go in
  // order, so all after it wait too). Between two waits a piece flows as if its data were there:
  // cut at every chunk, the relays of an m2n-ring plan made 4x the tasks (DeepSeek-V3 on DGX
  // H100), and no refit prediction of bench/plan_quality_scan.py's draw moved by more than 0.4 %.
  // Empty where t is no pipelined relay (then it waits for its upstreams' ends).
  std::span<const RelayWait> relay_waits(std::int32_t t) const;
  std::span<const std::int32_t> upstreams(std::int32_t t) const;
  // Where t is cut, in chunks counted from 1 within it, ascending and ending with all its chunks:
  // after its head when relays start from it, before a relay's last head (which waits for the
  // upstream's end), and after every chunk that grants a later transfer of its pair or that a
  // relay waits for.
  void ends(const Transfer& t, std::vector<std::int64_t>& out) const;

 private:
  PieceCuts(const lowering::LoweredPlan& lowered, const CallSchedule* calls,
            std::span<const std::int32_t> call_of);
  // The chunks a relay forwards at once: one, or a slice of the transfer when relays store and
  // forward slices (calls.h).
  std::int64_t head_chunks(std::int64_t all) const;
  void index_upstreams();
  [[nodiscard]] Result<void> place_relay_waits();
  [[nodiscard]] Result<void> place_waits(const Transfer& t);
  void order_transfers();
  void plan_streams(std::int64_t window);

  const lowering::LoweredPlan& lowered_;
  const Plan& plan_;
  const CallSchedule* calls_;
  std::span<const std::int32_t> call_of_;
  std::vector<std::int32_t> upstreams_;               // of every transfer, in order (Transfer::upstream)
  std::vector<std::size_t> upstream_begin_;           // per transfer + 1: its first upstream
  std::vector<bool> pipelined_;                       // per transfer: a relay that pipelines
  std::vector<bool> has_pipelined_dependent_;         // per transfer
  std::vector<RelayWait> relay_waits_;                // of every pipelined relay, in order
  std::vector<std::size_t> relay_wait_begin_;         // per transfer + 1: its first wait
  std::vector<std::vector<std::int64_t>> wait_cuts_;  // per transfer: chunks relays wait for
  std::vector<std::int32_t> order_;
  std::int32_t streams_ = 0;
  std::vector<std::int32_t> stream_;             // per transfer; -1 outside streams
  std::vector<Grant> grant_;                     // per transfer
  std::vector<std::vector<std::int64_t>> cuts_;  // per transfer: chunks that grant others
};

}  // namespace refit::sim
