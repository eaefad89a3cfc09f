#pragma once
// Launches a batch of box copies (copy_kernel_body.h) as one kernel on a stream.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "copy_kernel_body.h"

namespace refit::nccl_detail {

// `copies` lies in device memory, numbered by number_items(); `items` is their total.
cudaError_t launch_copy_batch(const DeviceCopy* copies, std::int32_t count, std::int64_t items,
                              cudaStream_t stream);

}  // namespace refit::nccl_detail
