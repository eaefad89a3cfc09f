#pragma once
// Properties of the programs of all processes of one plan, checked from the recorded operations
// alone (brute force, independent of the translation's own bookkeeping).
#include "nccl_fixture.h"
#include "refit/core/error.h"
#include "refit/planner/plan.h"

namespace refit::nccl_detail::testing {

// Every byte of every transfer is sent once, by its sender, and received once, by its receiver.
[[nodiscard]] Result<void> check_coverage(const Plan& plan, const Processes& p);
// In every step, the sends from one communicator rank to another and that rank's receives from it
// are the same chunks, of the same sizes, in the same order; each step is one group per process.
[[nodiscard]] Result<void> check_pairing(const Processes& p);
// Every element a chunk forwards was received, in the chunk that carried it, in an earlier step.
[[nodiscard]] Result<void> check_relays(const Plan& plan, const Processes& p);
// The copies of one batch run concurrently on the GPU: none may read or write bytes that another
// copy of the batch writes (the simulation runs them one after the other and could not tell).
[[nodiscard]] Result<void> check_batches(const Processes& p);
// Staging stays inside its bound: each plan rank's chunks within its own `staging` bytes, and no
// two chunks of one step on top of each other.
[[nodiscard]] Result<void> check_staging(const Processes& p, Bytes staging);

}  // namespace refit::nccl_detail::testing
