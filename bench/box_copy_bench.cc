// Pack/unpack throughput of the NCCL executor's box-copy kernel, each case a ratio to
// cudaMemcpy device to device of the same payload in the same run (a copy reads and writes each
// payload byte once, as cudaMemcpy does), at 1 GiB or more so that HBM is measured, not the L2.
// The goals (bench/RESULTS.md, "GPU kernels and the NCCL executor on one GPU"): 85 % for
// 16-byte-aligned boxes (whole rows, column shards, 3-d boxes), 50 % for boxes moved in 2- and
// 4-byte units, 60 % for thousands of boxes in one launch.
// Where the access pattern caps what any kernel can reach (a column read out of wider rows reads
// whole 32-byte sectors), the row says so. Exits 0 without a GPU, printing why.
//
// Usage: box_copy_bench [--summary FILE]   (rows are appended to FILE too)
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "copy_kernel.h"
#include "cuda_handles.h"
#include "device_copy.h"
#include "gpu_bench.h"
#include "refit/lowering/arrays.h"

namespace refit::nccl_detail {
namespace {

using gpu_bench::Figure;

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

struct Bench {
  cudaStream_t stream = nullptr;
  std::byte* a = nullptr;  // the arrays' side
  std::byte* b = nullptr;  // the packed side
  gpu_bench::Summary* summary = nullptr;

  // Copies `planned` (placed in a and b) as one batch, a -> b (pack) or b -> a (unpack).
  void run(std::string name, const std::vector<PlannedCopy>& planned, bool unpack, std::optional<double> goal,
           std::string note = {}) {
    std::vector<DeviceCopy> batch;
    std::int64_t payload = 0;
    for (const auto& p : planned) {
      auto g = p.geometry;
      if (unpack) std::swap(g.src_stride, g.dst_stride);
      batch.push_back(unpack ? make_device_copy(g, b + p.dst_offset, a + p.src_offset)
                             : make_device_copy(g, a + p.src_offset, b + p.dst_offset));
      payload += g.count * g.element_size;
    }
    const auto items = number_items(batch);
    DeviceMemory descriptors;
    if (!descriptors.allocate(batch.size() * sizeof(DeviceCopy), "descriptors")) std::exit(1);
    REFIT_BENCH_CUDA(cudaMemcpy(descriptors.get(), batch.data(), batch.size() * sizeof(DeviceCopy),
                                cudaMemcpyHostToDevice));
    const auto* d = reinterpret_cast<const DeviceCopy*>(descriptors.get());
    const double ms = gpu_bench::mean_ms(stream, [&] {
      REFIT_BENCH_CUDA(launch_copy_batch(d, static_cast<std::int32_t>(batch.size()), items, stream));
    });
    const auto& first = batch.front();
    name += first.mode == CopyMode::kBytes ? " [16-byte words]"
                                           : " [" + std::to_string(first.unit) + "-byte units]";
    summary->row(Figure{.name = name,
                        .traffic_bytes = 2.0 * static_cast<double>(payload),
                        .ms = ms,
                        .memcpy_ms = gpu_bench::memcpy_ms(b, a, payload, stream),
                        .goal = goal,
                        .note = note});
  }
};

PlannedCopy pack(const Box& array, const Box& x, std::int64_t es) {
  return plan_copy(lowering::Array{0, &array}, lowering::Array{0, &x}, x, 0, x.volume(), es);
}

// `count` boxes `x` of arrays `array`, back to back on both sides.
std::vector<PlannedCopy> many(std::int64_t count, const Box& array, const Box& x, std::int64_t es) {
  std::vector<PlannedCopy> out;
  for (std::int64_t k = 0; k < count; ++k) {
    auto p = pack(array, x, es);
    p.src_offset += k * array.volume() * es;
    p.dst_offset += k * x.volume() * es;
    out.push_back(p);
  }
  return out;
}

void run_cases(Bench& bench) {
  constexpr double kAligned = 0.85;
  constexpr double kNarrow = 0.50;
  constexpr double kMany = 0.60;
  const Box flat{{0}, {kGiB}};  // 2 GiB of bf16
  bench.run("contiguous 2 GiB bf16", {pack(flat, flat, 2)}, false, kAligned);
  const Box square{{0, 0}, {32768, 32768}};  // 2 GiB of bf16
  const Box half{{0, 16384}, {32768, 16384}};
  bench.run("pack half the columns of [32768, 32768] bf16", {pack(square, half, 2)}, false, kAligned);
  bench.run("unpack half the columns", {pack(square, half, 2)}, true, kAligned);
  const Box wide{{0, 0}, {524288, 8192}};  // 8 GiB of bf16
  const Box tp8{{0, 2048}, {524288, 1024}};
  bench.run("pack TP8 column shard of [524288, 8192] bf16 (2 KiB rows)", {pack(wide, tp8, 2)}, false,
            kAligned);
  bench.run("unpack TP8 column shard", {pack(wide, tp8, 2)}, true, kAligned);
  bench.run("pack [512, 2048, 1024] fp32 -> [512, 1024, 512]",
            {pack(Box{{0, 0, 0}, {512, 2048, 1024}}, Box{{0, 512, 256}, {512, 1024, 512}}, 4)}, false,
            kAligned);
  bench.run("pack misaligned bf16 columns [131072, 8191] -> cols 1..4096",
            {pack(Box{{0, 0}, {131072, 8191}}, Box{{0, 1}, {131072, 4095}}, 2)}, false, kNarrow);
  bench.run("pack int8 1000-byte rows at offset 3 of [1048576, 4096]",
            {pack(Box{{0, 0}, {1048576, 4096}}, Box{{0, 3}, {1048576, 1000}}, 1)}, false, kNarrow);
  bench.run("pack 5-element bf16 rows at odd offsets of [134217728, 11]",
            {pack(Box{{0, 0}, {134217728, 11}}, Box{{0, 1}, {134217728, 5}}, 2)}, false, kNarrow,
            "(reads every sector of the 22-byte rows for 10 bytes each: at most 62 %)");
  bench.run("pack one fp32 column of [268435456, 4]",
            {pack(Box{{0, 0}, {268435456, 4}}, Box{{0, 2}, {268435456, 1}}, 4)}, false, kNarrow,
            "(reads whole 32-byte sectors for 4 bytes in 16: at most 40 %)");
  bench.run("pack 4096 boxes [128, 1024] bf16 of [128, 2048], one launch",
            many(4096, Box{{0, 0}, {128, 2048}}, Box{{0, 512}, {128, 1024}}, 2), false, kMany);
  bench.run("pack 65536 boxes [32, 256] bf16 of [32, 512], one launch",
            many(65536, Box{{0, 0}, {32, 512}}, Box{{0, 128}, {32, 256}}, 2), false, kMany);
}

}  // namespace
}  // namespace refit::nccl_detail

int main(int argc, char** argv) {
  using namespace refit;
  using namespace refit::nccl_detail;
  if (!gpu_bench::have_gpu("box_copy_bench")) return 0;
  gpu_bench::Summary summary(argc, argv, "box copy (bench/box_copy_bench)");
  summary.figures();
  DeviceMemory a, b;
  if (!a.allocate(8 * kGiB, "a") || !b.allocate(2 * kGiB + (1 << 20), "b")) return 1;
  REFIT_BENCH_CUDA(cudaMemset(a.get(), 1, 8 * kGiB));
  REFIT_BENCH_CUDA(cudaMemset(b.get(), 2, 2 * kGiB));
  Bench bench{.a = a.get(), .b = b.get(), .summary = &summary};
  REFIT_BENCH_CUDA(cudaStreamCreate(&bench.stream));
  run_cases(bench);
  cudaStreamDestroy(bench.stream);
  return 0;
}
