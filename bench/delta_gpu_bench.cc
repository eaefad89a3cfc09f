// The GPU delta codec (executors/nccl/src/delta_kernel.cu) on one GPU: encode and decode of a
// 128 MiB bf16 chunk (64 Mi elements; baseline and current together 4 times an H200's L2) after
// one synthetic RL step (refit/delta/synthetic_update.h) changing 0.1, 1, 3, 10, 30 and 100 % of
// the elements, as the codec runs it (its passes, and the waits for the totals it decides from).
// Each row's traffic is what an ideal one-pass codec moves through HBM, against which cudaMemcpy of
// the same traffic in the same run gives the ratio: encoding reads both chunks and writes the
// payload (2 n + p); decoding reads the payload and reads and writes the changed elements'
// bytes (p + 2 k w), or for a dense payload reads it and writes the chunk (p + n). The note gives
// the rate in GB/s of chunk (dense bytes per second, the CPU codec's unit in bench/RESULTS.md)
// and the payload's size. Exits 0 without a GPU, printing why.
//
// Usage: delta_gpu_bench [--summary FILE]   (rows are appended to FILE too)
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_delta_kernels.h"
#include "cuda_handles.h"
#include "device_delta_codec.h"
#include "gpu_bench.h"
#include "refit/delta/synthetic_update.h"

namespace refit::nccl_detail {
namespace {

constexpr std::int64_t kChunkBytes = std::int64_t{128} << 20;
constexpr DType kDtype = DType::kBF16;
constexpr double kFractions[] = {0.001, 0.01, 0.03, 0.1, 0.3, 1.0};

// The device buffers of one case: the chunk before and after the step, the payloads both ways
// (before -> after and back, so that decodes can alternate without restoring the target), and the
// receiver's copy.
struct Buffers {
  DeviceMemory before, after, forward, backward, target, scratch;
};

DeviceDeltaSource source(const std::byte* baseline, const std::byte* current, Checksum base) {
  return {.baseline = baseline,
          .current = current,
          .bytes = kChunkBytes,
          .dtype = kDtype,
          .base = base,
          .name = "bench chunk"};
}

DeltaHeader encode_or_exit(DeviceDeltaCodec& codec, const DeviceDeltaSource& s, std::byte* out) {
  const auto header = codec.encode(s, out, kDeltaHeaderBytes + kChunkBytes);
  if (!header) {
    std::fprintf(stderr, "delta_gpu_bench: %s\n", header.error().message.c_str());
    std::exit(1);
  }
  return *header;
}

Checksum decode_or_exit(DeviceDeltaCodec& codec, const std::byte* payload, const DeltaHeader& h,
                        std::byte* target, Checksum base) {
  const auto result = codec.decode(payload, h.payload_bytes(),
                                   {.bytes = target, .size = kChunkBytes, .dtype = kDtype, .base = base});
  if (!result) {
    std::fprintf(stderr, "delta_gpu_bench: %s\n", result.error().message.c_str());
    std::exit(1);
  }
  return *result;
}

void run_fraction(gpu_bench::Summary& summary, cudaStream_t stream, Buffers& b, double fraction,
                  const std::vector<std::byte>& weights) {
  std::vector<std::byte> stepped = weights;
  (void)apply_synthetic_step(stepped, kDtype, 0, {.change_fraction = fraction, .seed = 2}, 1);
  REFIT_BENCH_CUDA(cudaMemcpy(b.before.get(), weights.data(), weights.size(), cudaMemcpyHostToDevice));
  REFIT_BENCH_CUDA(cudaMemcpy(b.after.get(), stepped.data(), stepped.size(), cudaMemcpyHostToDevice));
  REFIT_BENCH_CUDA(cudaMemcpy(b.target.get(), weights.data(), weights.size(), cudaMemcpyHostToDevice));
  const Checksum base = checksum_of(weights);
  const Checksum result = checksum_of(stepped);
  CudaDeltaKernels kernels(stream);
  DeviceDeltaCodec codec(kernels);
  DeltaHeader forward;
  const double encode_ms = gpu_bench::mean_ms(stream, [&] {
    forward = encode_or_exit(codec, source(b.before.get(), b.after.get(), base), b.forward.get());
  });
  const DeltaHeader backward =
      encode_or_exit(codec, source(b.after.get(), b.before.get(), result), b.backward.get());
  // Each run decodes forward then back: the target ends where it started.
  const double decode_ms =
      gpu_bench::mean_ms(stream,
                         [&] {
                           decode_or_exit(codec, b.forward.get(), forward, b.target.get(), base);
                           decode_or_exit(codec, b.backward.get(), backward, b.target.get(), result);
                         }) /
      2;
  const auto n = static_cast<double>(kChunkBytes);
  const auto p = static_cast<double>(forward.payload_bytes());
  const bool dense = forward.format.encoding == DeltaEncoding::kDense;
  const double changed = static_cast<double>(forward.changed_elements * dtype_size(kDtype));
  const std::string what =
      fmt::format("{:g} % changed ({})", 100 * fraction, delta_format_name(forward.format));
  const auto note = [&](double ms) {
    return fmt::format("{:.0f} GB/s of chunk; payload {:.2f} % of dense", n / ms / 1e6, 100 * p / n);
  };
  for (const auto& [name, traffic, ms] : {std::tuple{"encode", 2 * n + p, encode_ms},
                                          std::tuple{"decode", dense ? p + n : p + 2 * changed, decode_ms}}) {
    const auto half = static_cast<std::int64_t>(traffic / 2);
    summary.row({.name = fmt::format("{} {}", name, what),
                 .traffic_bytes = traffic,
                 .ms = ms,
                 .memcpy_ms = gpu_bench::memcpy_ms(b.scratch.get(), b.scratch.get() + half, half, stream),
                 .goal = {},
                 .note = note(ms)});
  }
}

}  // namespace
}  // namespace refit::nccl_detail

int main(int argc, char** argv) {
  using namespace refit;
  using namespace refit::nccl_detail;
  if (!gpu_bench::have_gpu("delta_gpu_bench")) return 0;
  gpu_bench::Summary summary(argc, argv, "delta codec, 128 MiB of bf16 (bench/delta_gpu_bench)");
  summary.figures();
  Buffers b;
  const auto n = static_cast<std::size_t>(kChunkBytes);
  const auto payload = n + kDeltaHeaderBytes;
  // scratch: both halves of the reference copy (up to 3 n + a header of traffic).
  if (!b.before.allocate(n, "before") || !b.after.allocate(n, "after") ||
      !b.forward.allocate(payload, "forward") || !b.backward.allocate(payload, "backward") ||
      !b.target.allocate(n, "target") || !b.scratch.allocate(3 * n + payload, "memcpy reference"))
    return 1;
  std::vector<std::byte> weights(n);
  (void)fill_synthetic_weights(weights, DType::kBF16, 0, 1);
  cudaStream_t stream = nullptr;
  REFIT_BENCH_CUDA(cudaStreamCreate(&stream));
  for (const double fraction : kFractions) run_fraction(summary, stream, b, fraction, weights);
  cudaStreamDestroy(stream);
  return 0;
}
