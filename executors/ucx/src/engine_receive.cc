// The receiving half of an execution: grants out, data notices in, unpacking.
#include <fmt/format.h>

#include "engine.h"
#include "refit/core/try.h"

namespace refit::ucx_detail {

Result<void> Engine::post_grants(const std::vector<Grant>& grants) {
  for (const Grant& g : grants) {
    const Receive& r = c_.program.receives()[g.receive];
    Message m = message(MessageKind::kGrant);
    m.transfer = r.transfer;
    m.chunk = g.chunk;
    m.runs = g.runs;
    REFIT_TRY(post(r.peer, m));
  }
  return {};
}

Result<void> Engine::on_data(const Message& m) {
  const auto i = receiving_.receive_from(m.transfer, m.from);
  if (!i || !receiving_.awaits(*i, m.chunk))
    return fail(ErrorCode::kRuntime, fmt::format("rank {} announced chunk {} of transfer {}, which this rank "
                                                 "does not expect from it",
                                                 m.from, m.chunk, m.transfer));
  std::vector<Grant> grants;
  // A chunk of a dropped transfer that its sender had already put: not used, its grant comes back.
  if (receiving_.dropped(*i)) {
    receiving_.discard(*i, m.chunk, grants);
    return post_grants(grants);
  }
  const Receive& r = c_.program.receives()[*i];
  const auto slot = receiving_.slot(*i, m.chunk);
  const auto& p = c_.program;
  // A staged chunk goes from its slot to where it belongs; one that landed in place may still
  // hold parts of this rank's own boxes that are copied out of it.
  if (slot >= 0 || r.extracts) {
    const WorkTimer timer(*report_.work.pack_unpack);
    unpack_chunk(*p.rank, r, m.chunk, p.host(c_.regions.bases),
                 slot >= 0 ? c_.regions.bases[p.receive_staging_region] + slot * p.receive_staging.slot_bytes
                           : nullptr);
  }
  receiving_.land(*i, m.chunk, grants);
  return post_grants(grants);
}

}  // namespace refit::ucx_detail
