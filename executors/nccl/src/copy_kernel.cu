#include "copy_kernel.h"
#include "grid_limits.h"

namespace refit::nccl_detail {
namespace {

__global__ void __launch_bounds__(kCopyThreads)
    copy_batch_kernel(const DeviceCopy* copies, int count, std::int64_t items) {
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const DeviceCopy& c = copies[find_copy(copies, count, item)];
    copy_item(c, item - c.item_begin, static_cast<int>(threadIdx.x));
  }
}

}  // namespace

cudaError_t launch_copy_batch(const DeviceCopy* copies, std::int32_t count, std::int64_t items,
                              cudaStream_t stream) {
  if (items == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(items < kMaxGridBlocks ? items : kMaxGridBlocks);
  copy_batch_kernel<<<blocks, kCopyThreads, 0, stream>>>(copies, count, items);
  return cudaGetLastError();
}

}  // namespace refit::nccl_detail
