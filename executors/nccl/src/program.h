#pragma once
// The seam between planning and doing: one process's part of a plan as an ordered list of
// operations on two streams, in the order the host issues them. translate() makes it from the
// plan (pure C++, tested on CPUs); a Backend issues it to CUDA and NCCL, or a test records and
// simulates it.
//
// Streams: the copy stream quantizes (FP8 in flight, each box in the step that first sends from
// it), packs and unpacks
// (batched box copies), the comm stream runs one NCCL group per step. Events order them: the comm stream
// waits for a step's packs, the copy stream for a step's traffic before unpacking it. Event ids are never
// reused.
#include <cstdint>
#include <variant>
#include <vector>

#include "device_copy.h"
#include "refit/core/box.h"
#include "refit/core/quant_scheme.h"
#include "refit/core/units.h"

namespace refit::nccl_detail {

enum class BufferKind : std::uint8_t {
  kShard,    // a caller's shard buffer: index into the process's shard list
  kStaging,  // the executor's staging memory (packing, bounded per rank)
  kScratch,  // the executor's scratch memory (forwarded data outside the rank's own boxes)
};

struct Address {
  BufferKind kind = BufferKind::kStaging;
  std::int32_t index = 0;  // kShard: the shard; kStaging: the region (Program::staging_regions)
  std::int64_t offset = 0;
  bool operator==(const Address&) const = default;
};

enum class StreamKind : std::uint8_t { kCopy, kComm };
enum class Direction : std::uint8_t { kSend, kRecv };

struct GroupStart {
  std::int32_t step = 0;
};
struct GroupEnd {
  std::int32_t step = 0;
};

// One ncclSend or ncclRecv: one chunk of one transfer.
struct P2p {
  Direction direction = Direction::kSend;
  Rank self;                   // the plan rank of this process that sends or receives
  Rank peer;                   // the plan rank on the other side
  std::int32_t peer_comm = 0;  // the communicator rank running `peer`
  Address at;
  std::int64_t bytes = 0;
  std::int32_t transfer = 0;
  std::int32_t chunk = 0;
  std::int64_t message_offset = 0;  // where the chunk starts in the transfer's message
  std::int32_t step = 0;
};

struct CopyOp {
  Address src;  // the first element of the copied box in each buffer
  Address dst;
  CopyGeometry geometry;
};

// A part of a weight box quantized at the senders (sender_quantization.h): bf16 elements where
// the caller holds them (a buffer, or a framework parameter's region) into the part's place in the
// executor's fp8 values and scales of the box, which the plan sends from. One kernel launch.
struct Quantize {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  Address source;  // the part's first bf16 element
  Address values;  // its first value: one byte per element, row-major over the part
  Address scales;  // its first scale: row-major over quant_scale_shape of the part
  Shape shape;     // the part's extent, in elements
  Shape strides;   // of the bf16 elements, in elements
};

// The Quantize ops, one per part, of a weight box that a plan rank of this process quantizes.
struct QuantizedBox {
  Rank rank;
  std::uint32_t weight = 0;  // the plan's tensor of its fp8 values
  std::vector<Quantize> parts;
};

enum class BatchKind : std::uint8_t { kPack, kUnpack };

// Box copies that may run concurrently (they write disjoint bytes and read nothing another
// writes): one kernel launch.
struct CopyBatch {
  std::int32_t id = 0;  // 0, 1, ... in program order
  BatchKind kind = BatchKind::kPack;
  std::int32_t step = 0;  // the step packed for, or the step whose data is unpacked
  std::vector<CopyOp> copies;
};

struct Record {
  StreamKind stream = StreamKind::kCopy;
  std::int32_t event = 0;
};
struct Wait {
  StreamKind stream = StreamKind::kCopy;
  std::int32_t event = 0;
};

using Op = std::variant<GroupStart, GroupEnd, P2p, CopyBatch, Quantize, Record, Wait>;

// The ops of one step on this process, from ops[first_op] to the next block's first op.
struct Block {
  std::int32_t step = 0;
  std::size_t first_op = 0;
  std::int32_t done_event = 0;  // recorded on the comm stream once the step's group has run
};

struct Program {
  // Where region `index` starts in the staging memory.
  std::int64_t staging_start(std::int32_t index) const;

  std::vector<Op> ops;
  std::vector<Block> blocks;
  std::int32_t events = 0;       // ids 0 .. events-1
  std::int32_t final_event = 0;  // recorded on the copy stream after everything else
  std::int32_t batches = 0;
  // Staging region 2 * slot + h is half h of the staging of the process's plan rank `slot`
  // (LocalView::ranks); each is as large as its busiest step needs, and they lie back to back.
  std::vector<std::int64_t> staging_regions;  // bytes of each region
  std::int64_t staging_bytes = 0;             // all regions
  std::int64_t scratch_bytes = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  std::int64_t messages = 0;  // transfers sent by this process's plan ranks
};

}  // namespace refit::nccl_detail
