// The NCCL executor's quantize kernels (executors/nccl/src/quantize_kernel.cu) without a GPU:
// their body's functions, run here lane by lane in the kernels' own mapping (256 lanes of 8
// vectors per block128 tile, 4 lanes of one vector per mxfp8 tile, the lanes' amax reduced as the
// kernels' shuffles do), must reproduce the reference vectors bit for bit, through the 16-byte
// vector loads and 8-byte stores where the box is aligned and element by element where not.
#include "quantize_kernel_body.h"

#include <algorithm>
#include <tuple>
#include <utility>

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

// The kernel's tile (band x width) is quant_block's block on the last two dims, and its lanes'
// vectors cover it exactly once: lanes * vectors * 8 == band * width.
template <QuantScheme S>
void expect_tiles_are_blocks() {
  using G = nccl_detail::TileLanes<S>;
  const std::vector<std::uint16_t> data(1);
  DeviceQuantize q;
  const Shape shape{4, 300, 200};
  const Shape strides = row_major_strides(shape);
  ASSERT_TRUE(nccl_detail::make_device_quantize(S, data.data(), shape.data(), strides.data(), 3, nullptr,
                                                nullptr, q));
  const Shape block = quant_block(S, 3);
  EXPECT_EQ(G::band, block[1]);
  EXPECT_EQ(G::width, block[2]);
  EXPECT_EQ(G::lanes * G::vectors * nccl_detail::kVectorElements, G::band * G::width);
  EXPECT_EQ(q.tiles, element_count(quant_scale_shape(S, shape)));
}

TEST(QuantizeKernelBody, TilesAreTheSchemesBlocks) {
  expect_tiles_are_blocks<QuantScheme::kFp8Block128>();
  expect_tiles_are_blocks<QuantScheme::kMxfp8>();
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

TEST(QuantizeKernelBody, VectorAndElementPathsAgree) {
  // Each case read in place from rows padded by `pad` elements, starting `skew` elements into the
  // buffer, into values `offset` bytes into theirs: pad 8 and skew 0 keep every vector 16-byte
  // aligned (vector loads), pad 3 or skew 1 do not (element loads); offset 1 forbids the 8-byte
  // stores, as does a last dim that is no multiple of 8. Every combination must give the bytes
  // of the reference vectors.
  for (const auto& c : reference_vectors())
    for (QuantScheme s : all_quant_schemes())
      for (const auto& [pad, skew, offset] :
           {std::tuple{8, 0, 0}, std::tuple{3, 0, 0}, std::tuple{8, 1, 0}, std::tuple{8, 0, 1}}) {
        Shape padded = c.shape;
        padded.back() += pad;
        std::vector<std::uint16_t> host(static_cast<std::size_t>(element_count(padded) + skew), 0x7FC0);
        const std::int64_t cols = c.shape.back();
        for (std::int64_t i = 0; i < element_count(c.shape); ++i)
          host[static_cast<std::size_t>(skew + i / cols * (cols + pad) + i % cols)] =
              c.input[static_cast<std::size_t>(i)];
        const auto& want = c.expected(s);
        std::vector<std::uint8_t> values(want.values.size() + 1);
        std::vector<std::byte> scales(want.scales.size());
        DeviceQuantize q;
        const Shape strides = row_major_strides(padded);
        ASSERT_TRUE(nccl_detail::make_device_quantize(
            s, host.data() + skew, c.shape.data(), strides.data(), static_cast<int>(c.shape.size()),
            values.data() + offset, reinterpret_cast<unsigned char*>(scales.data()), q));
        nccl_detail::run_quantize_on_host(q);
        const std::vector<std::uint8_t> got(
            values.begin() + offset,
            values.begin() + offset + static_cast<std::ptrdiff_t>(want.values.size()));
        EXPECT_EQ(got, want.values) << c.name << " " << quant_scheme_name(s) << " pad " << pad << " skew "
                                    << skew << " offset " << offset;
        EXPECT_EQ(scales, want.scales) << c.name << " " << quant_scheme_name(s);
      }
}

TEST(QuantizeKernelBody, TakesTheVectorPathOnlyWhereAligned) {
  // The flags the kernels branch on: 16-byte aligned vectors of 8 contiguous elements, 8-byte
  // aligned runs of 8 values.
  alignas(16) std::uint16_t src[16]{};
  alignas(16) std::uint8_t values[16]{};
  const auto flags = [&](const std::uint16_t* from, Shape shape, Shape strides, std::uint8_t* to) {
    DeviceQuantize q;
    EXPECT_TRUE(nccl_detail::make_device_quantize(QuantScheme::kMxfp8, from, shape.data(), strides.data(),
                                                  static_cast<int>(shape.size()), to, nullptr, q));
    return std::pair{q.vector_loads, q.vector_stores};
  };
  EXPECT_EQ(flags(src, {4, 64}, {64, 1}, values), std::pair(true, true));
  EXPECT_EQ(flags(src + 1, {4, 64}, {64, 1}, values), std::pair(false, true));      // misaligned start
  EXPECT_EQ(flags(src, {4, 64}, {68, 1}, values), std::pair(false, true));          // rows 136 bytes apart
  EXPECT_EQ(flags(src, {4, 64}, {1, 4}, values), std::pair(false, true));           // column-major
  EXPECT_EQ(flags(src, {4, 60}, {64, 1}, values), std::pair(true, false));          // 60 values a row
  EXPECT_EQ(flags(src, {4, 64}, {64, 1}, values + 4), std::pair(true, false));      // values at 4 bytes
  EXPECT_EQ(flags(src, {2, 4, 64}, {260, 64, 1}, values), std::pair(false, true));  // an outer stride of 260
}

}  // namespace
}  // namespace refit
