#pragma once
// run_on_host (host_run.h) over framework buffers: every rank's shards stored as the regions of
// a storage map place them in its parameters.
#include <span>
#include <vector>

#include "host_run.h"
#include "refit/executors/framework_buffers.h"
#include "refit/models/storage_map.h"

namespace refit::lowering::testing {

inline std::vector<std::byte*> bases(const std::vector<std::span<std::byte>>& spans) {
  std::vector<std::byte*> out;
  for (const auto& s : spans) out.push_back(s.data());
  return out;
}

inline RankShards shards_with_regions(const RankBuffers& b) {
  RankShards out;
  for (const auto& s : b.sources)
    out.sources.push_back(Shard{.tensor = s.tensor, .box = s.box, .regions = s.regions});
  for (const auto& s : b.destinations)
    out.destinations.push_back(Shard{.tensor = s.tensor, .box = s.box, .regions = s.regions});
  return out;
}

// Lowers every rank of `plan` over its framework buffers and runs it; the first error.
[[nodiscard]] inline Result<void> run_stored(const Plan& plan, const ReshardProblem& problem,
                                             const models::StorageMap& sources,
                                             const models::StorageMap& destinations,
                                             const ZeroCopyRule& rule) {
  const auto lowered = REFIT_TRY(LoweredPlan::make(plan, Bytes{96}));
  const HostAllocator heap = [](Bytes bytes) -> Result<std::unique_ptr<HostAllocation>> {
    return heap_allocation(bytes);
  };
  std::vector<RankProgram> programs;
  std::vector<FrameworkBuffers> memory;
  std::vector<std::vector<std::byte>> scratch;
  std::vector<std::vector<std::byte*>> source_bases, destination_bases;
  for (std::int32_t r = 0; r < plan.world_size(); ++r) {
    auto m = REFIT_TRY(FrameworkBuffers::allocate(
        problem, problem.is_source(Rank{r}) ? sources : destinations, Rank{r}, heap));
    m.fill_pattern(problem);
    programs.push_back(REFIT_TRY(lower_rank(lowered, Rank{r}, shards_with_regions(m.buffers()), rule)));
    scratch.emplace_back(static_cast<std::size_t>(programs.back().scratch().value));
    source_bases.push_back(bases(m.buffers().source_parameters));
    destination_bases.push_back(bases(m.buffers().destination_parameters));
    memory.push_back(std::move(m));
  }
  const auto host = [&](std::int32_t r) {
    const auto i = static_cast<std::size_t>(r);
    return HostBuffers{
        .sources = source_bases[i], .destinations = destination_bases[i], .scratch = scratch[i].data()};
  };
  for (const Transfer& t : plan.transfers) {
    const auto& from = programs[static_cast<std::size_t>(t.sender.value)];
    const auto& to = programs[static_cast<std::size_t>(t.receiver.value)];
    const Send& s = *std::ranges::find(from.sends(), t.id, &Send::transfer);
    const Receive& r = *std::ranges::find(to.receives(), t.id, &Receive::transfer);
    for (std::int64_t k = 0; k < lowered.layout(t.id).chunks(); ++k)
      REFIT_TRY(move_chunk(from, s, host(t.sender.value), to, r, host(t.receiver.value), k));
  }
  for (std::size_t r = 0; r < memory.size(); ++r)
    REFIT_TRY_IN(memory[r].verify(problem), fmt::format("rank {}", r));
  return {};
}

}  // namespace refit::lowering::testing
