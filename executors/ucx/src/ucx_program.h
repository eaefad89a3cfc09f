#pragma once
// The lowering's rank program as the UCX executor runs it, worked out once at prepare: the
// regions it registers (the caller's buffers: shards or parameters, then executor scratch and staging), each
// in-place chunk's runs as offsets in those regions (what a grant tells the sender, what its puts read),
// staging slots, and what forwarding chunks wait for, by receive. Plain data without UCX.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/executor.h"
#include "refit/lowering/host_copy.h"
#include "refit/lowering/rank_program.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/plan.h"
#include "wire.h"

namespace refit::ucx_detail {

// Registered memory of the rank: the caller's shards, then memory the executor allocates.
struct RegionSpec {
  std::byte* user = nullptr;  // caller memory; nullptr: the executor allocates `bytes`
  std::int64_t bytes = 0;
  bool remote = false;  // peers put into it, so its key is published
};

using lowering::Receive;
using lowering::Send;

// A forwarding chunk needs the first `chunks` chunks of receives[receive] to have landed; a
// receive index past the receives is the rank's quantize step (receive - receives().size()),
// whose chunks land when it has run.
struct ChunkWait {
  std::int32_t receive = 0;
  std::int64_t chunks = 0;
};

// Slots of staging memory, each able to hold any chunk that needs one.
struct StagingSlots {
  std::int64_t slot_bytes = 0;
  std::int64_t slots = 0;
};

struct UcxProgram {
  std::unique_ptr<lowering::LoweredPlan> lowered;  // on the heap: `rank` refers to it
  std::optional<lowering::RankProgram> rank;
  std::vector<RegionSpec> regions;
  std::size_t source_buffers = 0;       // the first regions: the side's buffers (rank_buffers.h)
  std::size_t destination_buffers = 0;  // the next ones
  std::uint32_t scratch_region = 0;
  std::uint32_t receive_staging_region = 0;
  std::uint32_t send_staging_region = 0;
  StagingSlots receive_staging;
  StagingSlots send_staging;
  std::vector<std::vector<std::vector<Run>>> receive_runs;  // per receive, per chunk (in place)
  std::vector<std::vector<std::vector<Run>>> send_runs;     // per send, per chunk; empty: packed
  std::vector<std::vector<std::vector<ChunkWait>>> waits;   // per send, per chunk
  std::vector<std::vector<ChunkWait>> step_waits;           // per quantize step

  const std::vector<lowering::Receive>& receives() const { return rank->receives(); }
  const std::vector<lowering::Send>& sends() const { return rank->sends(); }
  const std::vector<lowering::QuantizeStep>& steps() const { return rank->quantize_steps(); }
  const lowering::MessageLayout& layout(std::int32_t transfer) const { return lowered->layout(transfer); }
  // The host buffers of the lowering's copies, from the regions' base addresses.
  lowering::HostBuffers host(std::span<std::byte* const> bases) const;
};

// The rank's program of a lowered plan (LoweredPlan::make, the gate that checks the plan), at
// its staging, packing and unpacking the chunks that `rule` does not keep in place (the UCX
// executor's own rule unless told). Errors name the tensor, transfer and rank: buffers that do
// not fit the plan (checked as every executor checks them), data the rank must send but does not
// hold. Precondition: the lowered plan's plan outlives the program.
[[nodiscard]] Result<UcxProgram> make_ucx_program(
    std::unique_ptr<lowering::LoweredPlan> lowered, Rank rank, const RankBuffers& buffers,
    const ZeroCopyRule& rule = execution_model(ExecutionModelId::kRefitUcx).zero_copy);

}  // namespace refit::ucx_detail
