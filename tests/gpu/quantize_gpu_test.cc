// The quantize kernel on a GPU: every reference vector (tests/data/quantize/vectors.json), read in
// place from a padded (row-strided) device array, must come back bit for bit; and its throughput
// on a 7168 x 2048 weight, printed for bench/RESULTS.md (docs/quantization.md has the figure the
// simulator assumes until this one is measured).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "cuda_handles.h"
#include "gpu_support.h"
#include "quantize_kernel.h"
#include "vectors.h"

namespace refit {
namespace {

using nccl_detail::DeviceMemory;

// Quantizes `shape` read with `strides` from the device copy of `host` (elements), back to host.
testing::Expected quantize_on_gpu(Scheme s, const std::vector<std::uint16_t>& host, const Shape& shape,
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
  for (const auto& c : testing::reference_vectors())
    for (Scheme s : all_schemes()) {
      // Each row 3 elements longer than the weight: a shard of a wider tensor.
      Shape padded = c.shape;
      padded.back() += 3;
      const Shape strides = testing::row_major_strides(padded);
      std::vector<std::uint16_t> host(static_cast<std::size_t>(element_count(padded)), 0x7FC0);
      const std::int64_t cols = c.shape.back();
      for (std::int64_t i = 0; i < element_count(c.shape); ++i)
        host[i / cols * (cols + 3) + i % cols] = c.input[i];
      const auto got = quantize_on_gpu(s, host, c.shape, strides);
      EXPECT_EQ(got.values, c.expected(s).values) << c.name << " " << scheme_name(s);
      EXPECT_EQ(got.scales, c.expected(s).scales) << c.name << " " << scheme_name(s);
    }
}

TEST(GpuQuantizeKernel, Throughput) {
  REFIT_REQUIRE_GPU();
  const Shape shape{7168, 2048};
  const std::int64_t n = element_count(shape);
  DeviceMemory src, values, scales;
  ASSERT_TRUE(src.allocate(n * 2, "src") && values.allocate(n, "values") && scales.allocate(n, "scales"));
  cudaMemset(src.get(), 0x3F, n * 2);  // 0x3F3F: 0.75 everywhere
  const Shape strides = testing::row_major_strides(shape);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (Scheme s : all_schemes()) {
    constexpr int kRuns = 50;
    const auto launch = [&] {
      return nccl_detail::launch_quantize(s, reinterpret_cast<const std::uint16_t*>(src.get()), shape.data(),
                                          strides.data(), 2, reinterpret_cast<std::uint8_t*>(values.get()),
                                          scales.get(), nullptr);
    };
    ASSERT_EQ(launch(), cudaSuccess);  // warm-up
    cudaEventRecord(start);
    for (int r = 0; r < kRuns; ++r) launch();
    cudaEventRecord(stop);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const double seconds = ms / 1e3 / kRuns;
    std::printf("quantize %s 7168x2048: %.1f us, %.0f GB/s of bf16 input, %.0f GB/s of HBM traffic\n",
                std::string(scheme_name(s)).c_str(), seconds * 1e6, 2.0 * n / seconds / 1e9,
                3.0 * n / seconds / 1e9);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace
}  // namespace refit
