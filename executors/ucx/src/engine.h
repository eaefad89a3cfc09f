#pragma once
// One execution of a prepared plan on this rank: the state machine behind execute().
//
// Receiving (receive_book.h says which chunks are granted when): the rank posts grants, which tell
// each sender where a chunk's pieces go; when a data notice arrives it unpacks a staged or scratch
// chunk, and the slot or window place it held goes to the next grants.
// Sending (send_book.h says which chunk goes next): the rank packs the chunk if it must, puts its
// pieces, flushes the endpoint, then sends the data notice.
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
#include "receive_book.h"
#include "refit/core/elapsed.h"
#include "refit/executors/executor.h"
#include "refit/executors/interrupt_check.h"
#include "refit/executors/membership.h"
#include "refit/planner/plan.h"
#include "send_book.h"
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

class Engine {
 public:
  explicit Engine(const ExecutionContext& context);
  [[nodiscard]] Result<ExecutionReport> run();
  // By rank: died, failed or was fenced (before this step or during it).
  const std::vector<bool>& gone() const { return gone_; }

 private:
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
  [[nodiscard]] Result<void> drop_send(std::size_t send);
  void abandon_flushes(std::size_t send);
  [[nodiscard]] Result<void> announce_dropped(std::size_t send);
  [[nodiscard]] Result<bool> check_membership_of(const Message& m);
  [[nodiscard]] Result<void> on_dropped(const Message& m);
  [[nodiscard]] Result<void> on_done(const Message& m);
  std::string gone_list() const;
  void count_completed_only();
  // engine_receive.cc
  [[nodiscard]] Result<void> post_grants(const std::vector<Grant>& grants);
  [[nodiscard]] Result<void> on_data(const Message& m);
  // engine_send.cc
  bool run_ready_steps();
  [[nodiscard]] Result<void> on_grant(const Message& m);
  [[nodiscard]] Result<bool> send_ready_chunks();
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
  ReceiveBook receiving_;
  SendBook sending_;
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
  std::vector<bool> absent_;              // by rank: neither waited for nor written to
  std::vector<bool> gone_;                // by rank: died, failed or fenced during this execution
  std::vector<std::int32_t> newly_gone_;  // found gone, not yet applied (apply_gone)
  std::vector<bool> dropped_;             // by transfer
  std::vector<std::int64_t> stored_;      // by transfer: bytes stored directly into the receiver
};

}  // namespace refit::ucx_detail
