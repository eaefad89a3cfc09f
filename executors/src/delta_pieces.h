#pragma once
// The pieces of a delta refit (delta_executor.h): every segment of every transfer of a plan, in
// plan order, numbered alike on every rank; and for one rank, the pieces it sends and receives with
// the shard each one is packed from or unpacked into.
#include <cstdint>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/delta_schedule.h"
#include "refit/executors/executor.h"

namespace refit::delta_pieces {

struct Piece {
  std::int32_t index = 0;     // among every piece of the plan, in plan order
  std::int32_t transfer = 0;  // index into Plan::transfers
  std::int32_t round = 0;     // its transfer's round and hop (delta_schedule.h)
  std::int32_t hop = 0;
  // A piece a relay forwards as it arrived: the piece it arrived as, and the transfer it came by.
  std::int32_t forwards = -1;
  std::int32_t via = kFromSourceShard;
  std::uint32_t tensor = 0;  // index into Plan::tensors
  Box box;                   // of its tensor, in global coordinates
  DType dtype = DType::kBF16;
  std::int64_t bytes = 0;
  std::string name;   // "tensor 'w' box [0:4, 0:8] of transfer 3", for errors
  ShardBuffer shard;  // this rank's: the source shard it is packed from, or the destination shard
                      // it lands in (none for a piece it forwards as it arrived)
};

// A landing rank's quantize step (FP8 at the landing ranks) for one weight box: at the start of
// its round, once the earlier rounds decoded the box's bf16 landing copy, the rank quantizes it
// into its fp8 values and scales, which later rounds forward as any relay does. Its segments are
// pieces that move nothing: the rank sizes them 0.
struct LandingQuantization {
  std::int32_t round = 0;
  QuantScheme scheme = QuantScheme::kFp8Block128;
  ShardBuffer copy;    // the bf16 landing copy, the box whole
  ShardBuffer values;  // the rank's destination shards of the fp8 values and the scales
  ShardBuffer scales;
};

struct RankPieces {
  std::int32_t total = 0;               // pieces of the whole plan
  DeltaSchedule schedule;               // of the whole plan
  std::vector<std::int32_t> rounds_of;  // by piece of the whole plan: its round
  std::vector<Piece> sends;             // plan order: the pieces it encodes
  std::vector<Piece> forwards;          // plan order: the pieces it forwards as they arrived
  std::vector<Piece> receives;          // plan order
  std::vector<std::int32_t> quantized;  // the pieces of the rank's quantize steps (nothing moves)
  std::vector<LandingQuantization> landing;
};

// The pieces `rank` sends and receives. A relay encodes what it forwards from its destination
// shard (where an earlier round put it), or forwards its payload as it arrived (delta_schedule.h). Refuses
// (naming the transfer or tensor) what a delta refit cannot do yet: a quantize step of part of a box, a relay
// forwarding what lies outside its own destination shards (gather-broadcast), framework parameters, and a
// piece outside the rank's shards.
[[nodiscard]] Result<RankPieces> rank_pieces(const Plan& plan, Rank rank, const RankBuffers& buffers);

}  // namespace refit::delta_pieces
