// The sending half of an execution: grants, packing, puts, flushes and data notices.
#include <algorithm>

#include <fmt/format.h>

#include "engine.h"
#include "refit/core/try.h"
#include "refit/executors/quantize_step.h"
#include "refit/executors/streaming_stores.h"

namespace refit::ucx_detail {
namespace {

// A grant must cover the chunk's bytes in order, inside regions the receiver published.
bool grant_fits(const std::vector<Run>& runs, std::int64_t bytes, const Peer& peer) {
  std::int64_t at = 0;
  for (const Run& r : runs) {
    if (r.stream != at || r.length <= 0 || r.region >= peer.regions.size()) return false;
    const auto& region = peer.regions[r.region];
    if (!region.key || r.offset < 0 || r.offset + r.length > region.bytes) return false;
    at += r.length;
  }
  return at == bytes;
}

}  // namespace

Result<void> Engine::on_grant(const Message& m) {
  const auto j = sending_.grantable(m.transfer, m.from, m.chunk);
  const auto bytes = j ? c_.program.layout(m.transfer).chunk_bytes(m.chunk) : 0;
  if (!j || !grant_fits(m.runs, bytes, c_.connections.peer(Rank{m.from})))
    return fail(ErrorCode::kRuntime,
                fmt::format("rank {} granted chunk {} of transfer {}, which does not match "
                            "what this rank sends it",
                            m.from, m.chunk, m.transfer));
  sending_.grant(*j, m.chunk, m.runs);
  return {};
}

// A quantize step runs on this thread once its copies have landed; then its fp8 counts as landed
// for the chunks that forward it.
bool Engine::run_ready_steps() {
  const auto& p = c_.program;
  bool any = false;
  for (; steps_run_ < p.steps().size(); ++steps_run_, any = true) {
    const auto& step = p.steps()[steps_run_];
    if (dropped_[static_cast<std::size_t>(step.transfer)]) continue;  // its weights will not come
    if (!receiving_.landed(p.step_waits[steps_run_])) break;
    {
      const WorkTimer timer(*report_.work.quantize);
      run_quantize_step(*p.rank, step, p.host(c_.regions.bases));
    }
    receiving_.step_ran(steps_run_);
  }
  return any;
}

// The chunks put here are announced together once the loop ends: a notice that finds its peer
// asleep costs the sender the peer's wake-up, which one burst pays once. The receiver grants a
// pair's further chunks on its notices, though, so once a pair has only half the grant window's
// chunks granted ahead, what has flushed is announced at once: the grants' round trip then runs
// while those chunks are put, instead of after the last of them (a stall of that round trip per
// window's worth of chunks).
Result<bool> Engine::send_ready_chunks() {
  bool any = false;
  while (const auto c = sending_.next(receiving_)) {
    REFIT_TRY(send_chunk(*c));
    any = true;
    if (sending_.grants_run_low(*c)) {
      c_.worker.progress_all();
      REFIT_TRY(handle_flushes());
    }
  }
  return any;
}

Result<void> Engine::send_chunk(const ChunkRef& c) {
  const auto& p = c_.program;
  const Send& s = p.sends()[static_cast<std::size_t>(c.first)];
  if (c_.gate) c_.gate->before_send(s.transfer, c.second);
  std::vector<Run> local = p.send_runs[static_cast<std::size_t>(c.first)][static_cast<std::size_t>(c.second)];
  std::int64_t slot = -1;
  if (local.empty()) {
    slot = sending_.take_pack_slot();
    const std::int64_t offset = slot * p.send_staging.slot_bytes;
    std::byte* to = c_.regions.bases[p.send_staging_region] + offset;
    // Not a REFIT_TRY: the slot goes back before the error returns.
    auto ok = [&] {
      const WorkTimer timer(*report_.work.pack_unpack);
      return pack_chunk(*p.rank, s, c.second, p.host(c_.regions.bases), to);
    }();
    if (!ok) {
      sending_.give_pack_slot(slot);
      return ok;
    }
    local = {Run{.stream = 0,
                 .region = p.send_staging_region,
                 .offset = offset,
                 .length = p.layout(s.transfer).chunk_bytes(c.second)}};
  }
  const auto& remote = *sending_.grant_of(c);
  const ucs_status_t put = [&] {
    const WorkTimer timer(put_time(s));
    return put_pieces(s, local, remote);
  }();
  if (put != UCS_OK && !c_.membership) {
    if (slot >= 0) sending_.give_pack_slot(slot);
    return fail(ErrorCode::kRuntime,
                fmt::format("put of {} to rank {} failed: {}",
                            describe(c_.plan.transfers[static_cast<std::size_t>(s.transfer)]), s.peer.value,
                            ucs_status_string(put)));
  }
  // Puts complete in no particular order; the flush makes the chunk visible before its notice.
  sending_.put(c);
  auto& item = c_.flushes.add(Flushed{.epoch = c_.epoch, .send = c.first, .chunk = c.second, .slot = slot});
  // With engines that may fail, a put to a receiver that is gone is its failed flush: handle_flushes
  // takes the receiver for gone, as it does when the flush reports it.
  if (put != UCS_OK) {
    item.done = true;
    item.status = put;
    return {};
  }
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  params.cb.send = &InFlight<Flushed>::completed;
  params.user_data = &item;
  void* request = ucp_ep_flush_nbx(c_.connections.peer(s.peer).endpoint, &params);
  if (UCS_PTR_IS_ERR(request)) {
    item.done = true;
    item.status = UCS_PTR_STATUS(request);
  } else if (request == nullptr) {
    item.done = true;
  }
  return {};
}

Seconds& Engine::put_time(const Send& s) {
  return (*report_.work
               .puts)[static_cast<std::size_t>(c_.plan.transfers[static_cast<std::size_t>(s.transfer)].link)];
}

// Puts the chunk piece by piece: each piece is contiguous both here and at the receiver. Into a
// region mapped here the put is a streaming copy (ExecutorOptions::direct_stores), fenced before
// the notice that follows the chunk's flush.
ucs_status_t Engine::put_pieces(const Send& s, const std::vector<Run>& local,
                                const std::vector<Run>& remote) {
  Peer& peer = c_.connections.peer(s.peer);
  // Once the peer is known to have failed, its memory goes through UCX, which reports errors,
  // instead of being stored into directly (a mapping that vanished with it would fault).
  const auto p = static_cast<std::size_t>(s.peer.value);
  const bool direct = c_.options.direct_stores && !c_.inbox.endpoint_error[p] && !c_.inbox.given_up[p];
  bool stored = false;
  std::size_t l = 0;
  std::size_t r = 0;
  for (std::int64_t at = 0; l < local.size() && r < remote.size();) {
    const Run& a = local[l];
    const Run& b = remote[r];
    const std::int64_t n = std::min(a.stream + a.length, b.stream + b.length) - at;
    const std::byte* from = c_.regions.bases[a.region] + a.offset + (at - a.stream);
    const std::int64_t offset = b.offset + (at - b.stream);
    const RemoteRegion& target = peer.regions[b.region];
    if (target.mapped != nullptr && direct) {
      streaming_copy(target.mapped + offset, from, static_cast<std::size_t>(n));
      stored_[static_cast<std::size_t>(s.transfer)] += n;
      stored = true;
    } else {
      if (const auto put = transport_put(peer.endpoint, from, n, a.region, target, offset); put != UCS_OK)
        return put;
    }
    at += n;
    if (at == a.stream + a.length) ++l;
    if (at == b.stream + b.length) ++r;
  }
  if (stored) store_fence();
  return UCS_OK;
}

ucs_status_t Engine::transport_put(ucp_ep_h endpoint, const std::byte* from, std::int64_t bytes,
                                   std::size_t region, const RemoteRegion& target, std::int64_t offset) {
  ucp_request_param_t params{};
  if (auto* memh = c_.regions.handles[region]) {
    params.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    params.memh = memh;
  }
  void* request = ucp_put_nbx(endpoint, from, static_cast<std::size_t>(bytes),
                              target.base + static_cast<std::uint64_t>(offset), target.key, &params);
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  if (request != nullptr) ucp_request_free(request);  // the flush reports completion
  return UCS_OK;
}

Result<bool> Engine::handle_flushes() {
  bool any = false;
  Result<void> outcome;
  c_.flushes.sweep([&](auto& item) {
    const Flushed& f = item.value;
    if (f.epoch != c_.epoch || !outcome || f.abandoned) return;  // left over, or given up on
    any = true;
    const Send& s = c_.program.sends()[static_cast<std::size_t>(f.send)];
    if (item.status != UCS_OK && c_.membership) {  // the receiver is gone; so is what it was sent
      sending_.flushed({f.send, f.chunk}, f.slot);
      take_for_gone(s.peer.value);
      return;
    }
    if (item.status != UCS_OK) {
      outcome = fail(ErrorCode::kRuntime,
                     fmt::format("puts of {} to rank {} failed: {}",
                                 describe(c_.plan.transfers[static_cast<std::size_t>(s.transfer)]),
                                 s.peer.value, ucs_status_string(item.status)));
      return;
    }
    sending_.flushed({f.send, f.chunk}, f.slot);
    Message m = message(MessageKind::kData);
    m.transfer = s.transfer;
    m.chunk = f.chunk;
    outcome = post(s.peer, m);
    if (outcome) outcome = announce_dropped(static_cast<std::size_t>(f.send));
    if (c_.options.on_chunk_sent) c_.options.on_chunk_sent(s.transfer, f.chunk);
  });
  REFIT_TRY(outcome);
  return any;
}

}  // namespace refit::ucx_detail
