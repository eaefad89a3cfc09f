#pragma once
// FP8 at the landing ranks on host memory: a rank program's quantise step (lowering/rank_program.h)
// run by the CPU quantizer, from the rank's bf16 landing copies into its fp8 values and scales.
// The UCX executor runs it once the step's waits have landed.
#include "refit/lowering/host_copy.h"
#include "refit/lowering/rank_program.h"

namespace refit {

// Quantises every block of `step` where the rank's destination buffers lie in this process.
// Preconditions: `step` is one of program.quantise_steps(), and `buffers` are the program's.
void run_quantise_step(const lowering::RankProgram& program, const lowering::QuantiseStep& step,
                       const lowering::HostBuffers& buffers);

}  // namespace refit
