#include "refit/executors/nccl/kernel_timing.h"

#include <algorithm>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "copy_kernel.h"
#include "cuda_handles.h"
#include "cuda_status.h"
#include "device_copy.h"
#include "nccl_cost_timing.h"
#include "quantize_kernel.h"
#include "refit/core/try.h"
#include "refit/lowering/arrays.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

using nccl_detail::cuda_ok;
using nccl_detail::DeviceMemory;

// The matrices are [rows, 8192] bf16: a TP8 column shard of one is 1024 columns, 2 KiB a row, the
// common box of a refit of a tensor-parallel weight; 128 rows make whole fp8-block128 blocks.
constexpr std::int64_t kColumns = 8192;
constexpr std::int64_t kShardColumns = kColumns / 8;
constexpr std::int64_t kBf16 = 2;
constexpr std::int64_t kBlockRows = 128;

// The median of `repetitions` runs of `run` (which enqueues on `stream`), after one untimed.
template <class Run>
[[nodiscard]] Result<Seconds> median_seconds(cudaStream_t stream, int repetitions, std::string_view what,
                                             Run run) {
  nccl_detail::Event start, stop;
  REFIT_TRY(start.create(cudaEventDefault));
  REFIT_TRY(stop.create(cudaEventDefault));
  REFIT_TRY(cuda_ok(run(), what));
  std::vector<double> seconds;
  for (int i = 0; i < repetitions; ++i) {
    REFIT_TRY(cuda_ok(cudaEventRecord(start.get(), stream), "cudaEventRecord"));
    REFIT_TRY(cuda_ok(run(), what));
    REFIT_TRY(cuda_ok(cudaEventRecord(stop.get(), stream), "cudaEventRecord"));
    REFIT_TRY(cuda_ok(cudaEventSynchronize(stop.get()), what));
    float ms = 0;
    REFIT_TRY(cuda_ok(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime"));
    seconds.push_back(ms / 1e3);
  }
  std::ranges::sort(seconds);
  return Seconds{seconds[seconds.size() / 2]};
}

// Packs a TP8 column shard of `rows` rows: the bytes copied per second.
[[nodiscard]] Result<BytesPerSecond> time_copy(cudaStream_t stream, std::int64_t rows, int repetitions) {
  const Box matrix{{0, 0}, {rows, kColumns}};
  const Box shard{{0, 2 * kShardColumns}, {rows, kShardColumns}};
  const auto planned = nccl_detail::plan_copy(lowering::Array{0, &matrix}, lowering::Array{0, &shard}, shard,
                                              0, shard.volume(), kBf16);
  DeviceMemory from, to, descriptor;
  REFIT_TRY(
      from.allocate(static_cast<std::size_t>(matrix.volume() * kBf16), "cudaMalloc (the copy's matrix)"));
  REFIT_TRY(to.allocate(static_cast<std::size_t>(shard.volume() * kBf16), "cudaMalloc (the copy's shard)"));
  REFIT_TRY(descriptor.allocate(sizeof(nccl_detail::DeviceCopy), "cudaMalloc (the copy's descriptor)"));
  REFIT_TRY(cuda_ok(cudaMemsetAsync(from.get(), 1, static_cast<std::size_t>(matrix.volume() * kBf16), stream),
                    "cudaMemsetAsync"));
  nccl_detail::DeviceCopy copy = nccl_detail::make_device_copy(
      planned.geometry, from.get() + planned.src_offset, to.get() + planned.dst_offset);
  const std::int64_t items = nccl_detail::number_items(std::span(&copy, 1));
  REFIT_TRY(cuda_ok(cudaMemcpyAsync(descriptor.get(), &copy, sizeof copy, cudaMemcpyHostToDevice, stream),
                    "cudaMemcpyAsync (the copy's descriptor)"));
  const auto* on_device = reinterpret_cast<const nccl_detail::DeviceCopy*>(descriptor.get());
  const Seconds t = REFIT_TRY(median_seconds(stream, repetitions, "the box copy kernel", [&] {
    return nccl_detail::launch_copy_batch(on_device, 1, items, stream);
  }));
  return BytesPerSecond{static_cast<double>(shard.volume() * kBf16) / t.value};
}

// Quantizes a [rows, 8192] bf16 matrix into `scheme`: the bf16 bytes read per second.
[[nodiscard]] Result<BytesPerSecond> time_quantize(cudaStream_t stream, QuantScheme scheme, std::int64_t rows,
                                                   int repetitions) {
  const Shape shape{rows, kColumns};
  const Shape strides{kColumns, 1};
  const std::int64_t elements = rows * kColumns;
  DeviceMemory source, values, scales;
  REFIT_TRY(source.allocate(static_cast<std::size_t>(elements * kBf16), "cudaMalloc (the quantize's bf16)"));
  REFIT_TRY(values.allocate(static_cast<std::size_t>(elements), "cudaMalloc (the quantize's values)"));
  REFIT_TRY(scales.allocate(static_cast<std::size_t>(scale_buffer_bytes(scheme, shape)),
                            "cudaMalloc (the quantize's scales)"));
  // 0x3c3c: a finite bf16 (0.0115) in every element.
  REFIT_TRY(cuda_ok(cudaMemsetAsync(source.get(), 0x3c, static_cast<std::size_t>(elements * kBf16), stream),
                    "cudaMemsetAsync"));
  const auto* bf16 = reinterpret_cast<const std::uint16_t*>(source.get());
  const auto what = fmt::format("the {} quantize kernel", quant_scheme_name(scheme));
  const Seconds t = REFIT_TRY(median_seconds(stream, repetitions, what, [&] {
    return nccl_detail::launch_quantize(scheme, bf16, shape.data(), strides.data(), 2,
                                        reinterpret_cast<std::uint8_t*>(values.get()), scales.get(), stream);
  }));
  return BytesPerSecond{static_cast<double>(elements * kBf16) / t.value};
}

// Rows of a [rows, 8192] bf16 matrix holding about `bytes` (the copy's shard, or the quantize's
// whole matrix), in whole blocks of 128 rows.
std::int64_t rows_for(Bytes bytes, std::int64_t columns) {
  return std::max<std::int64_t>(1, bytes.value / (columns * kBf16 * kBlockRows)) * kBlockRows;
}

[[nodiscard]] Result<void> check_timing(const KernelTiming& t) {
  constexpr Bytes kLeast{std::int64_t{1} << 20};
  constexpr Bytes kMost{std::int64_t{1} << 36};
  for (const auto& [name, bytes] :
       {std::pair{"copy_bytes", t.copy_bytes}, std::pair{"quantize_bytes", t.quantize_bytes},
        std::pair{"nccl_bytes", t.nccl_bytes}})
    if (bytes.value < kLeast.value || bytes.value > kMost.value)
      return out_of_range(
          fmt::format("kernel timing: {} must be within [1 MiB, 64 GiB], got {} bytes", name, bytes.value));
  if (t.repetitions < 1 || t.repetitions > 1000)
    return out_of_range(
        fmt::format("kernel timing: repetitions must be within [1, 1000], got {}", t.repetitions));
  return {};
}

[[nodiscard]] Result<KernelSpeeds> time_on(int device, const KernelTiming& timing) {
  cudaDeviceProp properties{};
  REFIT_TRY(cuda_ok(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties"));
  nccl_detail::Stream stream;
  REFIT_TRY(stream.create());
  KernelSpeeds out{.gpu = properties.name, .copy = {}, .quantize = {}, .nccl = {}};
  out.copy =
      REFIT_TRY(time_copy(stream.get(), rows_for(timing.copy_bytes, kShardColumns), timing.repetitions));
  for (const QuantScheme scheme : all_quant_schemes())
    of_scheme(out.quantize, scheme) = REFIT_TRY(
        time_quantize(stream.get(), scheme, rows_for(timing.quantize_bytes, kColumns), timing.repetitions));
  out.nccl = REFIT_TRY(nccl_detail::time_nccl_costs(device, timing.nccl_bytes, timing.repetitions));
  return out;
}

}  // namespace

Result<KernelSpeeds> time_nccl_kernels(std::string_view pci_bus_id, const KernelTiming& timing) {
  REFIT_TRY(check_timing(timing));
  int device = -1;
  const std::string bus(pci_bus_id);
  REFIT_TRY_IN(cuda_ok(cudaDeviceGetByPCIBusId(&device, bus.c_str()), "cudaDeviceGetByPCIBusId"),
               fmt::format("GPU {}", bus));
  const nccl_detail::DeviceGuard guard(device);
  REFIT_TRY_IN(guard.status(), fmt::format("GPU {}", bus));
  return REFIT_TRY_IN(time_on(device, timing), fmt::format("GPU {} (CUDA device {})", bus, device));
}

}  // namespace refit
