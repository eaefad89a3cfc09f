#pragma once
// Helpers for the GPU tests: skip without a device, and every rank of a problem on the one GPU
// (device_ranks.h).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "device_ranks.h"

namespace refit::gpu_testing {

inline bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define REFIT_REQUIRE_GPU() \
  if (!::refit::gpu_testing::have_gpu()) GTEST_SKIP() << "no CUDA device"

}  // namespace refit::gpu_testing
