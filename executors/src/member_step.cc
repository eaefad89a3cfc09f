#include "refit/executors/member_step.h"
#include "refit/core/index.h"

#include <utility>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/repair_plan.h"

namespace refit {
namespace {

// The transfers not dropped, renumbered; a kept transfer forwards only kept ones (a transfer that
// forwards a dropped one is dropped), so every via has a new id.
void keep(const Plan& full, const std::vector<bool>& dropped, MemberStep& out) {
  std::vector<std::int32_t> new_id(full.transfers.size(), -1);
  for (const Transfer& t : full.transfers) {
    if (dropped[at(t.id)]) continue;
    Transfer kept = t;
    kept.id = static_cast<std::int32_t>(out.plan.transfers.size());
    for (Segment& s : kept.segments)
      if (s.via != kFromSourceShard) s.via = new_id[at(s.via)];
    new_id[at(t.id)] = kept.id;
    out.full_id.push_back(t.id);
    out.plan.transfers.push_back(std::move(kept));
  }
}

}  // namespace

Result<MemberStep> member_step(const Plan& plan, const EngineMembership& m, const std::vector<bool>& gone) {
  REFIT_TRY(check_engine_membership(m, plan.world_size()));
  if (std::cmp_not_equal(gone.size(), plan.world_size()))
    return mismatch(fmt::format("{} ranks are marked gone or not, the plan has {} ranks", gone.size(),
                                plan.world_size()));
  const auto excluded = excluded_ranks(m, gone);
  const auto dropped = dropped_transfers(plan, excluded);
  Plan refeed = repair_plan(plan, excluded, dropped);
  const std::vector<bool> refeed_dropped(refeed.transfers.size(), false);
  MemberStep out{.plan = plan.without_transfers(),
                 .full_id = {},
                 .engines = repaired_outcomes(plan, dropped, refeed, refeed_dropped, m, gone)};
  keep(plan, dropped, out);
  for (Transfer& t : refeed.transfers) {
    t.id = static_cast<std::int32_t>(out.plan.transfers.size());
    out.full_id.push_back(kRefed);
    out.plan.transfers.push_back(std::move(t));
  }
  return out;
}

}  // namespace refit
