#include "refit/facade/join_storage.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {
namespace {

[[nodiscard]] Result<const models::RankStorage*> rank_of(const models::StorageMap& map, Rank global,
                                                         const char* side) {
  const auto at = global.value - map.first_rank;
  if (at < 0 || at >= static_cast<std::int32_t>(map.ranks.size()))
    return mismatch(fmt::format("the {} storage map has no rank {}", side, global.value));
  return &map.ranks[static_cast<std::size_t>(at)];
}

// `rank` with only the regions of tensors `keep` says.
models::RankStorage only(const models::RankStorage& rank, const std::vector<bool>& keep) {
  models::RankStorage out{.parameters = rank.parameters, .regions = {}};
  for (const auto& r : rank.regions)
    if (keep[r.tensor]) out.regions.push_back(r);
  return out;
}

}  // namespace

Result<JoinStorage> join_storage(const JoinProblem& join, const models::StorageMap& training,
                                 const models::StorageMap& inference) {
  std::vector<bool> from_training(join.from_peers.size());
  for (std::size_t t = 0; t < from_training.size(); ++t) from_training[t] = !join.from_peers[t];
  const std::vector<bool> all(join.from_peers.size(), true);
  JoinStorage out{
      .sources = {.framework = training.framework, .first_rank = 0, .ranks = {}},
      .destinations = {
          .framework = inference.framework, .first_rank = join.problem.source_ranks(), .ranks = {}}};
  for (std::int32_t r = 0; r < join.problem.world_size(); ++r) {
    const Rank global = join.global[static_cast<std::size_t>(r)];
    if (r < join.training_ranks)
      out.sources.ranks.push_back(only(*REFIT_TRY(rank_of(training, global, "training")), from_training));
    else if (join.problem.is_source(Rank{r}))
      out.sources.ranks.push_back(only(*REFIT_TRY(rank_of(inference, global, "inference")), join.from_peers));
    else
      out.destinations.ranks.push_back(only(*REFIT_TRY(rank_of(inference, global, "inference")), all));
  }
  return out;
}

}  // namespace refit
