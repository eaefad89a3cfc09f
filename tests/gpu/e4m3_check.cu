#include "e4m3_check.h"
#include "quantize_kernel_body.h"

namespace refit::gpu_testing {
namespace {

struct Tally {
  unsigned long long checked;
  unsigned long long mismatches;
  unsigned long long first;  // bits << 16 | instruction << 8 | software, smallest bits wins
};

constexpr std::uint32_t kExponent = 0x7F800000u;

// Thread i takes the values 2i and 2i + 1 as the two halves of one pair; NaN and Inf are skipped
// (their blocks never take the instruction).
__global__ void compare_pairs(Tally* tally) {
  unsigned long long checked = 0;
  unsigned long long mismatches = 0;
  const std::uint64_t pairs = std::uint64_t{1} << 31;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < pairs;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const auto low_bits = static_cast<std::uint32_t>(2 * i);
    const std::uint32_t high_bits = low_bits + 1;  // same exponent: both finite or neither
    if ((low_bits & kExponent) == kExponent) continue;
    const float low = fp8::float_from_bits(low_bits);
    const float high = fp8::float_from_bits(high_bits);
    const std::uint32_t instruction = nccl_detail::e4m3_pair(low, high, true);
    const std::uint32_t software = nccl_detail::e4m3_pair(low, high, false);
    checked += 2;
    for (int half = 0; half < 2; ++half) {
      const std::uint32_t a = (instruction >> (8 * half)) & 0xFF;
      const std::uint32_t b = (software >> (8 * half)) & 0xFF;
      if (a == b) continue;
      ++mismatches;
      atomicMin(&tally->first, (std::uint64_t{low_bits + half} << 16) | a << 8 | b);
    }
  }
  atomicAdd(&tally->checked, checked);
  atomicAdd(&tally->mismatches, mismatches);
}

}  // namespace

cudaError_t check_e4m3_conversion(E4m3Check& out) {
  Tally* tally = nullptr;
  if (const auto e = cudaMalloc(&tally, sizeof(Tally)); e != cudaSuccess) return e;
  const Tally start{0, 0, ~0ull};
  cudaMemcpy(tally, &start, sizeof start, cudaMemcpyHostToDevice);
  compare_pairs<<<4096, 256>>>(tally);
  Tally got{};
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpy(&got, tally, sizeof got, cudaMemcpyDeviceToHost);
  cudaFree(tally);
  out = E4m3Check{.checked = got.checked,
                  .mismatches = got.mismatches,
                  .first_bits = static_cast<std::uint32_t>(got.first >> 16),
                  .first_instruction = static_cast<std::uint32_t>(got.first >> 8) & 0xFF,
                  .first_software = static_cast<std::uint32_t>(got.first) & 0xFF};
  return e;
}

}  // namespace refit::gpu_testing
