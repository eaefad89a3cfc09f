// refit's kernels timed on a GPU (refit/executors/nccl/kernel_timing.h), as `refit topo --discover
// --measure` times them: a GPU named by its PCI bus id; rates that a copy of the same bytes by
// cudaMemcpy bounds; the NCCL executor's costs per operation and per step. Without a device only
// the refusals run.
#include "refit/executors/nccl/kernel_timing.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "cuda_handles.h"
#include "gpu_support.h"

namespace refit {
namespace {

TEST(KernelTiming, ABusIdNoDeviceHasIsRefusedNamingIt) {
  const auto timed = time_nccl_kernels("0000:ff:1f.7", KernelTiming{});
  ASSERT_FALSE(timed.has_value());
  EXPECT_NE(timed.error().message.find("GPU 0000:ff:1f.7"), std::string::npos) << timed.error().message;
  EXPECT_NE(timed.error().message.find("cudaDeviceGetByPCIBusId"), std::string::npos)
      << timed.error().message;
}

TEST(KernelTiming, OptionsOutOfRangeAreRefusedBeforeAnyDeviceIsTouched) {
  const auto tiny = time_nccl_kernels("0000:18:00.0", KernelTiming{.copy_bytes = Bytes{4096}});
  ASSERT_FALSE(tiny.has_value());
  EXPECT_NE(tiny.error().message.find("copy_bytes must be within [1 MiB, 64 GiB], got 4096"),
            std::string::npos)
      << tiny.error().message;
  const auto few = time_nccl_kernels("0000:18:00.0", KernelTiming{.nccl_bytes = Bytes{4096}});
  ASSERT_FALSE(few.has_value());
  EXPECT_NE(few.error().message.find("nccl_bytes must be within [1 MiB, 64 GiB], got 4096"),
            std::string::npos)
      << few.error().message;
  const auto none = time_nccl_kernels("0000:18:00.0", KernelTiming{.repetitions = 0});
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message.find("repetitions must be within [1, 1000], got 0"), std::string::npos);
}

// Bytes per second cudaMemcpy copies `bytes` device to device at: the fastest of 5 runs after a
// warm-up, so that a slow run on a shared machine does not lower the bound the test holds the
// kernel to.
double memcpy_rate(std::int64_t bytes) {
  nccl_detail::DeviceMemory a, b;
  EXPECT_TRUE(a.allocate(static_cast<std::size_t>(bytes), "a").has_value());
  EXPECT_TRUE(b.allocate(static_cast<std::size_t>(bytes), "b").has_value());
  cudaMemcpy(b.get(), a.get(), static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice);
  cudaDeviceSynchronize();
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    cudaMemcpy(b.get(), a.get(), static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(bytes) / seconds);
  }
  return best;
}

TEST(KernelTiming, TheDeviceOfABusIdIsTimedWithinWhatItsMemoryAllows) {
  REFIT_REQUIRE_GPU();
  char bus[32] = {};
  ASSERT_EQ(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), cudaSuccess);
  const KernelTiming timing{.copy_bytes = Bytes{std::int64_t{128} << 20},
                            .quantize_bytes = Bytes{std::int64_t{256} << 20},
                            .nccl_bytes = Bytes{std::int64_t{64} << 20},
                            .repetitions = 3};
  const auto timed = time_nccl_kernels(bus, timing);
  ASSERT_TRUE(timed.has_value()) << timed.error().message;
  cudaDeviceProp properties{};
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  EXPECT_EQ(timed->gpu, properties.name);
  // A copy kernel moves no faster than cudaMemcpy (with a margin of 1.5 for one timing's noise).
  // A quantize moves 3 bytes of memory per 2 bf16 bytes it reads, a copy 2 per byte copied, so its
  // bf16 reads outpace cudaMemcpy's bytes by at most (2/3) / (1/2) = 4/3.
  const double reference = memcpy_rate(timing.copy_bytes.value);
  EXPECT_GT(timed->copy.value, 0.0);
  EXPECT_LT(timed->copy.value, 1.5 * reference) << timed->copy.gbps() << " GB/s against " << reference / 1e9;
  for (const QuantScheme s : all_quant_schemes()) {
    EXPECT_GT(of_scheme(timed->quantize, s).value, 0.0) << quant_scheme_name(s);
    EXPECT_LT(of_scheme(timed->quantize, s).value, 4.0 / 3.0 * 1.5 * reference) << quant_scheme_name(s);
  }
  // The NCCL executor's costs: a send or receive and a step each take some time, and less than a
  // millisecond (an H100 took 2.2 and 5.0 us, bench/RESULTS.md); printed for the results.
  EXPECT_GT(timed->nccl.per_op.value + timed->nccl.per_step.value, 0.0);
  EXPECT_LT(timed->nccl.per_op.value, 1e-3);
  EXPECT_LT(timed->nccl.per_step.value, 1e-3);
  std::printf("NCCL executor on %s: %.2f us per send or receive, %.2f us per step\n", timed->gpu.c_str(),
              timed->nccl.per_op.value * 1e6, timed->nccl.per_step.value * 1e6);
}

}  // namespace
}  // namespace refit
