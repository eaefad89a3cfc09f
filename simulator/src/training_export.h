#pragma once
// What Megatron-Bridge's export runs to hand rank 0 every full tensor, read off the problem's
// source layouts (docs/deployed_refit.md, A1): per conversion task a pipeline broadcast from the
// owning stage, then all-gathers over the sharded mesh axes (tensor parallel first, then expert
// parallel), serial on every rank. Every (TP, EP, DP) coordinate runs the same chain at the same
// time on links of its own, so rank 0's chain stands for all of them.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"

namespace refit::sim {

// Pipeline stages: the training ranks split so that every tensor's source ranks lie in one.
struct TrainingStages {
  std::vector<std::vector<Rank>> ranks;       // per stage, ascending; stages by their first rank
  std::vector<std::int32_t> stage_of_tensor;  // per problem tensor
};

// Refuses stages of different sizes (Megatron's stages are equal), naming two of them.
[[nodiscard]] Result<TrainingStages> find_stages(const ReshardProblem& problem);

struct GatherStep {
  std::vector<Rank> ring;  // rank 0's group along one sharded mesh axis
  Bytes gathered;          // the total after this step (nccl-tests' S)
};

// One conversion task: one tensor, or one slice along dim 0 of a stacked (3-d and more) expert
// tensor, which Bridge converts one local expert at a time.
struct ExportTask {
  std::int32_t tensor = 0;
  Bytes full;                       // bytes of the full HF tensors the task yields
  std::int64_t hf_tensors = 1;      // how many it yields (a stacked slice: one per gathered expert)
  Bytes local;                      // the owning rank's shard of them
  std::vector<Rank> pipeline;       // broadcast ring, root first; empty with one stage
  std::vector<GatherStep> gathers;  // in order
};

// The tasks of `tensors` (problem indices), in that order.
[[nodiscard]] std::vector<ExportTask> export_tasks(const ReshardProblem& problem,
                                                   const TrainingStages& stages,
                                                   const std::vector<std::int32_t>& tensors);

}  // namespace refit::sim
