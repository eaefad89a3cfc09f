#pragma once
// One rank's framework parameters (models/storage_map.h) as an executor's buffers: the rank's
// logical boxes as regions of the parameters. framework_rank_buffers() builds them over memory the
// caller holds (the Python package: the caller's arrays); FrameworkBuffers allocates that memory,
// as `refit run --storage framework` and the tests hand it to an executor: every parameter
// zeroed, the verification pattern written and checked through the regions, padding checked to
// stay zero.
#include <memory>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/executors/executor.h"
#include "refit/executors/host_shards.h"
#include "refit/models/storage_map.h"

namespace refit {

// What `side` stores on `rank`; an error when the rank is not one of the side's.
[[nodiscard]] Result<const models::RankStorage*> rank_storage(const models::StorageMap& side, Rank rank);

// The buffers of `rank` (a rank of `side`) whose parameters lie in `parameters`: parameters[i] is
// the memory of the rank's parameter i (row-major, its dtype, exactly its bytes), and each of the
// rank's shards on that side of `problem` is the regions `side` gives it there. Elements in no
// region (vocab padding) are never read or written. Errors name the rank and the parameter whose
// memory is missing or of the wrong size.
[[nodiscard]] Result<RankBuffers> framework_rank_buffers(const ReshardProblem& problem,
                                                         const models::StorageMap& side, Rank rank,
                                                         std::vector<std::span<std::byte>> parameters,
                                                         MemoryKind memory = MemoryKind::kHost);

class FrameworkBuffers {
 public:
  // Every parameter `side` gives `rank` (a rank of that side), zeroed, from `allocator`; the
  // rank's shards on that side of `problem` with the regions `side` gives them.
  [[nodiscard]] static Result<FrameworkBuffers> allocate(const ReshardProblem& problem,
                                                         const models::StorageMap& side, Rank rank,
                                                         const HostAllocator& allocator);

  const RankBuffers& buffers() const { return buffers_; }
  const std::vector<models::FrameworkParameter>& parameters() const { return *parameters_; }
  // The bytes of parameter i (row-major, its dtype).
  std::span<std::byte> bytes(std::size_t i) const { return storage_[i]->bytes(); }

  // Writes the pattern of `refit run --verify` into every source region.
  void fill_pattern(const ReshardProblem& problem);
  // Checks every destination region against the pattern, and that every padding element (in no
  // region) is still zero; errors name the parameter, tensor and first wrong element.
  [[nodiscard]] Result<void> verify(const ReshardProblem& problem) const;
  // Zeroes every destination parameter again, around the cache as HostShards does.
  void clear_destinations();

 private:
  bool source_ = true;
  const std::vector<models::FrameworkParameter>* parameters_ = nullptr;  // in the storage map
  const std::vector<models::StoredRegion>* regions_ = nullptr;
  std::vector<std::unique_ptr<HostAllocation>> storage_;  // per parameter
  RankBuffers buffers_;
};

}  // namespace refit
