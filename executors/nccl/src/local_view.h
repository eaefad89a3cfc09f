#pragma once
// The plan ranks one process runs, their shards as the lowering sees them and as buffer indices
// the program refers to, and the communicator rank of every plan rank. Built from the caller's
// buffers after checking them against the plan, before anything is allocated or sent.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/nccl/local_ranks.h"
#include "refit/lowering/rank_program.h"
#include "refit/planner/plan.h"

namespace refit::nccl_detail {

struct LocalRank {
  Rank rank;
  lowering::RankShards shards;
  std::int32_t first_source = 0;       // LocalView::shards index of shards.sources[0]
  std::int32_t first_destination = 0;  // and of shards.destinations[0]
};

struct LocalView {
  std::vector<LocalRank> ranks;            // staging slot = index
  std::vector<std::int32_t> comm_rank_of;  // per plan rank, always filled
  // By shard index: the lowering's buffers of each rank in turn, then the bf16 boxes the program
  // quantizes (QuantizedSources::add_to).
  std::vector<std::span<std::byte>> shards;
};

struct CommPosition {
  std::int32_t rank = 0;  // this process's communicator rank
  std::int32_t size = 1;
};

// Refuses: a mapping of the wrong size or onto ranks the communicator lacks; a given rank that
// runs elsewhere, or one of this process's plan ranks without buffers; buffers that do not fit
// the plan (check_rank_buffers: another tensor, a box outside it, too few bytes, other memory).
[[nodiscard]] Result<LocalView> make_local_view(const Plan& plan, std::span<const LocalRankBuffers> given,
                                                const CommRankMap& comm_rank_of, CommPosition comm,
                                                MemoryKind memory);

}  // namespace refit::nccl_detail
