#pragma once
// One execution of a prepared plan on this rank: the state machine behind execute().
//
// Receiving: the rank grants chunks that land in place (direct or scratch) up to a window per
// sender, and staged chunks as receive-staging slots allow, both in plan order; a grant tells
// the sender where the chunk's pieces go. When a data notice arrives it unpacks a staged or
// scratch chunk, frees the slot or window place, and grants the next chunks.
// Sending: per receiver, the rank walks its chunks in plan order. The head chunk goes once it is
// granted, the received chunks it forwards have landed, and (if it must be packed) a pack slot is
// free: its pieces are put, the endpoint is flushed, then the data notice is sent. Among the
// pairs whose head chunk can go, the rank sends as lowering/pair_pacing.h says: next the one
// PairPacing puts first, while its link kind has room (lowering/pair_pacing.h).
// No resource is held while waiting for a peer and every wait is for an earlier chunk in plan
// order, so the plan's order rules out deadlock.
// The end: a rank whose own chunks are all sent and landed tells every peer it is done, and
// returns once every peer has said so. A rank that fails tells every peer why (abort).
// Elastic refit (a membership is set, engine_membership.cc): a peer that dies, fails or is of an
// old membership is taken for gone instead of failing this rank; the transfers its engine's loss
// makes impossible are dropped at both ends (a sender that drops one says so, so that the
// receiver's slots come back), and the rank ends when every peer not gone is done. A repair step
// (repair_plan.h) is an Engine of its own over the repair plan, its ranks gone before it absent.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "connections.h"
#include "refit/core/elapsed.h"
#include "refit/executors/executor.h"
#include "refit/executors/interrupt_check.h"
#include "refit/executors/membership.h"
#include "refit/lowering/pair_pacing.h"
#include "refit/planner/plan.h"
#include "ucx_handles.h"
#include "ucx_program.h"
#include "watchdog.h"
#include "wire.h"

namespace refit::ucx_detail {

// A flush that completes a sent chunk; the chunk's data notice follows it.
struct Flushed {
  std::uint64_t epoch = 0;
  std::int32_t send = 0;
  std::int64_t chunk = 0;
  std::int64_t slot = -1;  // pack slot to return, or -1
  bool abandoned = false;  // its receiver is gone (elastic): already given up on, slot returned
};

// What an execution works with. The outbox and the flushes in flight belong to the executor's
// runtime, not to one execution, because UCX may complete them after a failed execution ended.
struct ExecutionContext {
  const Plan& plan;
  const UcxProgram& program;
  Worker& worker;
  Inbox& inbox;
  Connections& connections;
  const LocalRegions& regions;
  const ExecutorOptions& options;
  std::uint64_t epoch;
  const EngineMembership* membership;  // nullptr: not an elastic refit
  Outbox& outbox;
  InFlight<Flushed>& flushes;
  const std::vector<bool>* gone_before = nullptr;  // by rank: gone in this execution's earlier step
  SendGate* gate = nullptr;  // called before each chunk is sent (Executor::set_send_gate)
};

// Adds the time from its construction to its end to a WorkTimes entry.
class WorkTimer {
 public:
  explicit WorkTimer(Seconds& into) : into_(into), start_(Clock::now()) {}
  ~WorkTimer() { into_ += seconds_since(start_); }
  WorkTimer(const WorkTimer&) = delete;
  WorkTimer& operator=(const WorkTimer&) = delete;

 private:
  Seconds& into_;
  Clock::time_point start_;
};

// Fixed-size slots of a staging region, handed out and returned by index.
class SlotPool {
 public:
  explicit SlotPool(std::int64_t slots) {
    for (std::int64_t s = slots; s-- > 0;) free_.push_back(s);
  }
  bool available() const { return !free_.empty(); }
  std::int64_t take() {
    const auto s = free_.back();
    free_.pop_back();
    return s;
  }
  void give(std::int64_t slot) { free_.push_back(slot); }

 private:
  std::vector<std::int64_t> free_;
};

class Engine {
 public:
  explicit Engine(const ExecutionContext& context);
  [[nodiscard]] Result<ExecutionReport> run();
  // By rank: died, failed or was fenced (before this step or during it).
  const std::vector<bool>& gone() const { return gone_; }

 private:
  using ChunkRef = std::pair<std::int32_t, std::int64_t>;  // (index in receives or sends, chunk)

  // engine.cc: the loop, messages, health and the end.
  [[nodiscard]] Result<void> loop();
  [[nodiscard]] Result<bool> step(Clock::time_point now);
  [[nodiscard]] Result<bool> handle_messages();
  [[nodiscard]] Result<void> check_health(Clock::time_point now);
  std::optional<Rank> quietest_peer() const;
  [[nodiscard]] Result<void> post(Rank to, const Message& m);
  [[nodiscard]] Result<void> post_to_all(MessageKind kind, const std::string& text = {});
  Message message(MessageKind kind) const;
  Error abort(Error e);
  bool own_work_finished() const;
  bool everyone_finished() const;
  // engine_membership.cc: elastic refit.
  std::uint64_t membership_epoch() const;
  void start_membership();
  void take_for_gone(std::int32_t rank);
  [[nodiscard]] Result<void> apply_gone();
  [[nodiscard]] Result<void> drop_receive(std::size_t receive);
  [[nodiscard]] Result<void> release_receive(std::size_t receive);
  void free_chunk(std::size_t receive, std::size_t chunk);
  [[nodiscard]] Result<void> drop_send(std::size_t send);
  void abandon_flushes(std::size_t send);
  [[nodiscard]] Result<void> announce_dropped(std::size_t send);
  [[nodiscard]] Result<bool> check_membership_of(const Message& m);
  [[nodiscard]] Result<void> on_dropped(const Message& m);
  [[nodiscard]] Result<void> on_done(const Message& m);
  std::string gone_list() const;
  void count_completed_only();
  // engine_receive.cc
  [[nodiscard]] Result<void> start_receiving();
  [[nodiscard]] Result<void> grant(std::size_t receive, std::int64_t chunk, std::vector<Run> runs);
  [[nodiscard]] Result<void> grant_staged();
  [[nodiscard]] Result<void> grant_in_place(std::size_t peer);
  [[nodiscard]] Result<void> on_data(const Message& m);
  // engine_send.cc
  bool landed(const std::vector<ChunkWait>& waits) const;
  bool run_ready_steps();
  [[nodiscard]] Result<void> on_grant(const Message& m);
  void skip_dropped_sends();
  [[nodiscard]] Result<bool> send_ready_chunks();
  bool ready(const ChunkRef& c) const;
  std::optional<std::size_t> next_pair() const;
  bool grants_run_low(std::size_t pair) const;
  bool link_has_room(std::size_t pair) const;
  std::int64_t chunk_bytes(const ChunkRef& c) const;
  void count_in_flight(const ChunkRef& c, std::int64_t sign);
  [[nodiscard]] Result<void> send_chunk(const ChunkRef& c);
  // The first failed put's status, UCS_OK when every piece went.
  [[nodiscard]] ucs_status_t put_pieces(const Send& s, const std::vector<Run>& local,
                                        const std::vector<Run>& remote);
  Seconds& put_time(const Send& s);
  [[nodiscard]] ucs_status_t transport_put(ucp_ep_h endpoint, const std::byte* from, std::int64_t bytes,
                                           std::size_t region, const RemoteRegion& target,
                                           std::int64_t offset);
  [[nodiscard]] Result<bool> handle_flushes();
  // engine_blame.cc: what this rank waits for, in words, for timeout errors.
  std::string waiting_for() const;
  std::string waiting_for_from(Rank peer) const;
  std::string describe(const Transfer& t) const;
  std::string describe_send_wait(const ChunkRef& c) const;

  const ExecutionContext& c_;
  Rank me_;
  std::vector<std::int32_t> receive_of_transfer_;  // by transfer id; -1: not received here
  std::vector<std::int32_t> send_of_transfer_;     // by transfer id; -1: not sent from here
  // Receiving.
  std::vector<std::vector<bool>> arrived_;          // by receive, by chunk
  std::vector<std::int64_t> arrived_prefix_;        // by receive: chunks 0..n-1 all landed
  std::vector<std::vector<std::int64_t>> slot_of_;  // by receive, by chunk: staging slot
  std::vector<ChunkRef> staged_;                    // staged chunks in plan order
  std::size_t next_staged_ = 0;
  std::vector<std::vector<ChunkRef>> in_place_;  // by sender rank: other chunks, plan order
  std::vector<std::size_t> next_in_place_;       // by sender rank
  std::vector<std::int64_t> in_place_granted_;   // by sender rank: granted, not yet landed
  SlotPool receive_slots_;
  std::int64_t chunks_to_receive_ = 0;
  // Sending.
  std::vector<std::vector<std::optional<std::vector<Run>>>> grants_;  // by send, by chunk
  std::vector<std::vector<ChunkRef>> queue_;                          // by receiver rank, plan order
  std::vector<std::size_t> next_;                                     // by receiver rank
  lowering::PairPacing pacing_;                                       // by receiver rank
  std::array<std::int64_t, kLinkKinds> in_flight_bytes_{};            // posted, not flushed
  std::array<std::int64_t, kLinkKinds> in_flight_chunks_{};
  SlotPool pack_slots_;
  std::int64_t chunks_to_send_ = 0;
  std::size_t steps_run_ = 0;  // quantize steps run, in plan order (each waits for earlier data only)
  // The end, and health.
  std::vector<bool> done_from_;
  bool done_sent_ = false;
  bool told_of_failure_ = false;
  Watchdog watchdog_;
  Clock::time_point start_;
  InterruptCheck interrupt_;
  ExecutionReport report_;
  // Elastic refit; without a membership nothing is ever gone or dropped.
  std::vector<bool> absent_;                // by rank: neither waited for nor written to
  std::vector<bool> gone_;                  // by rank: died, failed or fenced during this execution
  std::vector<std::int32_t> newly_gone_;    // found gone, not yet applied (apply_gone)
  std::vector<bool> dropped_;               // by transfer
  std::vector<bool> receive_dropped_;       // by receive: its missing chunks will not come
  std::vector<bool> receive_released_;      // by receive: its grants' slots and places are back
  std::vector<std::vector<bool>> granted_;  // by receive, by chunk: granted in place, not landed
  std::vector<bool> send_dropped_;          // by send
  std::vector<std::int64_t> sent_chunks_;   // by send: chunks put
  std::vector<std::int32_t> flushing_;      // by send: chunks put, flush pending
};

}  // namespace refit::ucx_detail
