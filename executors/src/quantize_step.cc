#include "refit/executors/quantize_step.h"

#include <cstring>
#include <vector>

#include "refit/lowering/arrays.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

// Copies `packed` (`box` row-major, `element` bytes each) to where `box` lies in `to`, the
// row-major buffer of `outer`.
void place(std::span<const std::byte> packed, const Box& box, std::byte* to, const Box& outer,
           std::int64_t element) {
  const lowering::Walk walk(lowering::Array{.offset = 0, .box = &outer, .strides = nullptr}, box, element);
  walk.for_each_run(0, box.volume(), [&](std::int64_t index, std::int64_t elements) {
    std::memcpy(to + walk.offset_of(0, index), packed.data() + index * element,
                static_cast<std::size_t>(elements * element));
  });
}

void run_blocks(const lowering::RankShards& shards, const lowering::QuantizeBlocks& b,
                const lowering::HostBuffers& buffers) {
  const auto* bf16 =
      reinterpret_cast<const std::uint16_t*>(buffers.base(lowering::BufferKind::kDestination, b.copy));
  const Bf16View in{.data = bf16 + b.copy_offset, .shape = b.blocks.extent, .strides = b.copy_strides};
  std::byte* values_at = buffers.base(lowering::BufferKind::kDestination, b.values);
  std::byte* scales_at = buffers.base(lowering::BufferKind::kDestination, b.scales);
  const auto scale_bytes = static_cast<std::size_t>(scale_buffer_bytes(b.scheme, b.blocks.extent));
  if (b.whole_boxes) {  // the usual step
    quantize(
        b.scheme, in,
        std::span(reinterpret_cast<std::uint8_t*>(values_at), static_cast<std::size_t>(b.blocks.volume())),
        std::span(scales_at, scale_bytes));
    return;
  }
  std::vector<std::byte> v(static_cast<std::size_t>(b.blocks.volume())), s(scale_bytes);
  quantize(b.scheme, in, std::span(reinterpret_cast<std::uint8_t*>(v.data()), v.size()), s);
  place(v, b.blocks, values_at, shards.destinations[static_cast<std::size_t>(b.values)].box, 1);
  place(s, b.scale_box, scales_at, shards.destinations[static_cast<std::size_t>(b.scales)].box,
        dtype_size(quant_scale_dtype(b.scheme)));
}

}  // namespace

void run_quantize_step(const lowering::RankProgram& program, const lowering::QuantizeStep& step,
                       const lowering::HostBuffers& buffers) {
  for (const auto& b : step.blocks) run_blocks(program.shards(), b, buffers);
}

}  // namespace refit
