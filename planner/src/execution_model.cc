#include "refit/planner/execution_model.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace refit {
namespace {

// A put costs a fraction of a microsecond on top of its bytes, while staging costs two more
// copies of every byte: UCX puts a chunk run by run unless its runs are both many and much
// shorter than a page.
constexpr ZeroCopyRule kManyPuts{.max_runs = 16, .min_mean_run = Bytes{4096}};
// One ncclSend or ncclRecv per chunk: in place only when the chunk is one run.
constexpr ZeroCopyRule kOneRun{};

// The grant window of refit's UCX executor (chunks per sender): the executor grants exactly this
// many (executors/ucx/src/engine.cc gives it to ReceiveBook from here).
constexpr std::int32_t kUcxGrantWindow = 16;
// The chunks per rank and step of refit's NCCL executor, so that one NCCL group stays a moderate
// size: the executor schedules with exactly this many (executors/nccl/src/translate.cc reads it
// from here).
constexpr std::int32_t kNcclStepChunks = 256;

constexpr std::array<ExecutionModel, 3> kModels{{
    {.id = ExecutionModelId::kRefitUcx,
     .name = "refit-ucx",
     .description = "refit's UCX executor: each (sender, receiver) pair one stream in plan order, "
                    "16 chunks granted ahead, a sender's pairs sharing its links by their bytes, "
                    "a chunk put run by run unless its runs are many and short",
     .pair_window = kUcxGrantWindow,
     .pairs_share_by_bytes = true,
     .quantizes_on_sending_thread = true,
     .zero_copy = kManyPuts},
    {.id = ExecutionModelId::kRefitNccl,
     .name = "refit-nccl",
     .description =
         "refit's NCCL executor: grouped ncclSend/ncclRecv per step, up to 256 chunks and "
         "half the staging per rank and step, a chunk in place only when it is one run of its buffer",
     .pair_window = 0,
     .step_chunks = kNcclStepChunks,
     .zero_copy = kOneRun},
    {.id = ExecutionModelId::kNcclCollectives,
     .name = "nccl-collectives",
     .description = "today's NCCL collectives (M2N reshard, broadcast): every ring step a channel "
                    "of its own, a chunk in place only when it is one run of its buffer",
     .pair_window = 0,
     .zero_copy = kOneRun,
     .refit_executor = false},
}};

}  // namespace

std::span<const ExecutionModel> execution_models() { return kModels; }

const ExecutionModel& execution_model(ExecutionModelId id) { return kModels[static_cast<std::size_t>(id)]; }

const ExecutionModel* find_execution_model(std::string_view name) {
  const auto* it = std::ranges::find(kModels, name, &ExecutionModel::name);
  return it == kModels.end() ? nullptr : it;
}

const ExecutionModel& refit_executor_model(const ExecutionModel& plan_model) {
  return plan_model.refit_executor ? plan_model : execution_model(ExecutionModelId::kRefitUcx);
}

Result<void> check_pair_window(const ExecutionModel& model, std::int32_t window) {
  if (model.step_chunks == 0 || window <= 0) return {};
  return invalid(
      fmt::format("execution model '{}' paces chunks by its step schedule, not by a window of {} "
                  "chunks per pair",
                  model.name, window));
}

}  // namespace refit
