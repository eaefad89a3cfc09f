#include "host_mirror.h"

#include <fmt/format.h>

namespace refit::nccl_detail {
namespace {

Result<void> copy_all(const auto& pairs, bool upload) {
  for (const auto& p : pairs) {
    const auto status = upload ? cudaMemcpy(p.device, p.host.data(), p.host.size(), cudaMemcpyHostToDevice)
                               : cudaMemcpy(p.host.data(), p.device, p.host.size(), cudaMemcpyDeviceToHost);
    if (auto ok =
            cuda_ok(status, upload ? "cudaMemcpy (host source to GPU)" : "cudaMemcpy (destination to host)");
        !ok)
      return ok;
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
        if (auto ok = memory.allocate(shard.bytes.size(),
                                      fmt::format("cudaMalloc (copy of rank {}'s host shard)", r.rank.value));
            !ok)
          return std::unexpected(std::move(ok.error()));
        (side == &mine.buffers.sources ? m.sources_ : m.destinations_)
            .push_back(Pair{shard.bytes, memory.get()});
        shard.bytes = std::span(memory.get(), shard.bytes.size());
      }
  }
  return m;
}

Result<void> HostMirror::upload_sources() const {
  if (auto ok = copy_all(sources_, true); !ok) return ok;
  // A copy from pageable memory may return before its DMA is done, and the executor's streams do
  // not wait for the default stream.
  return cuda_ok(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize (host sources uploaded)");
}
Result<void> HostMirror::download_destinations() const { return copy_all(destinations_, false); }

}  // namespace refit::nccl_detail
