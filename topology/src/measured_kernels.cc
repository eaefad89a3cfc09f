#include "refit/topology/measured_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace refit {
namespace {

// tests/gpu/run.sh on an H100 SXM, 2026-12-06 10:58 UTC (bench/RESULTS.md, "After: the rewritten
// kernels, on an H100"): box_copy_bench packs a TP8 column shard (1 GiB) in 0.957 ms;
// quantize_gpu_bench reads 2 GiB of bf16 in 1.090 ms (fp8-block128) and 1.362 ms (mxfp8);
// nccl_plan_bench fits t = 5.368 ms + chunks x 4.47 us + steps x 5.02 us.
QuantizeRates h100_quantize() {
  QuantizeRates rates{};
  of_scheme(rates, QuantScheme::kFp8Block128) = BytesPerSecond::from_gbps(1970);
  of_scheme(rates, QuantScheme::kMxfp8) = BytesPerSecond::from_gbps(1577);
  return rates;
}

}  // namespace

std::span<const MeasuredKernels> measured_kernels() {
  static const std::array<MeasuredKernels, 1> runs{{
      {.gpu = kH100Sxm5,
       .date = "2026-12-06",
       .copy = BytesPerSecond::from_gbps(1122),
       .quantize = h100_quantize(),
       .hbm_line = BytesPerSecond::from_gbps(3350),
       .nccl = {.per_op = Seconds{4.47e-6 / 2}, .per_step = Seconds{5.02e-6}}},
  }};
  return runs;
}

const MeasuredKernels* measured_kernels_on(std::string_view gpu) {
  const auto runs = measured_kernels();
  const auto it = std::ranges::find(runs, gpu, &MeasuredKernels::gpu);
  return it == runs.end() ? nullptr : &*it;
}

const MeasuredKernels& reference_kernels() { return *measured_kernels_on(kH100Sxm5); }

NcclCosts charged_nccl_costs(const GpuSpec& gpu) { return gpu.nccl_costs.value_or(reference_kernels().nccl); }

BytesPerSecond copy_scaled_to(const MeasuredKernels& m, BytesPerSecond hbm_line) {
  return BytesPerSecond::from_gbps(std::round(m.copy.gbps() * hbm_line.value / m.hbm_line.value));
}

BytesPerSecond quantize_from_copy(BytesPerSecond copy, QuantScheme scheme) {
  const MeasuredKernels& base = reference_kernels();
  return BytesPerSecond{copy.value * of_scheme(base.quantize, scheme).value / base.copy.value};
}

}  // namespace refit
