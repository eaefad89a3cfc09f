#pragma once
// The quantize kernels round finite blocks with the GPU's fp8 conversion instruction and
// everything else with fp32_to_e4m3 (quantize_kernel_body.h, e4m3_pair); on the host only the
// latter runs. This compares the two on the GPU for every finite fp32 value.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace refit::gpu_testing {

struct E4m3Check {
  std::uint64_t checked = 0;            // finite fp32 values compared
  std::uint64_t mismatches = 0;         // where the instruction and fp32_to_e4m3 differ
  std::uint32_t first_bits = 0;         // the first mismatching value's bits (when mismatches > 0)
  std::uint32_t first_instruction = 0;  // its byte from each path
  std::uint32_t first_software = 0;
};

// Runs on the current device and waits for it.
[[nodiscard]] cudaError_t check_e4m3_conversion(E4m3Check& out);

}  // namespace refit::gpu_testing
