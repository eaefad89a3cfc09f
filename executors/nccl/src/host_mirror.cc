#include "host_mirror.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

[[nodiscard]] Result<void> copy_all(const auto& pairs, bool to_device) {
  for (const auto& p : pairs)
    REFIT_TRY(to_device ? upload(p.device, p.host.data(), p.host.size(), "cudaMemcpy (host source to GPU)")
                        : cuda_ok(cudaMemcpy(p.host.data(), p.device, p.host.size(), cudaMemcpyDeviceToHost),
                                  "cudaMemcpy (destination to host)"));
  return {};
}

}  // namespace

Result<HostMirror> HostMirror::make(std::span<const LocalRankBuffers> ranks) {
  HostMirror m;
  for (const auto& r : ranks) {
    auto& mine = m.device_.emplace_back(r);
    if (r.buffers.memory != MemoryKind::kHost) continue;
    mine.buffers.memory = MemoryKind::kCuda;
    for (const bool source : {true, false}) {
      auto& pairs = source ? m.sources_ : m.destinations_;
      // The shards' own bytes, or the framework parameters their regions lie in.
      auto& parameters = source ? mine.buffers.source_parameters : mine.buffers.destination_parameters;
      for (auto& shard : source ? mine.buffers.sources : mine.buffers.destinations)
        REFIT_TRY(m.mirror(shard.bytes, pairs, r.rank));
      for (auto& bytes : parameters) REFIT_TRY(m.mirror(bytes, pairs, r.rank));
    }
  }
  return m;
}

Result<void> HostMirror::mirror(std::span<std::byte>& bytes, std::vector<Pair>& pairs, Rank rank) {
  if (bytes.empty()) return {};
  auto& memory = memory_.emplace_back();
  REFIT_TRY(
      memory.allocate(bytes.size(), fmt::format("cudaMalloc (copy of rank {}'s host buffer)", rank.value)));
  pairs.push_back(Pair{.host = bytes, .device = memory.get()});
  bytes = std::span(memory.get(), bytes.size());
  return {};
}

Result<void> HostMirror::upload_sources() const { return copy_all(sources_, true); }
Result<void> HostMirror::download_destinations() const { return copy_all(destinations_, false); }

}  // namespace refit::nccl_detail
