#include "refit/executors/membership.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

Result<EngineMembership> consecutive_engines(std::int32_t source_ranks, std::int32_t destination_ranks,
                                             std::int32_t ranks_per_engine, std::uint64_t epoch) {
  if (source_ranks < 0 || destination_ranks <= 0 || ranks_per_engine <= 0 ||
      destination_ranks % ranks_per_engine != 0)
    return out_of_range(fmt::format("{} destination ranks are not a whole number of engines of {} ranks each",
                                    destination_ranks, ranks_per_engine));
  EngineMembership m{.epoch = epoch, .engine_of = {}, .members = {}};
  m.engine_of.assign(static_cast<std::size_t>(source_ranks), kNoEngine);
  for (std::int32_t r = 0; r < destination_ranks; ++r) m.engine_of.push_back(r / ranks_per_engine);
  m.members.assign(static_cast<std::size_t>(destination_ranks / ranks_per_engine), true);
  return m;
}

Result<void> check_engine_membership(const EngineMembership& m, std::int32_t world) {
  if (std::cmp_not_equal(m.engine_of.size(), world))
    return mismatch(fmt::format("the membership names the engines of {} ranks, the plan has {} ranks",
                                m.engine_of.size(), world));
  std::vector<bool> seen(m.members.size(), false);
  for (std::size_t r = 0; r < m.engine_of.size(); ++r) {
    const auto e = m.engine_of[r];
    if (e == kNoEngine) continue;
    if (e < 0 || std::cmp_greater_equal(e, m.members.size()))
      return out_of_range(fmt::format("the membership puts rank {} in engine {}, but there are {} engines", r,
                                      e, m.members.size()));
    seen[static_cast<std::size_t>(e)] = true;
  }
  if (const auto empty = std::ranges::find(seen, false); empty != seen.end())
    return invalid(fmt::format("the membership's engine {} has no rank", empty - seen.begin()));
  return {};
}

Result<void> check_set_membership(const EngineMembership& m, std::int32_t world) {
  REFIT_TRY_IN(check_engine_membership(m, world), "membership");
  if (m.epoch == 0) return out_of_range("membership: epoch 0 is what a refit that is not elastic uses");
  return {};
}

std::vector<bool> excluded_ranks(const EngineMembership& m, const std::vector<bool>& gone) {
  std::vector<bool> engine_out(m.members.size());
  for (std::size_t e = 0; e < m.members.size(); ++e) engine_out[e] = !m.members[e];
  for (std::size_t r = 0; r < m.engine_of.size(); ++r)
    if (gone[r] && m.engine_of[r] != kNoEngine) engine_out[static_cast<std::size_t>(m.engine_of[r])] = true;
  std::vector<bool> out(m.engine_of.size());
  for (std::size_t r = 0; r < out.size(); ++r)
    out[r] = gone[r] || (m.engine_of[r] != kNoEngine && engine_out[static_cast<std::size_t>(m.engine_of[r])]);
  return out;
}

std::vector<bool> dropped_transfers(const Plan& plan, const std::vector<bool>& excluded) {
  std::vector<bool> dropped(plan.transfers.size(), false);
  for (const Transfer& t : plan.transfers) {
    const auto upstream = t.upstream();
    dropped[static_cast<std::size_t>(t.id)] =
        excluded[static_cast<std::size_t>(t.sender.value)] ||
        excluded[static_cast<std::size_t>(t.receiver.value)] ||
        std::ranges::any_of(upstream, [&](std::int32_t u) { return dropped[static_cast<std::size_t>(u)]; });
  }
  return dropped;
}

EngineOutcomes engine_outcomes(const Plan& plan, const EngineMembership& m, const std::vector<bool>& gone,
                               const std::vector<bool>& dropped) {
  std::vector<bool> missed(m.members.size(), false);
  for (std::size_t r = 0; r < m.engine_of.size(); ++r)
    if (gone[r] && m.engine_of[r] != kNoEngine) missed[static_cast<std::size_t>(m.engine_of[r])] = true;
  for (const Transfer& t : plan.transfers) {
    const auto e = m.engine_of[static_cast<std::size_t>(t.receiver.value)];
    if (dropped[static_cast<std::size_t>(t.id)] && e != kNoEngine) missed[static_cast<std::size_t>(e)] = true;
  }
  EngineOutcomes out;
  for (std::size_t e = 0; e < m.members.size(); ++e)
    if (m.members[e]) (missed[e] ? out.missed : out.completed).push_back(static_cast<std::int32_t>(e));
  return out;
}

}  // namespace refit
