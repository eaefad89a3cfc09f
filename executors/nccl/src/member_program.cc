#include "member_program.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "translate.h"

namespace refit::nccl_detail {

Result<MemberProgram> member_program(const Plan& full, const EngineMembership& m,
                                     const std::vector<bool>& gone, LocalView view,
                                     const CommRankMap& comm_rank_of, std::span<const QuantizedBox> quantize,
                                     Bytes staging) {
  if (comm_rank_of.size() != view.comm_rank_of.size())
    return mismatch(fmt::format("the communicator ranks name {} plan ranks, the plan has {}",
                                comm_rank_of.size(), view.comm_rank_of.size()));
  auto step = REFIT_TRY_IN(member_step(full, m, gone), fmt::format("membership epoch {}", m.epoch));
  view.comm_rank_of = comm_rank_of;
  const auto lowered = REFIT_TRY(lowering::LoweredPlan::make(step.plan, staging));
  auto program = REFIT_TRY(build_program(lowered, view, quantize));
  return MemberProgram{.step = std::move(step), .program = std::move(program)};
}

}  // namespace refit::nccl_detail
