#pragma once
// What the NCCL executor costs beyond its bytes, from runs that differ only in their chunks and
// steps: the fit both bench/nccl_plan_bench and `refit topo --discover --measure`
// (nccl_cost_timing.h) take.
#include <cstdint>
#include <optional>
#include <span>

#include "refit/core/units.h"

namespace refit::nccl_detail {

// One run of the NCCL executor: the chunks it sent (each also received, on one GPU), its steps
// and its time.
struct NcclRun {
  std::int64_t chunks = 0;
  std::int64_t steps = 0;
  Seconds time;
};

// t = fixed + chunks x per_chunk + steps x per_step, by least squares over runs.
struct NcclFit {
  Seconds fixed;
  Seconds per_chunk;
  Seconds per_step;
};

// nullopt when the runs do not tell chunks from steps.
[[nodiscard]] std::optional<NcclFit> fit_nccl_runs(std::span<const NcclRun> runs);

}  // namespace refit::nccl_detail
