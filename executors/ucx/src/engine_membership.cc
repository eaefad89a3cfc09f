// Elastic refit on one rank: peers taken for gone, transfers dropped at both ends, fencing by
// membership epoch, and the gone ranks passed on with the end notice.
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine.h"
#include "refit/core/try.h"

namespace refit::ucx_detail {

std::uint64_t Engine::membership_epoch() const { return c_.membership ? c_.membership->epoch : 0; }

// Ranks of non-member engines, and ranks gone in an earlier step of this execution, are absent from
// the start: nobody waits for them or writes to them.
void Engine::start_membership() {
  const auto& m = *c_.membership;
  for (std::size_t r = 0; r < absent_.size(); ++r) {
    gone_[r] = c_.gone_before && (*c_.gone_before)[r];
    absent_[r] =
        gone_[r] || (m.engine_of[r] != kNoEngine && !m.members[static_cast<std::size_t>(m.engine_of[r])]);
  }
}

// Noted here, applied by apply_gone between steps, so that no loop over grants or sends has its
// state changed under it.
void Engine::take_for_gone(std::int32_t rank) {
  const auto r = static_cast<std::size_t>(rank);
  if (rank == me_.value || gone_[r]) return;
  gone_[r] = absent_[r] = true;
  c_.inbox.given_up[r] = true;  // its endpoint is closed without a flush
  newly_gone_.push_back(rank);
}

// Drops every transfer the gone ranks make impossible, and hands back what dropped receives held.
Result<void> Engine::apply_gone() {
  if (!c_.membership) return {};
  newly_gone_.clear();
  const auto dropped = dropped_transfers(c_.plan, excluded_ranks(*c_.membership, gone_));
  for (std::size_t t = 0; t < dropped.size(); ++t) {
    if (!dropped[t] || dropped_[t]) continue;
    dropped_[t] = true;
    const auto transfer = static_cast<std::int64_t>(t);
    if (const auto i = receiving_.receive_of(transfer)) REFIT_TRY(drop_receive(*i));
    if (const auto j = sending_.send_of(transfer)) REFIT_TRY(drop_send(*j));
  }
  // A sender that is gone will never say it dropped: its grants come back now.
  for (std::size_t i = 0; i < c_.program.receives().size(); ++i) {
    const auto peer = static_cast<std::size_t>(c_.program.receives()[i].peer.value);
    if (receiving_.dropped(i) && !receiving_.released(i) && absent_[peer]) REFIT_TRY(release_receive(i));
  }
  watchdog_.progressed(Clock::now());
  return {};
}

// Its missing chunks no longer count. What they were granted stays granted until the sender says
// it dropped the transfer (or is gone): it may still put a chunk it had started.
Result<void> Engine::drop_receive(std::size_t receive) {
  if (receiving_.dropped(receive)) return {};
  receiving_.drop(receive);
  const auto peer = static_cast<std::size_t>(c_.program.receives()[receive].peer.value);
  return absent_[peer] ? release_receive(receive) : Result<void>{};
}

Result<void> Engine::release_receive(std::size_t receive) {
  std::vector<Grant> grants;
  receiving_.release(receive, grants);
  return post_grants(grants);
}

// Its unsent chunks no longer count; chunks already put still get their data notice.
Result<void> Engine::drop_send(std::size_t send) {
  if (!sending_.drop(send)) return {};
  if (absent_[static_cast<std::size_t>(c_.program.sends()[send].peer.value)]) abandon_flushes(send);
  return announce_dropped(send);
}

// A flush to a gone receiver may never complete (its process is not there to make progress): its
// chunks stop counting and their pack slots come back now. A put still reading such a slot can
// only spoil what lands at the gone receiver.
void Engine::abandon_flushes(std::size_t send) {
  sending_.abandon(send);
  c_.flushes.for_each([&](Flushed& f) {
    if (f.epoch != c_.epoch || f.abandoned || f.send != static_cast<std::int32_t>(send)) return;
    sending_.settle({f.send, f.chunk}, f.slot);
    f.abandoned = true;
  });
}

// Once no chunk of the transfer is in flight, the receiver may take back what it granted.
Result<void> Engine::announce_dropped(std::size_t send) {
  if (!sending_.drop_settled(send)) return {};
  const Send& s = c_.program.sends()[send];
  Message m = message(MessageKind::kDropped);
  m.transfer = s.transfer;
  return post(s.peer, m);
}

// True: the message is of this membership. A peer of an older one is fenced out (told, and taken
// for gone: nothing it sends is used, and it is granted nothing to write into); a peer of a
// newer one means this process is the stale one.
Result<bool> Engine::check_membership_of(const Message& m) {
  const auto from = static_cast<std::size_t>(m.from);
  const auto mine = membership_epoch();
  if (m.membership > mine)
    return fail(ErrorCode::kPeerFailed,
                m.kind == MessageKind::kFenced
                    ? m.text
                    : fmt::format("fenced out: rank {} is at membership epoch {} and this process at {}",
                                  m.from, m.membership, mine));
  if (m.membership < mine) {
    if (!absent_[from]) {
      Message fence = message(MessageKind::kFenced);
      fence.text = fmt::format(
          "fenced out: rank {} is at membership epoch {} and this process (rank {}) at {}: a process of an "
          "old membership may not write into the engines of a new one",
          me_.value, mine, m.from, m.membership);
      (void)c_.outbox.post(c_.connections.peer(Rank{m.from}).endpoint, Rank{m.from}, fence);
      take_for_gone(m.from);
    }
    return false;
  }
  return !absent_[from];  // a gone peer's late messages are not used
}

Result<void> Engine::on_dropped(const Message& m) {
  const auto i = receiving_.receive_from(m.transfer, m.from);
  if (!i)
    return fail(ErrorCode::kRuntime, fmt::format("rank {} dropped transfer {}, which this rank does not "
                                                 "receive from it",
                                                 m.from, m.transfer));
  REFIT_TRY(drop_receive(*i));
  return receiving_.released(*i) ? Result<void>{} : release_receive(*i);
}

// The end notice names the ranks its sender found gone, so every rank ends with the same view.
Result<void> Engine::on_done(const Message& m) {
  done_from_[static_cast<std::size_t>(m.from)] = true;
  for (std::string_view rest = m.text; !rest.empty();) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    std::int32_t rank = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), rank);
    if (ec != std::errc{} || end != item.data() + item.size() || rank < 0 || rank >= c_.plan.world_size())
      return fail(ErrorCode::kRuntime,
                  fmt::format("rank {} ended naming '{}' as gone, which is no rank", m.from, item));
    if (rank == me_.value)
      return fail(
          ErrorCode::kPeerFailed,
          fmt::format("rank {} took this rank for gone (silent for the timeout, or fenced): this rank's "
                      "engine misses the step",
                      m.from));
    if (c_.membership) take_for_gone(rank);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return {};
}

// The report counts what the transfers this rank completed moved: a dropped one's chunks that
// did move were of no use to their engine.
void Engine::count_completed_only() {
  const auto& p = c_.program;
  report_.bytes_sent = report_.bytes_received = Bytes{0};
  report_.messages = 0;
  for (std::size_t j = 0; j < p.sends().size(); ++j)
    if (!sending_.dropped(j)) {
      report_.bytes_sent += Bytes{p.layout(p.sends()[j].transfer).bytes()};
      report_.messages += static_cast<std::int64_t>(p.sends()[j].chunks.size());
    }
  for (std::size_t i = 0; i < p.receives().size(); ++i)
    if (!receiving_.dropped(i)) report_.bytes_received += Bytes{p.layout(p.receives()[i].transfer).bytes()};
}

std::string Engine::gone_list() const {
  std::vector<std::int32_t> gone;
  for (std::size_t r = 0; r < gone_.size(); ++r)
    if (gone_[r]) gone.push_back(static_cast<std::int32_t>(r));
  return fmt::format("{}", fmt::join(gone, ","));
}

}  // namespace refit::ucx_detail
