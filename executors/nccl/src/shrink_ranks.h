#pragma once
// What ncclCommShrink makes of the executor's communicator when ranks are known dead, as pure
// data: the parent ranks it excludes, every survivor's rank in the child, and the plan ranks'
// communicator ranks there. NCCL removes the excluded ranks and numbers the others in their old
// order without gaps (nccl.h, ncclCommShrink), so every survivor works out the same child ranks
// without talking to the others. A process lives or dies whole: when one plan rank it runs is
// gone, so are the others it runs.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/nccl/local_ranks.h"

namespace refit::nccl_detail {

inline constexpr std::int32_t kNoCommRank = -1;

struct ShrinkRanks {
  std::uint64_t epoch = 0;             // the membership epoch the child serves
  std::vector<std::int32_t> exclude;   // ncclCommShrink's excludeRanksList: parent ranks, ascending
  std::vector<std::int32_t> child_of;  // by parent rank: its rank in the child, or kNoCommRank
  std::int32_t child_size = 0;
  // By plan rank: the child rank running it, or kNoCommRank when its process is excluded (now
  // or by an earlier shrink).
  CommRankMap comm_rank_of;
  std::vector<bool> gone;  // by plan rank: no process runs it any more
};

// `comm_rank_of`: plan rank -> parent rank (kNoCommRank for plan ranks gone before); `size` the
// parent's; `gone`: plan ranks now known dead; `me` this process's parent rank. Refuses, naming
// it: a plan rank outside the plan or already gone, a map entry outside the parent, this process
// among the excluded (it cannot take part in its own exclusion), and no survivor at all.
[[nodiscard]] Result<ShrinkRanks> shrink_ranks(const CommRankMap& comm_rank_of, std::int32_t size,
                                               std::span<const std::int32_t> gone, std::int32_t me,
                                               std::uint64_t epoch);

// The child rank of parent rank `rank`. The fence of an older membership: an excluded rank has
// no rank in the child, so nothing can address it and it can address nothing; refused with
// kPeerFailed naming the rank and the epoch.
[[nodiscard]] Result<std::int32_t> child_rank(const ShrinkRanks& s, std::int32_t rank);

}  // namespace refit::nccl_detail
