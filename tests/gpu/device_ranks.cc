#include "device_ranks.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/pattern.h"

namespace refit::gpu_testing {
namespace {

struct Planned {
  std::uint32_t tensor = 0;
  Box box;
  bool source = false;
  std::size_t memory = 0;  // index into DeviceRanks::memory
};

// Runs f(rank) for every rank, one thread each.
template <class F>
void for_each_rank(std::size_t ranks, F f) {
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r) threads.emplace_back(f, r);
  for (auto& t : threads) t.join();
}

}  // namespace

DeviceRanks make_device_ranks(const ReshardProblem& problem) {
  DeviceRanks d;
  std::vector<std::vector<Planned>> planned(static_cast<std::size_t>(problem.world_size()));
  for (std::int32_t r = 0; r < problem.world_size(); ++r) {
    LocalRankBuffers rank{
        .rank = Rank{r},
        .buffers = RankBuffers{.memory = MemoryKind::kCuda, .sources = {}, .destinations = {}}};
    for (std::uint32_t t = 0; t < problem.tensors().size(); ++t) {
      const auto& spec = problem.tensors()[t];
      const auto add = [&](const Box& box, bool source) {
        const auto bytes = static_cast<std::size_t>(box.volume() * dtype_size(spec.tensor.dtype));
        auto& m = d.memory.emplace_back();
        if (!m.allocate(bytes, "cudaMalloc (test shard)")) throw std::runtime_error("cudaMalloc failed");
        planned[static_cast<std::size_t>(r)].push_back({t, box, source, d.memory.size() - 1});
        auto& list = source ? rank.buffers.sources : rank.buffers.destinations;
        list.push_back(ShardBuffer{.tensor = t, .box = box, .bytes = {m.get(), bytes}});
      };
      if (auto box = spec.source.local_box(Rank{r})) add(*box, true);
      if (auto box = spec.destination.local_box(Rank{r})) add(*box, false);
    }
    d.ranks.push_back(std::move(rank));
  }
  std::atomic<bool> uploaded{true};
  for_each_rank(planned.size(), [&](std::size_t r) {
    for (const auto& p : planned[r]) {
      const auto& spec = problem.tensors()[p.tensor].tensor;
      const auto bytes = static_cast<std::size_t>(p.box.volume() * dtype_size(spec.dtype));
      std::vector<std::byte> host(bytes);
      if (p.source) fill_pattern(p.tensor, spec.shape, p.box, dtype_size(spec.dtype), host);
      if (bytes > 0 && !nccl_detail::upload(d.memory[p.memory].get(), host.data(), bytes, "shard"))
        uploaded = false;
    }
  });
  if (!uploaded) throw std::runtime_error("cudaMemcpy of a test shard failed");
  return d;
}

void clear_destinations(const DeviceRanks& ranks) {
  for (const auto& r : ranks.ranks)
    for (const auto& s : r.buffers.destinations)
      if (!s.bytes.empty()) cudaMemset(s.bytes.data(), 0, s.bytes.size());
  cudaDeviceSynchronize();
}

Result<void> verify_device_destinations(const ReshardProblem& problem, const DeviceRanks& ranks,
                                        const std::vector<bool>& filled) {
  std::vector<Result<void>> verdicts(ranks.ranks.size());
  for_each_rank(ranks.ranks.size(), [&](std::size_t i) {
    const auto& r = ranks.ranks[i];
    verdicts[i] = [&]() -> Result<void> {
      for (const auto& d : r.buffers.destinations) {
        const auto& spec = problem.tensors()[d.tensor].tensor;
        std::vector<std::byte> host(d.bytes.size());
        if (!host.empty() &&
            cudaMemcpy(host.data(), d.bytes.data(), host.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
          return fail(ErrorCode::kRuntime, "cudaMemcpy back failed");
        const auto where = fmt::format("rank {}, tensor '{}' {}", r.rank.value, spec.name, d.box.to_string());
        if (filled.empty() || filled[i]) {
          REFIT_TRY_IN(verify_pattern(d.tensor, spec.shape, d.box, dtype_size(spec.dtype), host), where);
        } else if (std::ranges::any_of(host, [](std::byte b) { return b != std::byte{0}; })) {
          return mismatch(where + ": written, though no refit was to fill it");
        }
      }
      return {};
    }();
  });
  for (auto& v : verdicts) REFIT_TRY(std::move(v));
  return {};
}

}  // namespace refit::gpu_testing
