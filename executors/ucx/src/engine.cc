#include "engine.h"

#include <fmt/format.h>

#include "refit/core/elapsed.h"
#include "refit/core/index.h"
#include "refit/core/try.h"
#include "refit/planner/execution_model.h"

namespace refit::ucx_detail {
namespace {

// After a failure, how long the abort notices get to leave before the error is returned.
constexpr std::chrono::milliseconds kAbortGrace{200};
constexpr std::chrono::milliseconds kAbortPoll{10};

// The executor's behaviours as its execution model states them, so that the simulator runs what
// this executor runs. Chunks granted ahead to one sender: enough to keep its puts flowing, few
// enough that grants do not flood the sender's receive queue (a full queue makes UCX hold sends
// back). A pair with half that window granted ahead has what it flushed announced at once
// (Engine::send_ready_chunks says why).
const ExecutionModel& ucx_model() { return execution_model(ExecutionModelId::kRefitUcx); }

}  // namespace

Engine::Engine(const ExecutionContext& context)
    : c_(context),
      me_(context.program.rank->rank()),
      receiving_(context.program, context.plan.world_size(), ucx_model().pair_window),
      sending_(context.program, context.plan.world_size(),
               SendPacing{.by_bytes = ucx_model().pairs_share_by_bytes,
                          .low_grants = ucx_model().pair_window / 2}),
      done_from_(static_cast<std::size_t>(context.plan.world_size()), false),
      watchdog_(context.options.timeout, Clock::now()),
      start_(Clock::now()),
      interrupt_(context.options.interrupted),
      absent_(static_cast<std::size_t>(context.plan.world_size()), false),
      gone_(static_cast<std::size_t>(context.plan.world_size()), false),
      dropped_(context.plan.transfers.size(), false),
      stored_(context.plan.transfers.size(), 0) {
  report_.work =
      WorkTimes{.puts = std::array<Seconds, kLinkKinds>{}, .pack_unpack = Seconds{0}, .quantize = Seconds{0}};
  const auto& p = c_.program;
  for (const Receive& r : p.receives()) report_.bytes_received += Bytes{p.layout(r.transfer).bytes()};
  for (const Send& s : p.sends()) {
    report_.bytes_sent += Bytes{p.layout(s.transfer).bytes()};
    report_.messages += static_cast<std::int64_t>(s.chunks.size());
  }
}

Result<ExecutionReport> Engine::run() {
  start_ = Clock::now();
  watchdog_ = Watchdog(c_.options.timeout, start_);
  // Peers were silent between executions; from now on silence counts.
  for (auto& t : c_.inbox.last_heard) t = start_;
  if (c_.membership) start_membership();
  // Not a REFIT_TRY: a rank that fails tells every peer why (abort) before its error returns.
  // A rank of a non-member engine has nothing to do: its peers neither wait for it nor write to it.
  if (!absent_[static_cast<std::size_t>(me_.value)])
    if (auto ended = loop(); !ended) return std::unexpected(abort(std::move(ended).error()));
  // What was stored directly, of the transfers this rank sent and did not drop: a part of
  // bytes_sent whichever transfers a membership dropped.
  const auto& p = c_.program;
  for (std::size_t j = 0; j < p.sends().size(); ++j)
    if (!sending_.dropped(j)) report_.stored_directly += Bytes{stored_[at(p.sends()[j].transfer)]};
  if (c_.membership) {
    count_completed_only();
    report_.engines = engine_outcomes(c_.plan, *c_.membership, gone_,
                                      dropped_transfers(c_.plan, excluded_ranks(*c_.membership, gone_)));
  }
  return report_;
}

Result<void> Engine::loop() {
  REFIT_TRY(apply_gone());
  std::vector<Grant> grants;
  receiving_.start(grants);
  REFIT_TRY(post_grants(grants));
  while (!(done_sent_ && everyone_finished() && c_.outbox.empty_but_for(absent_))) {
    c_.worker.progress_all();
    const auto now = Clock::now();
    const bool worked = REFIT_TRY(step(now));
    if (worked) watchdog_.progressed(now);
    REFIT_TRY(check_health(now));
    REFIT_TRY(interrupt_.poll(now));
    if (worked) continue;
    const auto wake = watchdog_.next_wake(now);
    REFIT_TRY(c_.worker.wait(interrupt_.armed() ? std::min(wake, kInterruptPoll) : wake));
  }
  return {};
}

Result<bool> Engine::step(Clock::time_point now) {
  const bool messages = REFIT_TRY(handle_messages());
  const bool flushed = REFIT_TRY(handle_flushes());
  const bool quantized = run_ready_steps();
  const bool sent = REFIT_TRY(send_ready_chunks());
  if (const auto failed = c_.outbox.sweep(c_.epoch); failed && c_.membership)
    take_for_gone(failed->first.value);
  else if (failed)
    return fail(ErrorCode::kPeerFailed, fmt::format("rank {} is unreachable: a message to it failed ({})",
                                                    failed->first.value, ucs_status_string(failed->second)));
  bool worked = messages || flushed || quantized || sent;
  if (!newly_gone_.empty()) {
    REFIT_TRY(apply_gone());
    worked = true;
  }
  if (!done_sent_ && own_work_finished()) {
    report_.elapsed = seconds_between(start_, now);
    REFIT_TRY(post_to_all(MessageKind::kDone, gone_list()));
    done_sent_ = worked = true;
  }
  // After its own end notice a rank is no longer waited for, so its heartbeats stop.
  if (!done_sent_ && watchdog_.heartbeat_due(now)) {
    REFIT_TRY(post_to_all(MessageKind::kHeartbeat));
    watchdog_.heartbeat_sent(now);
  }
  return worked;
}

Result<bool> Engine::handle_messages() {
  auto& queue = c_.inbox.messages;
  bool any = false;
  for (auto it = queue.begin(); it != queue.end();) {
    if (it->epoch > c_.epoch) {  // a peer that already started the next execution
      ++it;
      continue;
    }
    const Message m = std::move(*it);
    it = queue.erase(it);
    if (m.epoch < c_.epoch || !REFIT_TRY(check_membership_of(m))) continue;
    any = true;
    switch (m.kind) {
      case MessageKind::kGrant:
        REFIT_TRY(on_grant(m));
        break;
      case MessageKind::kData:
        REFIT_TRY(on_data(m));
        break;
      case MessageKind::kDone:
        REFIT_TRY(on_done(m));
        break;
      case MessageKind::kAbort:
        if (c_.membership) {  // its engine misses the step; the others go on
          take_for_gone(m.from);
          break;
        }
        told_of_failure_ = true;  // every rank got that notice: no need to pass it on
        return fail(ErrorCode::kPeerFailed, fmt::format("rank {} failed: {}", m.from, m.text));
      case MessageKind::kDropped:
        REFIT_TRY(on_dropped(m));
        break;
      case MessageKind::kFenced:
        return fail(ErrorCode::kPeerFailed, m.text);
      case MessageKind::kHeartbeat:
      case MessageKind::kHello:
        break;
    }
  }
  return any;
}

Result<void> Engine::check_health(Clock::time_point now) {
  if (const auto from = c_.inbox.malformed_from)
    return fail(ErrorCode::kRuntime,
                fmt::format("a malformed control message arrived (from rank {})", *from));
  for (std::int32_t r = 0; r < c_.plan.world_size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == me_.value || done_from_[i] || absent_[i] || !c_.inbox.endpoint_error[i]) continue;
    if (c_.membership) {
      take_for_gone(r);
      continue;
    }
    c_.inbox.given_up[i] = true;
    return fail(ErrorCode::kPeerFailed,
                fmt::format("rank {} is unreachable ({}); this rank was waiting for {}", r,
                            ucs_status_string(*c_.inbox.endpoint_error[i]), waiting_for_from(Rank{r})));
  }
  // A peer silent for the whole timeout is dead or hung. A rank whose own chunks (or, at the end,
  // its last messages) stopped moving gives up too; while it only waits for peers to finish
  // theirs, their own watchdogs bound the wait. The quietest peer, if it missed heartbeats, is the
  // one to name.
  const auto quiet = quietest_peer();
  const auto heard = quiet ? c_.inbox.last_heard[static_cast<std::size_t>(quiet->value)] : now;
  const bool delivering = everyone_finished() && !c_.outbox.empty();
  const bool stalled = (!own_work_finished() || delivering) && watchdog_.stalled(now);
  if (!stalled && !(quiet && watchdog_.silent(heard, now))) return {};
  // Elastic: a peer is taken for gone only once silent for the whole timeout, as every rank that
  // waits for it finds; until then a stalled rank waits for that.
  if (c_.membership && quiet && watchdog_.quiet(heard, now)) {
    if (watchdog_.silent(heard, now)) take_for_gone(quiet->value);
    watchdog_.progressed(now);  // not a stall: the wait for the silence is bounded by the timeout
    return {};
  }
  if (quiet && watchdog_.quiet(heard, now)) {
    c_.inbox.given_up[static_cast<std::size_t>(quiet->value)] = true;
    return fail(
        ErrorCode::kTimeout,
        fmt::format("rank {} stopped responding: nothing from it for {:.1f} s; this rank was waiting for {}",
                    quiet->value, seconds_between(heard, now).value, waiting_for_from(*quiet)));
  }
  return fail(ErrorCode::kTimeout, fmt::format("no progress for {:.1f} s while waiting for {}",
                                               watchdog_.seconds_since_progress(now), waiting_for()));
}

// The peer this rank still waits on (it has not said it is done) that was heard from longest ago.
std::optional<Rank> Engine::quietest_peer() const {
  std::optional<Rank> out;
  for (std::int32_t r = 0; r < c_.plan.world_size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == me_.value || done_from_[i] || absent_[i]) continue;
    if (!out || c_.inbox.last_heard[i] < c_.inbox.last_heard[static_cast<std::size_t>(out->value)])
      out = Rank{r};
  }
  return out;
}

Message Engine::message(MessageKind kind) const {
  Message m;
  m.kind = kind;
  m.from = me_.value;
  m.epoch = c_.epoch;
  m.membership = membership_epoch();
  return m;
}

Result<void> Engine::post(Rank to, const Message& m) {
  if (absent_[static_cast<std::size_t>(to.value)]) return {};
  auto posted = c_.outbox.post(c_.connections.peer(to).endpoint, to, m);
  if (!posted && c_.membership) {  // unreachable: gone, as far as this rank is concerned
    take_for_gone(to.value);
    return {};
  }
  return posted;
}

Result<void> Engine::post_to_all(MessageKind kind, const std::string& text) {
  Message m = message(kind);
  m.text = text;
  for (std::int32_t r = 0; r < c_.plan.world_size(); ++r)
    if (r != me_.value) REFIT_TRY(post(Rank{r}, m));
  return {};
}

Error Engine::abort(Error e) {
  // Peers that missed heartbeats are most likely dead too: close their endpoints without a flush.
  const auto now = Clock::now();
  for (std::int32_t r = 0; r < c_.plan.world_size(); ++r)
    if (r != me_.value && watchdog_.quiet(c_.inbox.last_heard[static_cast<std::size_t>(r)], now))
      c_.inbox.given_up[static_cast<std::size_t>(r)] = true;
  Message m = message(MessageKind::kAbort);
  m.text = e.message;
  for (std::int32_t r = 0; r < c_.plan.world_size() && !told_of_failure_; ++r)
    if (r != me_.value && !c_.inbox.given_up[static_cast<std::size_t>(r)]) (void)post(Rank{r}, m);
  const auto deadline = Clock::now() + kAbortGrace;
  while (!c_.outbox.empty() && Clock::now() < deadline) {
    if (!c_.worker.progress_all()) (void)c_.worker.wait(kAbortPoll);
    (void)c_.outbox.sweep(c_.epoch);
  }
  return e;
}

bool Engine::own_work_finished() const {
  return receiving_.chunks_left() == 0 && sending_.chunks_left() == 0 &&
         steps_run_ == c_.program.steps().size();
}

bool Engine::everyone_finished() const {
  for (std::int32_t r = 0; r < c_.plan.world_size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r != me_.value && !done_from_[i] && !absent_[i]) return false;
  }
  return true;
}

}  // namespace refit::ucx_detail
