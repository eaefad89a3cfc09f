#pragma once
// The order a delta step runs a plan's transfers in (delta_executor.h), which the executor runs and
// the prediction sums. A round is one pass of the codec: its receivers audit what they hold, its
// senders encode, its payloads move, and its receivers decode. The payloads move in hops: hop 0
// carries what the round's senders encoded, hop h + 1 relays forwarding, as it arrived, what they
// received in hop h. A relay forwards a payload as it arrived where it forwards exactly a box it
// received (the same tensor and box as a segment of the transfer it came by): its receiver's
// baseline of the box must then equal the relay's, which is the sender's (the round's audit checks
// the whole chain), so the sender's payload applies at every receiver, and the relay decodes its own
// copy beside the others, once the round's hops have moved. A relay that forwards anything else
// (part of a box it received, a box gathered from several, the fp8 its quantize step made, boxes of
// several rounds) decodes first and encodes again, in the next round.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/planner/plan.h"

namespace refit {

struct DeltaSchedule {
  std::vector<std::int32_t> round;  // by transfer of the plan
  std::vector<std::int32_t> hop;    // by transfer of the plan, within its round
  // By piece of the plan (delta_step.h: a segment, numbered in plan order): the piece whose
  // payload it carries: itself, or for a piece a relay forwards as it arrived, the piece its
  // round's sender encoded.
  std::vector<std::int32_t> origin;
  // By piece of the plan: for a piece a relay forwards as it arrived, the piece it arrived as (of
  // the transfer it came by); -1 for a piece its sender encodes.
  std::vector<std::int32_t> forwards;
  std::vector<std::int32_t> hops;  // by round: how many
  std::int32_t rounds() const { return static_cast<std::int32_t>(hops.size()); }
};

DeltaSchedule delta_schedule(const Plan& plan);

// `payloads` (by piece of the plan) where the piece's transfer moves in hop `hop` of round `round`,
// 0 for the others: the payloads of that hop's step (delta_step.h).
std::vector<std::int64_t> hop_payloads(const Plan& plan, const DeltaSchedule& schedule,
                                       std::span<const std::int64_t> payloads, std::int32_t round,
                                       std::int32_t hop);

}  // namespace refit
