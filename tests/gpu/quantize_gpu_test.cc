// The quantize kernels on a GPU: every reference vector (tests/data/quantize/vectors.json), read in
// place from a row-padded device array, must come back bit for bit, through the 16-byte vector
// loads (rows padded by 8 elements, so every vector stays aligned) and the element loads (padded
// by 3); and the GPU's fp8 conversion instruction, which the kernels use for finite blocks, must
// round every finite fp32 as fp32_to_e4m3 does. Throughput is bench/quantize_gpu_bench's.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "cuda_handles.h"
#include "e4m3_check.h"
#include "gpu_support.h"
#include "quantize_kernel.h"
#include "vectors.h"

namespace refit {
namespace {

using nccl_detail::DeviceMemory;

// Quantizes `shape` read with `strides` from the device copy of `host` (elements), back to host.
testing::Expected quantize_on_gpu(QuantScheme s, const std::vector<std::uint16_t>& host, const Shape& shape,
                                  const Shape& strides) {
  testing::Expected out{std::vector<std::uint8_t>(static_cast<std::size_t>(element_count(shape))),
                        std::vector<std::byte>(static_cast<std::size_t>(scale_buffer_bytes(s, shape)))};
  DeviceMemory src, values, scales;
  EXPECT_TRUE(src.allocate(host.size() * 2, "src") && values.allocate(out.values.size(), "values") &&
              scales.allocate(out.scales.size(), "scales"));
  cudaMemcpy(src.get(), host.data(), host.size() * 2, cudaMemcpyHostToDevice);
  EXPECT_EQ(
      nccl_detail::launch_quantize(s, reinterpret_cast<const std::uint16_t*>(src.get()), shape.data(),
                                   strides.data(), static_cast<int>(shape.size()),
                                   reinterpret_cast<std::uint8_t*>(values.get()), scales.get(), nullptr),
      cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(out.values.data(), values.get(), out.values.size(), cudaMemcpyDeviceToHost);
  cudaMemcpy(out.scales.data(), scales.get(), out.scales.size(), cudaMemcpyDeviceToHost);
  return out;
}

TEST(GpuQuantizeKernel, ReproducesTheReferenceVectors) {
  REFIT_REQUIRE_GPU();
  for (const std::int64_t pad : {8, 3})
    for (const auto& c : testing::reference_vectors())
      for (QuantScheme s : all_quant_schemes()) {
        // Each row `pad` elements longer than the weight: a shard of a wider tensor.
        Shape padded = c.shape;
        padded.back() += pad;
        const Shape strides = testing::row_major_strides(padded);
        std::vector<std::uint16_t> host(static_cast<std::size_t>(element_count(padded)), 0x7FC0);
        const std::int64_t cols = c.shape.back();
        for (std::int64_t i = 0; i < element_count(c.shape); ++i)
          host[static_cast<std::size_t>(i / cols * (cols + pad) + i % cols)] =
              c.input[static_cast<std::size_t>(i)];
        const auto got = quantize_on_gpu(s, host, c.shape, strides);
        EXPECT_EQ(got.values, c.expected(s).values)
            << c.name << " " << quant_scheme_name(s) << " pad " << pad;
        EXPECT_EQ(got.scales, c.expected(s).scales)
            << c.name << " " << quant_scheme_name(s) << " pad " << pad;
      }
}

TEST(GpuQuantizeKernel, ConversionInstructionRoundsEveryFiniteFloatAsTheSoftwareDoes) {
  REFIT_REQUIRE_GPU();
  gpu_testing::E4m3Check check;
  ASSERT_EQ(gpu_testing::check_e4m3_conversion(check), cudaSuccess);
  // Every fp32 but the 2^24 NaN and Inf encodings.
  EXPECT_EQ(check.checked, (std::uint64_t{1} << 32) - (std::uint64_t{1} << 24));
  EXPECT_EQ(check.mismatches, 0u) << "first at fp32 bits 0x" << std::hex << check.first_bits
                                  << ": instruction 0x" << check.first_instruction << ", fp32_to_e4m3 0x"
                                  << check.first_software;
}

}  // namespace
}  // namespace refit
