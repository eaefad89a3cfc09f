#include "call_check.h"

#include <cmath>

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/core/try.h"

namespace refit::sim {
namespace {

Result<void> check_cost(Seconds s, std::string_view what) {
  if (!std::isfinite(s.value) || s.value < 0)
    return out_of_range(fmt::format("{} must be a finite time >= 0 s, got {}", what, s.value));
  return {};
}

Result<void> check_rank(Rank r, const Plan& plan, std::string_view what) {
  if (r.value < 0 || r.value >= plan.world_size())
    return out_of_range(
        fmt::format("{} rank {} is outside the plan's {} ranks", what, r.value, plan.world_size()));
  return {};
}

// Copies or casts: each of a rank of the plan, of no negative bytes.
template <class Work>
Result<void> check_copies(const std::vector<Work>& copies, const Plan& plan, std::string_view what) {
  for (const auto& c : copies) {
    REFIT_TRY(check_rank(c.rank, plan, what));
    if (c.bytes.value < 0)
      return out_of_range(fmt::format("{} of rank {}: negative bytes", what, c.rank.value));
  }
  return {};
}

Result<void> check_collective(const Collective& c, const Plan& plan) {
  if (c.ranks.size() < 2) return invalid("a collective needs at least two ranks");
  for (const Rank r : c.ranks) REFIT_TRY(check_rank(r, plan, "collective"));
  if (!(c.efficiency > 0 && c.efficiency <= 1))
    return out_of_range(fmt::format("collective efficiency must be in (0, 1], got {}", c.efficiency));
  if (c.bytes.value < 0) return out_of_range("collective bytes must be >= 0");
  return check_cost(c.latency, "collective latency");
}

Result<void> check_call(const Call& call, std::int32_t index, const Plan& plan) {
  if (call.queue < 0) return out_of_range(fmt::format("queue must be >= 0, got {}", call.queue));
  for (const std::int32_t a : call.after)
    if (a < 0 || a >= index) return invalid(fmt::format("'after' names call {}, not an earlier call", a));
  REFIT_TRY(check_cost(call.launch, "launch"));
  REFIT_TRY(check_cost(call.finish, "finish"));
  REFIT_TRY(check_copies(call.copies_before, plan, "copies_before"));
  REFIT_TRY(check_copies(call.copies_after, plan, "copies_after"));
  REFIT_TRY(check_copies(call.quantizes, plan, "quantizes"));
  for (const auto& q : call.quantizes)
    if (static_cast<std::size_t>(q.scheme) >= kQuantSchemeCount)
      return out_of_range(
          fmt::format("quantizes of rank {}: no FP8 format {}", q.rank.value, static_cast<int>(q.scheme)));
  if (call.collective && !call.transfers.empty())
    return invalid("a call moves transfers or runs a collective, not both");
  if (call.collective) REFIT_TRY(check_collective(*call.collective, plan));
  return {};
}

Result<void> assign_transfers(const Call& call, std::int32_t index, const Plan& plan,
                              std::vector<std::int32_t>& call_of) {
  for (const std::int32_t t : call.transfers) {
    if (t < 0 || at(t) >= plan.transfers.size())
      return out_of_range(
          fmt::format("transfer {} is not in the plan ({} transfers)", t, plan.transfers.size()));
    if (call_of[at(t)] >= 0)
      return invalid(fmt::format("transfer {} is already moved by call {}", t, call_of[at(t)]));
    call_of[at(t)] = index;
  }
  return {};
}

// A relay runs in the call of the transfer it forwards or a later one.
Result<void> check_relays(const Plan& plan, const CallSchedule& schedule,
                          const std::vector<std::int32_t>& call_of) {
  for (const auto& t : plan.transfers) {
    const std::int32_t own = call_of[at(t.id)];
    if (own < 0) continue;
    for (const std::int32_t u : t.upstream())
      if (call_of[at(u)] < 0 || call_of[at(u)] > own)
        return invalid(fmt::format("call {} ('{}'): transfer {} forwards transfer {}, which {}", own,
                                   schedule.calls[at(own)].label, t.id, u,
                                   call_of[at(u)] < 0 ? "no call moves" : "a later call moves"));
  }
  return {};
}

}  // namespace

Result<std::vector<std::int32_t>> call_of_each_transfer(const Plan& plan, const CallSchedule& schedule) {
  std::vector<std::int32_t> call_of(plan.transfers.size(), -1);
  for (std::size_t i = 0; i < schedule.calls.size(); ++i) {
    const auto index = static_cast<std::int32_t>(i);
    const auto& call = schedule.calls[i];
    const auto where = fmt::format("call {} ('{}')", i, call.label);
    REFIT_TRY_IN(check_call(call, index, plan), where);
    REFIT_TRY_IN(assign_transfers(call, index, plan, call_of), where);
  }
  REFIT_TRY(check_relays(plan, schedule, call_of));
  return call_of;
}

}  // namespace refit::sim
