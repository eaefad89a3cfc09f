// Pack/unpack throughput of the NCCL executor's box-copy kernel against cudaMemcpy device to
// device on the same GPU. Prints one line per case: payload, the unit the kernel moved per
// access, the time per copy and GB/s of payload (1 GB = 1e9 bytes; a copy reads and writes each
// payload byte once, as cudaMemcpy does). Exits 0 without a GPU, printing why.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "box_walk.h"
#include "copy_kernel.h"
#include "cuda_handles.h"
#include "device_copy.h"

namespace refit::nccl_detail {
namespace {

constexpr int kWarmup = 3;
constexpr int kRuns = 20;

#define CHECK_CUDA(call)                                               \
  do {                                                                 \
    const cudaError_t e_ = (call);                                     \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

// Mean milliseconds of `run` over kRuns after kWarmup, timed with events on `stream`.
template <class F>
double time_ms(cudaStream_t stream, F run) {
  for (int i = 0; i < kWarmup; ++i) run();
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < kRuns; ++i) run();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / kRuns;
}

struct Bench {
  cudaStream_t stream = nullptr;
  std::byte* a = nullptr;  // source side, large enough for every case
  std::byte* b = nullptr;

  double memcpy_gbps(std::int64_t bytes) {
    const double ms = time_ms(stream, [&] {
      CHECK_CUDA(cudaMemcpyAsync(b, a, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
    });
    return static_cast<double>(bytes) / ms / 1e6;
  }

  // Copies `copies` (already placed in a and b) as one batch; prints the line.
  void run(const char* name, std::vector<PlannedCopy> planned, bool unpack) {
    std::vector<DeviceCopy> batch;
    std::int64_t payload = 0;
    for (const auto& p : planned) {
      const auto src = unpack ? b + p.dst_offset : a + p.src_offset;
      const auto dst = unpack ? a + p.src_offset : b + p.dst_offset;
      auto g = p.geometry;
      if (unpack) std::swap(g.src_stride, g.dst_stride);
      batch.push_back(make_device_copy(g, src, dst));
      payload += g.count * g.element_size;
    }
    const auto items = number_items(batch);
    DeviceMemory descriptors;
    if (!descriptors.allocate(batch.size() * sizeof(DeviceCopy), "descriptors")) std::exit(1);
    CHECK_CUDA(cudaMemcpy(descriptors.get(), batch.data(), batch.size() * sizeof(DeviceCopy),
                          cudaMemcpyHostToDevice));
    const auto* d = reinterpret_cast<const DeviceCopy*>(descriptors.get());
    const double ms = time_ms(stream, [&] {
      CHECK_CUDA(launch_copy_batch(d, static_cast<std::int32_t>(batch.size()), items, stream));
    });
    const double gbps = static_cast<double>(payload) / ms / 1e6;
    const double reference = memcpy_gbps(payload);
    std::printf("%-44s %9.1f MiB  unit %2d B  %8.3f ms  %7.1f GB/s  memcpy %7.1f GB/s  %5.1f%%\n", name,
                static_cast<double>(payload) / (1 << 20), batch.front().unit, ms, gbps, reference,
                100 * gbps / reference);
  }
};

PlannedCopy pack(const Box& array, const Box& x, std::int64_t es) {
  return plan_copy(Stored{.offset = 0, .box = array}, Stored{.offset = 0, .box = x}, x, 0, x.volume(), es);
}

}  // namespace
}  // namespace refit::nccl_detail

int main() {
  using namespace refit;
  using namespace refit::nccl_detail;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("box_copy_bench: no CUDA device, nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("box_copy_bench on %s: mean of %d copies after %d warm-ups\n", prop.name, kRuns, kWarmup);
  constexpr std::int64_t kBytes = std::int64_t{1} << 30;
  DeviceMemory a, b;
  if (!a.allocate(kBytes, "a") || !b.allocate(kBytes, "b")) return 1;
  CHECK_CUDA(cudaMemset(a.get(), 1, kBytes));
  Bench bench;
  CHECK_CUDA(cudaStreamCreate(&bench.stream));
  bench.a = a.get();
  bench.b = b.get();

  const Box flat{{0}, {std::int64_t{256} << 20}};
  bench.run("contiguous 512 MiB bf16", {pack(flat, flat, 2)}, false);
  const Box m{{0, 0}, {16384, 8192}};  // 256 MiB of bf16
  bench.run("pack [16384, 8192] bf16 -> half the columns", {pack(m, Box{{0, 4096}, {16384, 4096}}, 2)},
            false);
  bench.run("unpack half the columns", {pack(m, Box{{0, 4096}, {16384, 4096}}, 2)}, true);
  bench.run("pack TP8 column shard (2 KiB rows)", {pack(m, Box{{0, 1024}, {16384, 1024}}, 2)}, false);
  bench.run("unpack TP8 column shard", {pack(m, Box{{0, 1024}, {16384, 1024}}, 2)}, true);
  bench.run("pack misaligned columns (2-byte units)",
            {pack(Box{{0, 0}, {16384, 8191}}, Box{{0, 1}, {16384, 4095}}, 2)}, false);
  bench.run("pack [64, 2048, 1024] fp32 -> [64, 1024, 512]",
            {pack(Box{{0, 0, 0}, {64, 2048, 1024}}, Box{{0, 512, 256}, {64, 1024, 512}}, 4)}, false);
  bench.run("pack int8 1000-byte rows at odd offset",
            {pack(Box{{0, 0}, {16384, 16384}}, Box{{0, 3}, {16384, 1000}}, 1)}, false);
  bench.run("pack one fp32 column of [4M, 4] (worst case)",
            {pack(Box{{0, 0}, {1 << 22, 4}}, Box{{0, 2}, {1 << 22, 1}}, 4)}, false);
  std::vector<PlannedCopy> many;
  for (std::int64_t k = 0; k < 4096; ++k) {
    auto p = pack(Box{{0, 0}, {16, 128}}, Box{{0, 32}, {16, 64}}, 2);
    p.src_offset += k * 16 * 128 * 2;
    p.dst_offset += k * 16 * 64 * 2;
    many.push_back(p);
  }
  bench.run("4096 small boxes [16, 64] bf16, one launch", many, false);
  cudaStreamDestroy(bench.stream);
  return 0;
}
