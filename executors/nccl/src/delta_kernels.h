#pragma once
// The passes of the GPU delta codec (delta_kernel_body.h) behind one interface, so that the codec's
// steps (device_delta_codec.h) run the same on a GPU (CudaDeltaKernels: the kernels on a stream)
// and on the host (HostDeltaKernels: the very same bodies lane by lane, what the CPU tests run).
// Each pass that returns totals has waited for them: the host decides from them what comes next.
// The passes that leave bytes for others (apply, copy, copy_box, upload) have finished when they
// return: the caller's streams, not ordered after the kernels' own, read those bytes next. write
// and write_runs do not wait: an encoding ends with the header's upload, which waits for them.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "copy_kernel_body.h"
#include "delta_kernel_body.h"
#include "refit/core/error.h"
#include "refit/executors/delta_memory.h"

namespace refit::nccl_detail {

class DeltaKernels {
 public:
  virtual ~DeltaKernels() = default;

  // Points `d`'s workspace (mask words, tile arrays, totals) at memory sized for its lanes and
  // tiles; it stays valid, and its contents with it, until the next call.
  [[nodiscard]] virtual Result<void> prepare(DeltaLanes& d) = 0;
  // Encoding, pass 1 and the tiles' prefix: the mask, the changed elements and the checksum's change.
  [[nodiscard]] virtual Result<DeltaTotals> scan(const DeltaLanes& d) = 0;
  // Encoding, pass 2: the bitmask body at d.body, from the mask and offsets scan() left.
  [[nodiscard]] virtual Result<void> write(const DeltaLanes& d) = 0;
  // Encoding runs, after scan(): the lanes' carries, their position bytes and the tiles' offsets
  // (totals' count: the position bytes of the whole body).
  [[nodiscard]] virtual Result<DeltaTotals> positions(const DeltaLanes& d) = 0;
  // Encoding runs, after positions(): the runs body at d.body (d.positions bytes of positions).
  [[nodiscard]] virtual Result<void> write_runs(const DeltaLanes& d) = 0;
  // Decoding runs: the mask the positions at d.positions_in make, in d.mask (count: the values,
  // sum: the last run's end, flags: a varint cut short or too long, or a head without its length).
  [[nodiscard]] virtual Result<DeltaTotals> runs_to_mask(const DeltaLanes& d) = 0;
  // The checksum of d.current (totals' sum).
  [[nodiscard]] virtual Result<DeltaTotals> checksum(const DeltaLanes& d) = 0;
  // Decoding, pass 1 and the prefix: the payload mask's set bits, and lanes with bits past the end.
  [[nodiscard]] virtual Result<DeltaTotals> count(const DeltaLanes& d) = 0;
  // Decoding, pass 2 (writes nothing of the target): the checksum's change (totals' sum).
  [[nodiscard]] virtual Result<DeltaTotals> check(const DeltaLanes& d) = 0;
  // Decoding, pass 3: the changes XORed into d.target.
  [[nodiscard]] virtual Result<void> apply(const DeltaLanes& d) = 0;

  // Bytes between the memory the passes work on (device to device on a GPU), and to and from the host.
  [[nodiscard]] virtual Result<void> copy(std::byte* to, const std::byte* from, std::int64_t bytes) = 0;
  [[nodiscard]] virtual Result<void> upload(std::byte* to, std::span<const std::byte> from) = 0;
  [[nodiscard]] virtual Result<void> download(std::span<std::byte> to, const std::byte* from) = 0;
  // A box copy between two arrays in that memory (device_copy.h: numbered, a batch of its own), as
  // the NCCL executor's copy kernel runs it.
  [[nodiscard]] virtual Result<void> copy_box(const DeviceCopy& box) = 0;

  // The memory the passes work on, and memory of it.
  virtual MemoryKind memory() const = 0;
  [[nodiscard]] virtual Result<std::unique_ptr<DeltaBuffer>> allocate(std::int64_t bytes) = 0;
};

// The passes on host memory, each lane in the kernels' mapping (their bodies), the block scans and
// reductions as loops: what the GPU computes, on a CPU.
class HostDeltaKernels final : public DeltaKernels {
 public:
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
  MemoryKind memory() const override { return MemoryKind::kHost; }
  [[nodiscard]] Result<std::unique_ptr<DeltaBuffer>> allocate(std::int64_t bytes) override;

 private:
  std::vector<std::uint64_t> workspace_;
};

// The number of 64-bit words of workspace `d` needs, and where each part lies in them: the mask
// words, the lanes' carries, the tile counts, sums and position bytes, the totals (both
// implementations lay it out alike).
std::int64_t delta_workspace_words(const DeltaLanes& d);
void point_delta_workspace(DeltaLanes& d, std::uint64_t* workspace);

}  // namespace refit::nccl_detail
