#pragma once
// What a rank program chose, in numbers a user can read: `refit plan --explain RANK`.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/lowering/rank_program.h"
#include "refit/planner/plan.h"

namespace refit::lowering {

// Chunks of one side and what became of them.
struct SideSummary {
  std::int64_t transfers = 0;
  std::int64_t chunks = 0;
  Bytes bytes;
  std::int64_t in_place = 0;  // chunks
  std::int64_t staged = 0;
  Bytes staged_bytes;
  std::array<std::int64_t, kCopyReasons> by_reason{};  // chunks per CopyReason
  std::int64_t runs = 0;                               // transport operations of the in-place chunks
};

struct ProgramSummary {
  Rank rank;
  SideSummary sends;
  SideSummary receives;
  std::int64_t waiting_chunks = 0;  // sent chunks that forward received data and wait for it
  std::int64_t extract_transfers = 0;
  std::int64_t quantize_steps = 0;  // FP8 at the landing ranks: steps the rank runs
  std::int64_t quantized_elements = 0;
  Bytes scratch;
  StagingDemand send_staging;
  StagingDemand receive_staging;
};

ProgramSummary summarize(const RankProgram& program);

// Several lines: the zero-copy rule, both sides with their copy paths and reasons, relays,
// scratch and staging.
std::string explain(const RankProgram& program, const ExecutionModel& model);

// What `refit plan` (and the Python Plan.summary) report of the lowering: the plan's chunks, and
// with `rank` that rank's program, summarised and explained, under the plan's execution model.
struct PlanLowering {
  std::int64_t messages = 0;  // chunks of all transfers, as every executor cuts them
  std::optional<ProgramSummary> summary{};
  std::string text{};
};

// Refuses a rank outside the plan, naming --explain.
[[nodiscard]] Result<PlanLowering> explain_plan(const Plan& plan, const ReshardProblem& problem,
                                                std::optional<std::int32_t> rank);

}  // namespace refit::lowering
