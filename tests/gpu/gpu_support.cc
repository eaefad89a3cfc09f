#include "gpu_support.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/pattern.h"

namespace refit::gpu_testing {
namespace {

std::span<std::byte> add_shard(DeviceRanks& d, std::uint32_t tensor, const TensorSpec& spec, const Box& box,
                               bool source) {
  const auto bytes = static_cast<std::size_t>(box.volume() * dtype_size(spec.dtype));
  auto& m = d.memory.emplace_back();
  if (!m.allocate(bytes, "cudaMalloc (test shard)")) throw std::runtime_error("cudaMalloc failed");
  std::vector<std::byte> host(bytes);
  if (source) fill_pattern(tensor, spec.shape, box, dtype_size(spec.dtype), host);
  if (bytes > 0) cudaMemcpy(m.get(), host.data(), bytes, cudaMemcpyHostToDevice);
  return {m.get(), bytes};
}

}  // namespace

DeviceRanks make_device_ranks(const ReshardProblem& problem) {
  DeviceRanks d;
  for (std::int32_t r = 0; r < problem.world_size(); ++r) {
    LocalRankBuffers rank{
        .rank = Rank{r},
        .buffers = RankBuffers{.memory = MemoryKind::kCuda, .sources = {}, .destinations = {}}};
    for (std::uint32_t t = 0; t < problem.tensors().size(); ++t) {
      const auto& spec = problem.tensors()[t];
      if (auto box = spec.source.local_box(Rank{r}))
        rank.buffers.sources.push_back(
            ShardBuffer{.tensor = t, .box = *box, .bytes = add_shard(d, t, spec.tensor, *box, true)});
      if (auto box = spec.destination.local_box(Rank{r}))
        rank.buffers.destinations.push_back(
            ShardBuffer{.tensor = t, .box = *box, .bytes = add_shard(d, t, spec.tensor, *box, false)});
    }
    d.ranks.push_back(std::move(rank));
  }
  return d;
}

void clear_destinations(const DeviceRanks& ranks) {
  for (const auto& r : ranks.ranks)
    for (const auto& s : r.buffers.destinations)
      if (!s.bytes.empty()) cudaMemset(s.bytes.data(), 0, s.bytes.size());
  cudaDeviceSynchronize();
}

Result<void> verify_device_destinations(const ReshardProblem& problem, const DeviceRanks& ranks) {
  for (const auto& r : ranks.ranks)
    for (const auto& d : r.buffers.destinations) {
      const auto& spec = problem.tensors()[d.tensor].tensor;
      std::vector<std::byte> host(d.bytes.size());
      if (!host.empty() &&
          cudaMemcpy(host.data(), d.bytes.data(), host.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
        return fail(ErrorCode::kRuntime, "cudaMemcpy back failed");
      REFIT_TRY_IN(verify_pattern(d.tensor, spec.shape, d.box, dtype_size(spec.dtype), host),
                   fmt::format("rank {}, tensor '{}' {}", r.rank.value, spec.name, d.box.to_string()));
    }
  return {};
}

}  // namespace refit::gpu_testing
