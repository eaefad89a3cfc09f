#pragma once
// FP8 in flight on the sending side, the part every executor shares. A plan of a problem
// quantised at the senders (core/quantization.h) moves a weight's fp8 values and its scales, but
// a training rank holds the weight in its source dtype (bf16) and holds no scales. Before it sends,
// the rank quantises each such box into memory of the executor's own (the CPU quantizer in
// QuantizingExecutor, the CUDA kernel in the NCCL executor), and the executor sends from there.
// This finds those boxes, checks the buffers given for them, and makes the buffers to send from.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/quant_scheme.h"
#include "refit/executors/executor.h"

namespace refit {

// One weight box a rank quantises: its source-dtype buffer in, fp8 values and scales out.
struct SenderQuantization {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  std::uint32_t weight = 0;  // the plan's tensor of the fp8 values
  std::uint32_t scales = 0;  // the plan's tensor of its scales
  Box box;                   // the rank's box of the weight, in elements
  std::size_t source = 0;    // index of the given bf16 buffer in RankBuffers::sources
  // The rank sends some of the values or scales. A replica the plan sends nothing from need not
  // quantise (it still gets buffers, so that its buffers match the plan).
  bool sent = false;

  Bytes values_bytes() const;  // one byte per element
  Bytes scales_bytes() const;  // the box's scale shape in the scheme's scale dtype
};

// The boxes `rank` quantises before sending, in the order of buffers.sources; empty when the plan
// quantises nothing at the senders. Refuses (naming rank and tensor) a weight's buffer that is not
// bf16 or not its whole box in bytes, one given as framework regions, and a scales buffer passed
// by the caller (the rank holds none).
[[nodiscard]] Result<std::vector<SenderQuantization>> sender_quantizations(const Plan& plan, Rank rank,
                                                                           const RankBuffers& buffers);

// Where one box's fp8 values and scales live (values_bytes() and scales_bytes() long).
struct QuantizedMemory {
  std::span<std::byte> values;
  std::span<std::byte> scales;
};

// `given` with each quantised source replaced by its values buffer, followed by its scales buffer
// (memory[i] for quantizations[i]): the buffers the plan sends from. `values_index[i]` is where
// quantizations[i]'s values buffer lies in the result's sources (its scales buffer follows it).
struct SendingBuffers {
  RankBuffers buffers;
  std::vector<std::size_t> values_index;
};
SendingBuffers sending_buffers(const RankBuffers& given, std::span<const SenderQuantization> quantizations,
                               std::span<const QuantizedMemory> memory);

}  // namespace refit
