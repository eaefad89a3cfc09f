#pragma once
// How whoever runs a plan runs it. A strategy names the execution model its plans are run with
// (strategy.h); the lowering takes its zero-copy rule from it, and the simulator costs a plan as
// that model runs it.
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit {

// When a chunk moves without a copy on one side: its bytes there form one run of a buffer, or at
// most `max_runs` runs, or runs of at least `min_mean_run` bytes on average. Otherwise it is
// packed into (or unpacked out of) staging: two more copies of every byte, against one transport
// operation per run.
struct ZeroCopyRule {
  std::int64_t max_runs = 1;
  Bytes min_mean_run{std::numeric_limits<std::int64_t>::max()};
};

// The executors of refit and the collectives the baselines stand for.
enum class ExecutionModelId : std::uint8_t {
  kRefitUcx,         // refit's UCX executor
  kRefitNccl,        // refit's NCCL executor
  kNcclCollectives,  // today's NCCL collectives (M2N reshard, broadcast)
};

struct ExecutionModel {
  ExecutionModelId id = ExecutionModelId::kRefitUcx;
  std::string_view name;         // "refit-ucx", "refit-nccl", "nccl-collectives"
  std::string_view description;  // one line for --help and --explain
  // Chunks a receiver grants each sender ahead: each (sender, receiver) pair sends its transfers
  // in plan order as one stream. 0: no per-pair queue, every transfer goes as soon as its data is
  // there, on a channel of its own.
  std::int32_t pair_window = 0;
  // How the pairs of one stream-running model (pair_window > 0) share a link they cross: false,
  // equally (as NIC queue pairs do when every one always has work posted); true, in proportion
  // to each pair's bytes in the plan, because the sender posts its next chunk to the pair
  // furthest behind in its share of its bytes (lowering/pair_pacing.h), so a NIC's pairs all
  // finish together instead of the small ones leaving the large ones to the end.
  bool pairs_share_by_bytes = false;
  // Chunks a rank sends and receives at most per step of a step schedule (lowering/step_schedule.h):
  // every rank posts its chunks step by step, one group a step, and a step ends when its group
  // has. 0: not paced by steps.
  std::int32_t step_chunks = 0;
  // A sender quantizes each weight box on the thread that makes its puts, just before the first
  // put that reads the box (executors/src/quantizing_executor.cc's send gate). Where such a put is
  // a copy that thread makes itself (between processes of one node, through shared memory: no
  // NIC or copy engine moves it), the thread quantizes and puts in turn, so the two add up
  // instead of overlapping. false: the quantizer runs beside the transfers (a GPU's kernels).
  bool quantizes_on_sending_thread = false;
  ZeroCopyRule zero_copy;
  // One of refit's own executors. refit's executors run every plan as one of theirs: a baseline's
  // plan, labelled with the collectives it stands for, runs as refit_executor_model() says.
  bool refit_executor = true;
};

// Every execution model, in ExecutionModelId order.
std::span<const ExecutionModel> execution_models();
const ExecutionModel& execution_model(ExecutionModelId id);
// nullptr for an unknown name.
const ExecutionModel* find_execution_model(std::string_view name);
// How refit's executors run `plan_model`'s plans: as it says where it is one of theirs, else as
// the UCX executor (refit run's default) does.
const ExecutionModel& refit_executor_model(const ExecutionModel& plan_model);

// Refuses a pair window (> 0) for a model that paces chunks by steps instead; the message names
// neither the option nor the field, which the caller adds.
[[nodiscard]] Result<void> check_pair_window(const ExecutionModel& model, std::int32_t window);

}  // namespace refit
