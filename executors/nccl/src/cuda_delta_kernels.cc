#include "cuda_delta_kernels.h"

#include <fmt/format.h>

#include "copy_kernel.h"
#include "delta_kernel.h"
#include "refit/core/try.h"

namespace refit::nccl_detail {

Result<std::unique_ptr<CudaDeltaKernels>> CudaDeltaKernels::on_device(int device) {
  const DeviceGuard guard(device);
  REFIT_TRY(guard.status());
  auto kernels = std::unique_ptr<CudaDeltaKernels>(new CudaDeltaKernels(nullptr));
  kernels->own_stream_ = std::make_unique<Stream>();
  REFIT_TRY(kernels->own_stream_->create());
  kernels->stream_ = kernels->own_stream_->get();
  kernels->device_ = device;
  return kernels;
}

// The stream and memory go with their device current.
CudaDeltaKernels::~CudaDeltaKernels() {
  if (device_ < 0) return;
  const DeviceGuard guard(device_);
  workspace_ = DeviceMemory();
  box_ = DeviceMemory();
  own_stream_.reset();
}

Result<void> CudaDeltaKernels::prepare(DeltaLanes& d) {
  return on_own_device([&]() -> Result<void> {
    const std::int64_t words = delta_workspace_words(d);
    if (words > workspace_words_) {
      DeviceMemory grown;
      REFIT_TRY(grown.allocate(static_cast<std::size_t>(words) * 8, "cudaMalloc (delta codec workspace)"));
      workspace_ = std::move(grown);
      workspace_words_ = words;
    }
    point_delta_workspace(d, reinterpret_cast<std::uint64_t*>(workspace_.get()));
    return {};
  });
}

Result<DeltaTotals> CudaDeltaKernels::read_totals(const DeltaLanes& d, std::string_view pass) {
  std::uint64_t host[3] = {};
  REFIT_TRY(cuda_ok(cudaMemcpyAsync(host, d.totals, sizeof host, cudaMemcpyDeviceToHost, stream_),
                    fmt::format("{} (totals to the host)", pass)));
  REFIT_TRY(cuda_ok(cudaStreamSynchronize(stream_), pass));
  return DeltaTotals{host[0], host[1], host[2]};
}

Result<DeltaTotals> CudaDeltaKernels::totals(const DeltaLanes& d, std::uint64_t* counts,
                                             const std::uint64_t* sums, std::string_view pass) {
  REFIT_TRY(
      cuda_ok(launch_delta_tile_prefix(d, counts, sums, stream_), fmt::format("{} (tile prefix)", pass)));
  return read_totals(d, pass);
}

Result<DeltaTotals> CudaDeltaKernels::scan(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<DeltaTotals> {
    REFIT_TRY(cuda_ok(launch_delta_scan(d, stream_), "delta scan kernel"));
    return totals(d, d.tile_count, d.tile_sum, "delta scan kernel");
  });
}

Result<void> CudaDeltaKernels::write(const DeltaLanes& d) {
  return on_own_device(
      [&]() -> Result<void> { return cuda_ok(launch_delta_write(d, stream_), "delta write kernel"); });
}

Result<DeltaTotals> CudaDeltaKernels::positions(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<DeltaTotals> {
    REFIT_TRY(cuda_ok(launch_delta_positions(d, stream_), "delta positions kernels"));
    return totals(d, d.tile_positions, nullptr, "delta positions kernels");
  });
}

Result<void> CudaDeltaKernels::write_runs(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<void> {
    return cuda_ok(launch_delta_write_runs(d, stream_), "delta write runs kernel");
  });
}

Result<DeltaTotals> CudaDeltaKernels::runs_to_mask(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<DeltaTotals> {
    REFIT_TRY(cuda_ok(launch_delta_runs_to_mask(d, stream_), "delta runs to mask kernel"));
    return read_totals(d, "delta runs to mask kernel");
  });
}

Result<DeltaTotals> CudaDeltaKernels::checksum(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<DeltaTotals> {
    REFIT_TRY(cuda_ok(launch_delta_checksum(d, stream_), "delta checksum kernel"));
    return totals(d, d.tile_count, d.tile_sum, "delta checksum kernel");
  });
}

Result<DeltaTotals> CudaDeltaKernels::count(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<DeltaTotals> {
    REFIT_TRY(cuda_ok(launch_delta_count(d, stream_), "delta count kernel"));
    return totals(d, d.tile_count, d.tile_sum, "delta count kernel");
  });
}

Result<DeltaTotals> CudaDeltaKernels::check(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<DeltaTotals> {
    REFIT_TRY(cuda_ok(launch_delta_check(d, stream_), "delta check kernel"));
    return totals(d, nullptr, d.tile_sum, "delta check kernel");
  });
}

// Waits: the target is the receiver's shard, which the caller's streams (non-blocking, like this
// one) read once the decode returns.
Result<void> CudaDeltaKernels::apply(const DeltaLanes& d) {
  return on_own_device([&]() -> Result<void> {
    REFIT_TRY(cuda_ok(launch_delta_apply(d, stream_), "delta apply kernel"));
    return cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (delta apply kernel)");
  });
}

// Waits: the bytes may be a payload, which the NCCL executor's streams read next, or a dense
// body decoded into the receiver's shard.
Result<void> CudaDeltaKernels::copy(std::byte* to, const std::byte* from, std::int64_t bytes) {
  return on_own_device([&]() -> Result<void> {
    if (bytes == 0) return {};
    REFIT_TRY(
        cuda_ok(cudaMemcpyAsync(to, from, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, stream_),
                "cudaMemcpyAsync (delta payload)"));
    return cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (delta payload)");
  });
}

// Waits: `from` is the caller's host memory, which may go as soon as this returns.
Result<void> CudaDeltaKernels::upload(std::byte* to, std::span<const std::byte> from) {
  return on_own_device([&]() -> Result<void> {
    REFIT_TRY(cuda_ok(cudaMemcpyAsync(to, from.data(), from.size(), cudaMemcpyHostToDevice, stream_),
                      "cudaMemcpyAsync (delta header to the device)"));
    return cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (delta header)");
  });
}

Result<void> CudaDeltaKernels::download(std::span<std::byte> to, const std::byte* from) {
  return on_own_device([&]() -> Result<void> {
    REFIT_TRY(cuda_ok(cudaMemcpyAsync(to.data(), from, to.size(), cudaMemcpyDeviceToHost, stream_),
                      "cudaMemcpyAsync (delta header to the host)"));
    return cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (delta header)");
  });
}

// Waits: the box may be an unpacked shard, which the caller's streams read once the step returns.
Result<void> CudaDeltaKernels::copy_box(const DeviceCopy& box) {
  return on_own_device([&]() -> Result<void> {
    if (box.items == 0) return {};
    if (box_.get() == nullptr) REFIT_TRY(box_.allocate(sizeof(DeviceCopy), "cudaMalloc (delta box copy)"));
    REFIT_TRY(cuda_ok(cudaMemcpyAsync(box_.get(), &box, sizeof box, cudaMemcpyHostToDevice, stream_),
                      "cudaMemcpyAsync (delta box copy)"));
    REFIT_TRY(
        cuda_ok(launch_copy_batch(reinterpret_cast<const DeviceCopy*>(box_.get()), 1, box.items, stream_),
                "copy kernel (delta piece)"));
    return cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (delta box copy)");
  });
}

namespace {

class DeviceBuffer final : public DeltaBuffer {
 public:
  DeviceBuffer(DeviceMemory memory, std::int64_t bytes) : memory_(std::move(memory)), bytes_(bytes) {}
  std::span<std::byte> bytes() const override {
    return std::span(memory_.get(), static_cast<std::size_t>(bytes_));
  }

 private:
  DeviceMemory memory_;
  std::int64_t bytes_;
};

}  // namespace

Result<std::unique_ptr<DeltaBuffer>> CudaDeltaKernels::allocate(std::int64_t bytes) {
  return on_own_device([&]() -> Result<std::unique_ptr<DeltaBuffer>> {
    DeviceMemory memory;
    REFIT_TRY(memory.allocate(static_cast<std::size_t>(bytes), "cudaMalloc (delta refit)"));
    return std::make_unique<DeviceBuffer>(std::move(memory), bytes);
  });
}

}  // namespace refit::nccl_detail
