#include "repair_program.h"

#include <algorithm>
#include <limits>

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

// Whether every staging slot `program` needs fits in what `prepared` registered.
bool staging_fits(const UcxProgram& program, const UcxProgram& prepared) {
  const auto fits = [&](const StagingSlots& slots, std::uint32_t region) {
    return slots.slots == 0 || prepared.regions[region].bytes >= slots.slot_bytes;
  };
  return fits(program.receive_staging, prepared.receive_staging_region) &&
         fits(program.send_staging, prepared.send_staging_region);
}

Result<UcxProgram> program_of(const Plan& repair, Rank rank, const RankBuffers& buffers, Bytes staging,
                              const ZeroCopyRule& rule) {
  auto lowered =
      std::make_unique<lowering::LoweredPlan>(REFIT_TRY(lowering::LoweredPlan::make(repair, staging)));
  return make_ucx_program(std::move(lowered), rank, buffers, rule);
}

// Every chunk moved run by run where it lies, so that it needs no staging slot.
constexpr ZeroCopyRule kEveryChunkInPlace{.max_runs = std::numeric_limits<std::int64_t>::max(),
                                          .min_mean_run = Bytes{0}};

}  // namespace

void reserve_repair_staging(UcxProgram& prepared) {
  std::int64_t largest = 0;
  for (const auto& r : prepared.receives())
    for (const auto& c : r.chunks) largest = std::max(largest, c.bytes);
  auto& region = prepared.regions[prepared.receive_staging_region];
  region.bytes = std::max(region.bytes, largest);
}

Result<UcxProgram> make_repair_program(const Plan& repair, Rank rank, const RankBuffers& buffers,
                                       const UcxProgram& prepared, Bytes staging) {
  // The repair's senders and receivers are not the full plan's: a rank may pack or unpack chunks
  // now that it kept in place before, and it cannot register a staging region for them. Each side
  // decides alone how it moves a chunk, so a rank that would need more than it registered moves
  // all of its chunks in place, one transport operation per run.
  auto program = REFIT_TRY(
      program_of(repair, rank, buffers, staging, execution_model(ExecutionModelId::kRefitUcx).zero_copy));
  if (!staging_fits(program, prepared))
    program = REFIT_TRY(program_of(repair, rank, buffers, staging, kEveryChunkInPlace));
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
