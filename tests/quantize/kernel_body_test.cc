// The NCCL executor's quantize kernel (executors/nccl/src/quantize_kernel.cu) without a GPU: its
// body's functions, run here lane by lane in the kernel's own mapping (256 lanes per block128
// tile, a warp of 32 per mxfp8 tile, the lanes' amax reduced as the kernel's shuffles do), must
// reproduce the reference vectors bit for bit.
#include "quantize_kernel_body.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "vectors.h"

namespace refit {
namespace {

using nccl_detail::DeviceQuantize;
using testing::Expected;
using testing::reference_vectors;
using testing::row_major_strides;

// What the kernel computes: every tile, every lane, in any order (the tiles are independent).
Expected run_kernel_body(QuantScheme s, const std::uint16_t* src, const Shape& shape, const Shape& strides) {
  Expected out{std::vector<std::uint8_t>(static_cast<std::size_t>(element_count(shape))),
               std::vector<std::byte>(static_cast<std::size_t>(scale_buffer_bytes(s, shape)))};
  DeviceQuantize q;
  EXPECT_TRUE(nccl_detail::make_device_quantize(s, src, shape.data(), strides.data(),
                                                static_cast<int>(shape.size()), out.values.data(),
                                                reinterpret_cast<unsigned char*>(out.scales.data()), q));
  nccl_detail::run_quantize_on_host(q);
  return out;
}

TEST(QuantizeKernelBody, BlocksAreTheSchemesBlocks) {
  // The kernel's tile (band x width) is quant_block's block on the last two dims.
  const std::vector<std::uint16_t> data(1);
  for (QuantScheme s : all_quant_schemes()) {
    DeviceQuantize q;
    const Shape shape{4, 300, 200};
    const Shape strides = row_major_strides(shape);
    ASSERT_TRUE(nccl_detail::make_device_quantize(s, data.data(), shape.data(), strides.data(), 3, nullptr,
                                                  nullptr, q));
    const Shape block = quant_block(s, 3);
    EXPECT_EQ(q.band, block[1]);
    EXPECT_EQ(q.width, block[2]);
    EXPECT_EQ(q.tiles, element_count(quant_scale_shape(s, shape)));
    // The lanes of a tile cover whole rows of it: the kernel's mapping needs lanes % width == 0.
    EXPECT_EQ(nccl_detail::quantize_lanes(s) % q.width, 0);
  }
}

TEST(QuantizeKernelBody, ReproducesTheReferenceVectors) {
  for (const auto& c : reference_vectors())
    for (QuantScheme s : all_quant_schemes()) {
      const Expected got = run_kernel_body(s, c.input.data(), c.shape, row_major_strides(c.shape));
      EXPECT_EQ(got.values, c.expected(s).values) << c.name << " " << quant_scheme_name(s);
      EXPECT_EQ(got.scales, c.expected(s).scales) << c.name << " " << quant_scheme_name(s);
    }
}

TEST(QuantizeKernelBody, StridedBoxesToo) {
  // The first 2 x 100 x 64 of the 3x130x70 experts, read in place (strides of the whole).
  const auto& c = reference_vectors()[1];
  ASSERT_EQ(c.shape, (Shape{3, 130, 70}));
  const Shape box{2, 100, 64};
  for (QuantScheme s : all_quant_schemes()) {
    const Expected got = run_kernel_body(s, c.input.data(), box, row_major_strides(c.shape));
    const Expected cpu = testing::quantize_view(s, {c.input.data(), box, row_major_strides(c.shape)});
    EXPECT_EQ(got.values, cpu.values) << quant_scheme_name(s);
    EXPECT_EQ(got.scales, cpu.scales) << quant_scheme_name(s);
  }
}

}  // namespace
}  // namespace refit
