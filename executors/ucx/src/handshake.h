#pragma once
// The last step of prepare: every rank says hello to every peer over its new endpoints and waits
// to hear from all of them, within the timeout. Endpoints are then wired up in both directions
// and every peer is known to listen before any byte moves, so a peer that dies later leaves no
// half-made connection behind.
#include <cstdint>

#include "connections.h"
#include "refit/core/units.h"
#include "ucx_handles.h"
#include "wire.h"

namespace refit::ucx_detail {

struct HandshakeParties {
  Worker& worker;
  Inbox& inbox;
  Outbox& outbox;
  Connections& connections;
};

// Errors name the ranks that did not answer in time, or the first one a hello could not reach.
[[nodiscard]] Result<void> handshake(const HandshakeParties& parties, Rank self, std::uint64_t epoch,
                                     Seconds timeout);

}  // namespace refit::ucx_detail
