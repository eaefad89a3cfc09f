// The receiving half of an execution: grants, data notices, unpacking.
#include <fmt/format.h>

#include "engine.h"
#include "refit/core/try.h"
#include "refit/planner/execution_model.h"

namespace refit::ucx_detail {

namespace {

// Chunks granted ahead to one sender: enough to keep its puts flowing, few enough that grants do
// not flood the sender's receive queue (a full queue makes UCX hold sends back). The execution
// model's pair window is this very number, so that the simulator runs what this executor runs.
const std::int64_t kGrantWindow = execution_model(ExecutionModelId::kRefitUcx).pair_window;

}  // namespace

Result<void> Engine::start_receiving() {
  for (std::size_t peer = 0; peer < in_place_.size(); ++peer) REFIT_TRY(grant_in_place(peer));
  return grant_staged();
}

Result<void> Engine::grant_in_place(std::size_t peer) {
  auto& next = next_in_place_[peer];
  for (; next < in_place_[peer].size() && in_place_granted_[peer] < kGrantWindow; ++next) {
    const auto [i, chunk] = in_place_[peer][next];
    if (receive_dropped_[static_cast<std::size_t>(i)]) continue;
    granted_[static_cast<std::size_t>(i)][static_cast<std::size_t>(chunk)] = true;
    const auto& runs = c_.program.receive_runs[static_cast<std::size_t>(i)][static_cast<std::size_t>(chunk)];
    REFIT_TRY(grant(static_cast<std::size_t>(i), chunk, runs));
    ++in_place_granted_[peer];
  }
  return {};
}

Result<void> Engine::grant(std::size_t receive, std::int64_t chunk, std::vector<Run> runs) {
  const Receive& r = c_.program.receives()[receive];
  Message m = message(MessageKind::kGrant);
  m.transfer = r.transfer;
  m.chunk = chunk;
  m.runs = std::move(runs);
  return post(r.peer, m);
}

// Staged chunks are granted strictly in plan order, as slots come free.
Result<void> Engine::grant_staged() {
  const auto& staging = c_.program.receive_staging;
  while (next_staged_ < staged_.size() && receive_slots_.available()) {
    const auto [i, chunk] = staged_[next_staged_++];
    if (receive_dropped_[static_cast<std::size_t>(i)]) continue;
    const Receive& r = c_.program.receives()[static_cast<std::size_t>(i)];
    const auto slot = receive_slots_.take();
    slot_of_[static_cast<std::size_t>(i)][static_cast<std::size_t>(chunk)] = slot;
    const auto bytes = c_.program.layout(r.transfer).chunk_bytes(chunk);
    const Run run{.stream = 0,
                  .region = c_.program.receive_staging_region,
                  .offset = slot * staging.slot_bytes,
                  .length = bytes};
    REFIT_TRY(grant(static_cast<std::size_t>(i), chunk, {run}));
  }
  return {};
}

Result<void> Engine::on_data(const Message& m) {
  const auto t = m.transfer;
  const auto i = t >= 0 && static_cast<std::size_t>(t) < receive_of_transfer_.size()
                     ? receive_of_transfer_[static_cast<std::size_t>(t)]
                     : -1;
  const Receive* r = i >= 0 ? &c_.program.receives()[static_cast<std::size_t>(i)] : nullptr;
  if (!r || r->peer.value != m.from || m.chunk < 0 ||
      m.chunk >= static_cast<std::int64_t>(r->chunks.size()) ||
      arrived_[static_cast<std::size_t>(i)][static_cast<std::size_t>(m.chunk)])
    return fail(ErrorCode::kRuntime, fmt::format("rank {} announced chunk {} of transfer {}, which this rank "
                                                 "does not expect from it",
                                                 m.from, m.chunk, t));
  const auto k = static_cast<std::size_t>(m.chunk);
  // A chunk of a dropped transfer that its sender had already put: not used, its grant comes back.
  if (receive_dropped_[static_cast<std::size_t>(i)]) {
    free_chunk(static_cast<std::size_t>(i), k);
    REFIT_TRY(grant_in_place(static_cast<std::size_t>(m.from)));
    return grant_staged();
  }
  const bool staged = r->chunks[k].path == lowering::CopyPath::kStaged;
  const auto slot = slot_of_[static_cast<std::size_t>(i)][k];
  const auto& p = c_.program;
  // A staged chunk goes from its slot to where it belongs; one that landed in place may still
  // hold parts of this rank's own boxes that are copied out of it.
  if (staged || r->extracts) {
    const WorkTimer timer(*report_.work.pack_unpack);
    unpack_chunk(
        *p.rank, *r, m.chunk, p.host(c_.regions.bases),
        staged ? c_.regions.bases[p.receive_staging_region] + slot * p.receive_staging.slot_bytes : nullptr);
  }
  auto& arrived = arrived_[static_cast<std::size_t>(i)];
  arrived[k] = true;
  auto& prefix = arrived_prefix_[static_cast<std::size_t>(i)];
  while (prefix < static_cast<std::int64_t>(r->chunks.size()) && arrived[static_cast<std::size_t>(prefix)])
    ++prefix;
  --chunks_to_receive_;
  if (!staged) {
    granted_[static_cast<std::size_t>(i)][k] = false;
    --in_place_granted_[static_cast<std::size_t>(m.from)];
    return grant_in_place(static_cast<std::size_t>(m.from));
  }
  receive_slots_.give(slot);
  return grant_staged();
}

}  // namespace refit::ucx_detail
