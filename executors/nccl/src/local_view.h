#pragma once
// The plan ranks one process runs, their shard buffers as indices the program refers to, and the
// communicator rank of every plan rank. Built from the caller's buffers after checking them
// against the plan, before anything is allocated or sent.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/error.h"
#include "refit/executors/nccl/local_ranks.h"
#include "refit/planner/plan.h"

namespace refit::nccl_detail {

struct LocalShard {
  std::uint32_t tensor = 0;
  Box box;
  std::int32_t buffer = 0;  // index into LocalView::shards
};

struct LocalRank {
  Rank rank;
  std::vector<LocalShard> sources;
  std::vector<LocalShard> destinations;
};

struct LocalView {
  std::vector<LocalRank> ranks;              // staging slot = index
  std::vector<std::int32_t> comm_rank_of;    // per plan rank, always filled
  std::vector<std::span<std::byte>> shards;  // by shard index
};

struct CommPosition {
  std::int32_t rank = 0;  // this process's communicator rank
  std::int32_t size = 1;
};

// Refuses: a mapping of the wrong size or onto ranks the communicator lacks; a given rank that
// runs elsewhere, or one of this process's plan ranks without buffers; memory of another kind;
// a shard of an unknown tensor, of the wrong dims, outside its tensor, of the wrong byte size,
// or a second shard of one tensor on one side of a rank.
Result<LocalView> make_local_view(const Plan& plan, std::span<const LocalRankBuffers> given,
                                  const CommRankMap& comm_rank_of, CommPosition comm, MemoryKind memory);

}  // namespace refit::nccl_detail
