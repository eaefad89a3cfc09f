#include "repair_program.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::ucx_detail {
namespace {

// Cuts `slots` to what the prepared region of `bytes` holds.
Result<void> fit_slots(StagingSlots& slots, std::int64_t bytes, Rank rank, std::string_view side) {
  if (slots.slots == 0) return {};
  const auto fit = bytes / slots.slot_bytes;
  if (fit == 0)
    return fail(ErrorCode::kRuntime,
                fmt::format("rank {}: the repair step needs a {} staging slot of {} B, but the prepared plan "
                            "registered {} B of it",
                            rank.value, side, slots.slot_bytes, bytes));
  slots.slots = std::min(slots.slots, fit);
  return {};
}

}  // namespace

Result<UcxProgram> make_repair_program(const Plan& repair, Rank rank, const RankBuffers& buffers,
                                       const UcxProgram& prepared, Bytes staging) {
  auto lowered =
      std::make_unique<lowering::LoweredPlan>(REFIT_TRY(lowering::LoweredPlan::make(repair, staging)));
  auto program = REFIT_TRY(make_ucx_program(std::move(lowered), rank, buffers));
  if (program.regions[program.scratch_region].bytes > prepared.regions[prepared.scratch_region].bytes)
    return fail(ErrorCode::kRuntime,
                fmt::format("rank {}: the repair step needs {} B of scratch, the prepared "
                            "plan registered {} B",
                            rank.value, program.regions[program.scratch_region].bytes,
                            prepared.regions[prepared.scratch_region].bytes));
  REFIT_TRY(fit_slots(program.receive_staging, prepared.regions[prepared.receive_staging_region].bytes, rank,
                      "receive"));
  REFIT_TRY(
      fit_slots(program.send_staging, prepared.regions[prepared.send_staging_region].bytes, rank, "send"));
  program.regions = prepared.regions;
  return program;
}

}  // namespace refit::ucx_detail
