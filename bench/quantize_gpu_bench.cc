// The NCCL executor's quantize kernels (bf16 -> fp8, both schemes) against cudaMemcpy device to
// device of the same HBM traffic in the same run: a kernel reads 2 bytes and writes 1 per element
// plus the scales, which cudaMemcpy of half that many bytes also reads and writes. 2 GiB of bf16
// (32768 x 32768, 33 times an H200's L2) of normal random values, as a whole weight and as a
// column shard read in place from a wider tensor (rows strided). The goal: 85 % (bench/RESULTS.md,
// "GPU kernels and the NCCL executor on one GPU"). Exits 0 without a GPU, printing why.
//
// Usage: quantize_gpu_bench [--summary FILE]   (rows are appended to FILE too)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_handles.h"
#include "gpu_bench.h"
#include "quantize_kernel.h"
#include "refit/quantize/quantize.h"

namespace refit::nccl_detail {
namespace {

constexpr std::int64_t kRows = 32768;
constexpr std::int64_t kCols = 32768;
constexpr double kGoal = 0.85;

// Normal bf16 values (their bits): 64 MiB made on the host, repeated over the device buffer.
void fill_random_bf16(std::byte* device, std::int64_t bytes) {
  constexpr std::int64_t kBlock = std::int64_t{64} << 20;
  std::mt19937_64 rng(32);
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> host(static_cast<std::size_t>(kBlock / 2));
  for (auto& v : host) {
    const float x = normal(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    v = static_cast<std::uint16_t>(bits >> 16);
  }
  for (std::int64_t at = 0; at < bytes; at += kBlock)
    REFIT_BENCH_CUDA(cudaMemcpy(device + at, host.data(),
                                static_cast<std::size_t>(std::min(kBlock, bytes - at)),
                                cudaMemcpyHostToDevice));
}

// HBM bytes a quantize of `shape` reads and writes: 2 read and 1 written per element, and the scales.
std::int64_t traffic_bytes(QuantScheme scheme, const Shape& shape) {
  return 3 * element_count(shape) + scale_buffer_bytes(scheme, shape);
}

void run_case(gpu_bench::Summary& summary, cudaStream_t stream, QuantScheme scheme, const std::string& what,
              const std::uint16_t* src, const Shape& shape, const Shape& strides, std::byte* values,
              std::byte* scales, std::byte* scratch) {
  const double ms = gpu_bench::mean_ms(stream, [&] {
    REFIT_BENCH_CUDA(launch_quantize(scheme, src, shape.data(), strides.data(),
                                     static_cast<int>(shape.size()), reinterpret_cast<std::uint8_t*>(values),
                                     scales, stream));
  });
  const double traffic = static_cast<double>(traffic_bytes(scheme, shape));
  const auto half = static_cast<std::int64_t>(traffic / 2);
  summary.row(gpu_bench::Figure{.name = std::string(quant_scheme_name(scheme)) + " " + what,
                                .traffic_bytes = traffic,
                                .ms = ms,
                                .memcpy_ms = gpu_bench::memcpy_ms(scratch, scratch + half, half, stream),
                                .goal = kGoal,
                                .note = {}});
}

}  // namespace
}  // namespace refit::nccl_detail

int main(int argc, char** argv) {
  using namespace refit;
  using namespace refit::nccl_detail;
  if (!gpu_bench::have_gpu("quantize_gpu_bench")) return 0;
  gpu_bench::Summary summary(argc, argv, "quantize (bench/quantize_gpu_bench)");
  summary.figures();
  const std::int64_t n = kRows * kCols;
  DeviceMemory src, values, scales, scratch;
  // scratch: both halves of the reference copy, which moves each case's traffic (the whole
  // weight's, with the most scales, is the largest).
  std::int64_t reference = 0;
  for (const QuantScheme scheme : all_quant_schemes())
    reference = std::max(reference, traffic_bytes(scheme, Shape{kRows, kCols}));
  if (!src.allocate(static_cast<std::size_t>(2 * n), "bf16") ||
      !values.allocate(static_cast<std::size_t>(n), "values") ||
      !scales.allocate(static_cast<std::size_t>(n / 32), "scales") ||
      !scratch.allocate(static_cast<std::size_t>(reference), "memcpy reference"))
    return 1;
  fill_random_bf16(src.get(), 2 * n);
  cudaStream_t stream = nullptr;
  REFIT_BENCH_CUDA(cudaStreamCreate(&stream));
  const auto* bf16 = reinterpret_cast<const std::uint16_t*>(src.get());
  for (const QuantScheme scheme : all_quant_schemes()) {
    run_case(summary, stream, scheme, "[32768, 32768] contiguous", bf16, Shape{kRows, kCols}, Shape{kCols, 1},
             values.get(), scales.get(), scratch.get());
    // Columns 8192..24576 of the same tensor: rows 32 KiB long, 64 KiB apart (1 GiB of bf16).
    run_case(summary, stream, scheme, "[32768, 16384] column shard of [32768, 32768]", bf16 + 8192,
             Shape{kRows, kCols / 2}, Shape{kCols, 1}, values.get(), scales.get(), scratch.get());
  }
  cudaStreamDestroy(stream);
  return 0;
}
