// What a rank keeps of a plan prepared for delta steps: the boxes it sends with their baselines,
// the pieces it receives, its payload memory and its quantize steps (delta_executor.cc runs the
// steps over them).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "delta_pieces.h"
#include "refit/core/error.h"
#include "refit/executors/delta_executor.h"
#include "refit/executors/delta_memory.h"
#include "refit/executors/sender_quantization.h"

namespace refit::delta_prepared {

using delta_pieces::Piece;

// A box of a tensor this rank sends, to one receiver or to several (replicas): the bytes it last
// sent them (the baseline: after a step that succeeded every receiver of the box holds them,
// whether it got a delta or dense) and their checksum, and this step's bytes and encodings.
struct Source {
  std::int32_t round = 0;
  std::size_t first_send = 0;  // the first of its pieces in DeltaPrepared::sends
  std::unique_ptr<DeltaBuffer> baseline;
  std::optional<Checksum> base;  // nullopt: nothing both ends agree on, the next payload is dense
  std::unique_ptr<DeltaBuffer> current;
  bool packed = false;  // `current` holds this step's bytes
  Checksum result;      // of `current`
  // This step's payloads, encoded once each: against the baseline, and dense (for receivers that
  // do not hold it); empty until a receiver needs it. They lie in the first receiver's payloads.
  std::span<const std::byte> delta;
  std::int64_t changed = 0;  // elements, in `delta`
  std::span<const std::byte> dense;
  bool sent = false;  // some receiver got a payload this step
};

// A piece this rank sends: its box's Source and this step's payload bytes (0: unchanged,
// nothing sent).
struct Sending {
  Piece piece;
  std::size_t source = 0;
  std::int64_t payload = 0;
  bool dense = false;  // sent dense for want of a baseline both ends agree on
};

// A piece this rank receives: its packed copy, decoded in place, then unpacked into its shard.
struct Receiving {
  Piece piece;
  std::unique_ptr<DeltaBuffer> packed;
  Checksum audit;  // of the bytes the rank holds before the step
  std::int64_t payload = 0;
};

// FP8 in flight: a weight box this rank quantizes at every step before it packs its pieces, into
// memory of its own that the pieces' source shards point into (the values and scales boxes the
// plan sends), so that what is encoded is exactly the fp8 a dense refit sends.
struct Quantized {
  SenderQuantization box;
  std::unique_ptr<HostAllocation> values;
  std::unique_ptr<HostAllocation> scales;
};

// Where one transfer's payloads go: the pieces back to back, as large as they can get.
struct Payloads {
  std::int32_t transfer = 0;
  std::unique_ptr<DeltaBuffer> memory;
};

class DeltaPrepared final : public PreparedPlan {
 public:
  Plan plan;
  Rank rank;
  std::int32_t total_pieces = 0;
  std::vector<std::int32_t> rounds_of;  // by piece of the plan
  DeltaSchedule schedule;
  std::vector<Source> sources;
  std::vector<Sending> sends;
  std::vector<Piece> forwards;  // the pieces it forwards as they arrived
  std::vector<Receiving> receives;
  std::vector<Payloads> payloads;       // of the transfers this rank sends or receives, in plan order
  DeltaMemory* memory = nullptr;        // the executor's: where the bytes above lie, which codec runs
  RankBuffers buffers;                  // what it was prepared with, for a re-plan
  std::vector<Quantized> fp8;           // the boxes it quantizes before every step
  std::vector<std::int32_t> quantized;  // the pieces of its quantize steps
  std::vector<delta_pieces::LandingQuantization> landing;  // its quantize steps, by round
  std::vector<Bytes> planned;  // by tensor: the bytes the plan was balanced by (PlanOptions::moved_bytes)
  std::optional<DeltaRebalance> rebalance;  // as the executor had it when it prepared the plan
  // The last step's agreed payload size of every piece of the plan, and whether it went dense.
  std::vector<std::int64_t> step_payloads;
  std::vector<bool> step_dense;
};

// The most a piece's payload can take.
inline std::int64_t capacity(const DeltaPrepared& p, const Piece& piece) {
  return p.memory->capacity(piece.bytes, piece.dtype);
}

// The plan prepared for `rank`: its pieces, baselines and payload memory allocated in `memory`.
[[nodiscard]] Result<std::unique_ptr<DeltaPrepared>> make_prepared(const Plan& plan, Rank rank,
                                                                   const RankBuffers& buffers,
                                                                   DeltaMemory& memory);

}  // namespace refit::delta_prepared
