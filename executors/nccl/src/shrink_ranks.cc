#include "shrink_ranks.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

// The parent ranks whose processes run a gone plan rank, flagged.
Result<std::vector<bool>> excluded_processes(const CommRankMap& comm_rank_of, std::int32_t size,
                                             std::span<const std::int32_t> gone) {
  for (std::size_t r = 0; r < comm_rank_of.size(); ++r)
    if (comm_rank_of[r] != kNoCommRank && (comm_rank_of[r] < 0 || comm_rank_of[r] >= size))
      return out_of_range(fmt::format("plan rank {} runs on communicator rank {}, outside its {} ranks", r,
                                      comm_rank_of[r], size));
  std::vector<bool> out(at(size), false);
  for (const auto r : gone) {
    if (r < 0 || std::cmp_greater_equal(r, comm_rank_of.size()))
      return out_of_range(fmt::format("gone rank {} is not in the plan ({} ranks)", r, comm_rank_of.size()));
    if (comm_rank_of[at(r)] == kNoCommRank)
      return invalid(fmt::format("plan rank {} is gone already: an earlier shrink excluded it", r));
    out[at(comm_rank_of[at(r)])] = true;
  }
  return out;
}

}  // namespace

Result<ShrinkRanks> shrink_ranks(const CommRankMap& comm_rank_of, std::int32_t size,
                                 std::span<const std::int32_t> gone, std::int32_t me, std::uint64_t epoch) {
  if (me < 0 || me >= size)
    return out_of_range(fmt::format("communicator rank {} is outside its {} ranks", me, size));
  const auto excluded = REFIT_TRY(excluded_processes(comm_rank_of, size, gone));
  if (excluded[at(me)])
    return invalid(
        fmt::format("this process (communicator rank {}) runs a gone rank: it cannot shrink the "
                    "communicator without itself",
                    me));
  ShrinkRanks s{
      .epoch = epoch, .exclude = {}, .child_of = {}, .child_size = 0, .comm_rank_of = {}, .gone = {}};
  for (std::int32_t r = 0; r < size; ++r) {
    if (excluded[at(r)]) {
      s.exclude.push_back(r);
      s.child_of.push_back(kNoCommRank);
    } else {
      s.child_of.push_back(s.child_size++);
    }
  }
  for (const auto c : comm_rank_of) {
    const auto child = c == kNoCommRank ? kNoCommRank : s.child_of[at(c)];
    s.comm_rank_of.push_back(child);
    s.gone.push_back(child == kNoCommRank);
  }
  return s;
}

Result<std::int32_t> child_rank(const ShrinkRanks& s, std::int32_t rank) {
  if (rank < 0 || std::cmp_greater_equal(rank, s.child_of.size()))
    return out_of_range(
        fmt::format("communicator rank {} is outside the parent's {} ranks", rank, s.child_of.size()));
  if (s.child_of[at(rank)] == kNoCommRank)
    return fail(ErrorCode::kPeerFailed,
                fmt::format("communicator rank {} was excluded at membership epoch {}: a process of an older "
                            "membership has no rank in the shrunk communicator",
                            rank, s.epoch));
  return s.child_of[at(rank)];
}

}  // namespace refit::nccl_detail
