#pragma once
// What a rank program chose, in numbers a user can read: `refit plan --explain RANK`.
#include <array>
#include <cstdint>
#include <string>

#include "refit/lowering/rank_program.h"

namespace refit::lowering {

// Chunks of one side and what became of them.
struct SideSummary {
  std::int64_t transfers = 0;
  std::int64_t chunks = 0;
  Bytes bytes;
  std::int64_t in_place = 0;  // chunks
  std::int64_t staged = 0;
  Bytes staged_bytes;
  std::array<std::int64_t, 5> by_reason{};  // chunks per CopyReason
  std::int64_t runs = 0;                    // transport operations of the in-place chunks
};

struct ProgramSummary {
  Rank rank;
  SideSummary sends;
  SideSummary receives;
  std::int64_t waiting_chunks = 0;  // sent chunks that forward received data and wait for it
  std::int64_t extract_transfers = 0;
  Bytes scratch;
  StagingDemand send_staging;
  StagingDemand receive_staging;
};

ProgramSummary summarize(const RankProgram& program);

// Several lines: the zero-copy rule, both sides with their copy paths and reasons, relays,
// scratch and staging.
std::string explain(const RankProgram& program, const ExecutionModel& model);

}  // namespace refit::lowering
