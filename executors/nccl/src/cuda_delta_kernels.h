#pragma once
// The GPU delta codec's passes on a CUDA stream (delta_kernel.h), for DeviceDeltaCodec: the
// workspace in device memory, grown to the largest chunk seen; the totals copied back to the host
// with a wait on the stream, since the codec decides from them what to launch next.
#include <memory>

#include <cuda_runtime_api.h>

#include "cuda_handles.h"
#include "delta_kernels.h"

namespace refit::nccl_detail {

class CudaDeltaKernels final : public DeltaKernels {
 public:
  // Runs everything on `stream` (of the current device), which outlives this object.
  explicit CudaDeltaKernels(cudaStream_t stream) : stream_(stream) {}
  // Runs everything on a stream of its own on `device`, which it makes current for each call (and
  // then restores the caller's): the NCCL executor's GPU, whichever device the caller has current.
  [[nodiscard]] static Result<std::unique_ptr<CudaDeltaKernels>> on_device(int device);
  ~CudaDeltaKernels() override;

  [[nodiscard]] Result<void> prepare(DeltaLanes& d) override;
  [[nodiscard]] Result<DeltaTotals> scan(const DeltaLanes& d) override;
  [[nodiscard]] Result<void> write(const DeltaLanes& d) override;
  [[nodiscard]] Result<DeltaTotals> positions(const DeltaLanes& d) override;
  [[nodiscard]] Result<void> write_runs(const DeltaLanes& d) override;
  [[nodiscard]] Result<DeltaTotals> runs_to_mask(const DeltaLanes& d) override;
  [[nodiscard]] Result<DeltaTotals> checksum(const DeltaLanes& d) override;
  [[nodiscard]] Result<DeltaTotals> count(const DeltaLanes& d) override;
  [[nodiscard]] Result<DeltaTotals> check(const DeltaLanes& d) override;
  [[nodiscard]] Result<void> apply(const DeltaLanes& d) override;
  [[nodiscard]] Result<void> copy(std::byte* to, const std::byte* from, std::int64_t bytes) override;
  [[nodiscard]] Result<void> upload(std::byte* to, std::span<const std::byte> from) override;
  [[nodiscard]] Result<void> download(std::span<std::byte> to, const std::byte* from) override;
  [[nodiscard]] Result<void> copy_box(const DeviceCopy& box) override;
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  [[nodiscard]] Result<std::unique_ptr<DeltaBuffer>> allocate(std::int64_t bytes) override;

 private:
  // The tile prefix of `counts` (into offsets, when given) and `sums` after a pass, then the
  // totals on the host.
  [[nodiscard]] Result<DeltaTotals> totals(const DeltaLanes& d, std::uint64_t* counts,
                                           const std::uint64_t* sums, std::string_view pass);
  [[nodiscard]] Result<DeltaTotals> read_totals(const DeltaLanes& d, std::string_view pass);

  // `f()` with device_ current, when the kernels have a device of their own.
  template <class F>
  auto on_own_device(F&& f) -> decltype(f()) {
    if (device_ < 0) return f();
    const DeviceGuard guard(device_);
    if (!guard.status()) return std::unexpected(guard.status().error());
    return f();
  }

  int device_ = -1;  // -1: the caller's current device
  std::unique_ptr<Stream> own_stream_;
  cudaStream_t stream_;
  DeviceMemory workspace_;
  std::int64_t workspace_words_ = 0;
  DeviceMemory box_;  // copy_box()'s DeviceCopy, on the device for the kernel
};

}  // namespace refit::nccl_detail
