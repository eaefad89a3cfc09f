#include "local_view.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/rank_buffers.h"

namespace refit::nccl_detail {
namespace {

[[nodiscard]] Result<std::vector<std::int32_t>> full_map(const Plan& plan, const CommRankMap& given,
                                                         CommPosition comm) {
  const auto world = plan.world_size();
  if (given.empty()) {
    if (comm.size != world)
      return mismatch(
          fmt::format("the plan has {} ranks and the communicator {}: give a map from plan ranks to "
                      "communicator ranks",
                      world, comm.size));
    std::vector<std::int32_t> identity(static_cast<std::size_t>(world));
    for (std::int32_t r = 0; r < world; ++r) identity[static_cast<std::size_t>(r)] = r;
    return identity;
  }
  if (given.size() != static_cast<std::size_t>(world))
    return mismatch(fmt::format("comm_rank_of has {} entries for a plan of {} ranks", given.size(), world));
  for (std::size_t r = 0; r < given.size(); ++r)
    if (given[r] < 0 || given[r] >= comm.size)
      return out_of_range(
          fmt::format("comm_rank_of[{}] is {}, outside the communicator's {} ranks", r, given[r], comm.size));
  return given;
}

[[nodiscard]] Result<void> add_rank(const Plan& plan, const LocalRankBuffers& g, MemoryKind memory,
                                    LocalView& view) {
  LocalRank local{.rank = g.rank, .shards = REFIT_TRY(check_rank_buffers(plan, g.rank, g.buffers, memory))};
  // The lowering's buffer indices: one per shard, or the framework parameters (rank_buffers.h).
  local.first_source = static_cast<std::int32_t>(view.shards.size());
  std::ranges::copy(side_buffers(g.buffers, true), std::back_inserter(view.shards));
  local.first_destination = static_cast<std::int32_t>(view.shards.size());
  std::ranges::copy(side_buffers(g.buffers, false), std::back_inserter(view.shards));
  view.ranks.push_back(std::move(local));
  return {};
}

}  // namespace

Result<LocalView> make_local_view(const Plan& plan, std::span<const LocalRankBuffers> given,
                                  const CommRankMap& comm_rank_of, CommPosition comm, MemoryKind memory) {
  LocalView view;
  view.comm_rank_of = REFIT_TRY(full_map(plan, comm_rank_of, comm));
  for (const auto& g : given) {
    const auto r = g.rank.value;
    if (r < 0 || r >= plan.world_size())
      return out_of_range(fmt::format("rank {} is not in the plan ({} ranks)", r, plan.world_size()));
    if (view.comm_rank_of[static_cast<std::size_t>(r)] != comm.rank)
      return mismatch(fmt::format("plan rank {} runs on communicator rank {}, not on this one ({})", r,
                                  view.comm_rank_of[static_cast<std::size_t>(r)], comm.rank));
    if (std::ranges::any_of(view.ranks, [&](const LocalRank& l) { return l.rank == g.rank; }))
      return invalid(fmt::format("rank {} is given twice", r));
    REFIT_TRY(add_rank(plan, g, memory, view));
  }
  for (std::int32_t r = 0; r < plan.world_size(); ++r)
    if (view.comm_rank_of[static_cast<std::size_t>(r)] == comm.rank &&
        std::ranges::none_of(view.ranks, [&](const LocalRank& l) { return l.rank.value == r; }))
      return mismatch(fmt::format(
          "plan rank {} runs on this communicator rank ({}) but no buffers were given for it", r, comm.rank));
  return view;
}

}  // namespace refit::nccl_detail
