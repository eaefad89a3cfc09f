#include "host_mirror.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

[[nodiscard]] Result<void> copy_all(const auto& pairs, bool upload) {
  for (const auto& p : pairs) {
    const auto status = upload ? cudaMemcpy(p.device, p.host.data(), p.host.size(), cudaMemcpyHostToDevice)
                               : cudaMemcpy(p.host.data(), p.device, p.host.size(), cudaMemcpyDeviceToHost);
    REFIT_TRY(
        cuda_ok(status, upload ? "cudaMemcpy (host source to GPU)" : "cudaMemcpy (destination to host)"));
  }
  return {};
}

}  // namespace

Result<HostMirror> HostMirror::make(std::span<const LocalRankBuffers> ranks) {
  HostMirror m;
  for (const auto& r : ranks) {
    auto& mine = m.device_.emplace_back(r);
    if (r.buffers.memory != MemoryKind::kHost) continue;
    mine.buffers.memory = MemoryKind::kCuda;
    for (auto* side : {&mine.buffers.sources, &mine.buffers.destinations})
      for (auto& shard : *side) {
        if (shard.bytes.empty()) continue;
        auto& memory = m.memory_.emplace_back();
        REFIT_TRY(memory.allocate(shard.bytes.size(),
                                  fmt::format("cudaMalloc (copy of rank {}'s host shard)", r.rank.value)));
        (side == &mine.buffers.sources ? m.sources_ : m.destinations_)
            .push_back(Pair{.host = shard.bytes, .device = memory.get()});
        shard.bytes = std::span(memory.get(), shard.bytes.size());
      }
  }
  return m;
}

Result<void> HostMirror::upload_sources() const {
  REFIT_TRY(copy_all(sources_, true));
  // A copy from pageable memory may return before its DMA is done, and the executor's streams do
  // not wait for the default stream.
  return cuda_ok(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize (host sources uploaded)");
}
Result<void> HostMirror::download_destinations() const { return copy_all(destinations_, false); }

}  // namespace refit::nccl_detail
