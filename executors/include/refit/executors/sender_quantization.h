#pragma once
// FP8 in flight on the sending side, the part every executor shares. A plan of a problem
// quantized at the senders (core/quantization.h) moves a weight's fp8 values and its scales, but
// a training rank holds the weight in its source dtype (bf16) and holds no scales. Before it sends,
// the rank quantizes each such box into memory of the executor's own (the CPU quantizer in
// QuantizingExecutor, the CUDA kernel in the NCCL executor), and the executor sends from there.
// This finds those boxes and where their elements lie, checks the buffers given for them, and
// makes the buffers to send from.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/quant_scheme.h"
#include "refit/executors/executor.h"

namespace refit {

// A run of whole blocks of a weight box where the caller holds it, and its place in the box's
// values and scales (both row-major over the box). A box in a buffer of its own is one part; a
// box held as a framework parameter's regions (a column of Megatron's interleaved linear_qkv, the
// up half of linear_fc1) is a part per region, each a run of rows read in place.
struct QuantizedPart {
  std::int32_t parameter = -1;  // the source parameter holding it; -1: the box's own buffer
  std::int64_t offset = 0;      // bytes into that memory of the part's first element
  Shape shape;                  // elements
  Shape strides;                // elements, in that memory
  std::int64_t values_at = 0;   // bytes into the box's values
  std::int64_t scales_at = 0;   // bytes into the box's scales
};

// One weight box a rank quantizes: its source-dtype elements in, fp8 values and scales out.
struct SenderQuantization {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  std::uint32_t weight = 0;  // the plan's tensor of the fp8 values
  std::uint32_t scales = 0;  // the plan's tensor of its scales
  Box box;                   // the rank's box of the weight, in elements
  std::size_t source = 0;    // index of its ShardBuffer in RankBuffers::sources
  std::vector<QuantizedPart> parts;
  // The rank sends some of the values or scales. A replica the plan sends nothing from need not
  // quantize (it still gets buffers, so that its buffers match the plan).
  bool sent = false;

  Bytes values_bytes() const;  // one byte per element
  Bytes scales_bytes() const;  // the box's scale shape in the scheme's scale dtype
};

// The boxes `rank` quantizes before sending, in the order of buffers.sources; empty when the plan
// quantizes nothing at the senders. Refuses, naming rank and tensor: a weight that is not bf16, a
// buffer that is not its whole box in bytes, a region that reaches past its parameter, cuts a
// block or splits the box along anything but its first dim, and a scales buffer passed by the
// caller (the rank holds none).
[[nodiscard]] Result<std::vector<SenderQuantization>> sender_quantizations(const Plan& plan, Rank rank,
                                                                           const RankBuffers& buffers);

// The caller's memory a part is read from, from its first element on.
std::span<const std::byte> part_source(const RankBuffers& buffers, const SenderQuantization& q,
                                       const QuantizedPart& part);

// Where one box's fp8 values and scales live (values_bytes() and scales_bytes() long).
struct QuantizedMemory {
  std::span<std::byte> values;
  std::span<std::byte> scales;
};

// `given` with each quantized source replaced by its values, followed by its scales (memory[i]
// for quantizations[i]): the buffers the plan sends from. Where the side is a framework's
// parameters, values and scales become two more parameters (every shard of a side is regions or
// none is). `values_index[i]` is where quantizations[i]'s values lie among the side's buffers
// (side_buffers: the sources, or the source parameters); its scales follow them.
struct SendingBuffers {
  RankBuffers buffers;
  std::vector<std::size_t> values_index;
};
SendingBuffers sending_buffers(const RankBuffers& given, std::span<const SenderQuantization> quantizations,
                               std::span<const QuantizedMemory> memory);

struct Bf16View;  // refit/quantize/quantize.h, which the executors' own sources include

// Quantizes one part of a box, read through `in` (its elements where the caller holds them), into
// its place in the box's `memory` (values_at and scales_at bytes in) with the CPU quantizer.
void quantize_part(QuantScheme scheme, const Bf16View& in, std::int64_t values_at, std::int64_t scales_at,
                   const QuantizedMemory& memory);

// Quantizes the box of `q` from the caller's memory (`given`, the buffers sender_quantizations saw)
// into `memory` with the CPU quantizer: the bytes the plan sends from.
void quantize_box(const RankBuffers& given, const SenderQuantization& q, const QuantizedMemory& memory);

}  // namespace refit
