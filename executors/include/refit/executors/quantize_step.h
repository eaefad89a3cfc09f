#pragma once
// FP8 at the landing ranks on host memory: a rank program's quantize step (lowering/rank_program.h)
// run by the CPU quantizer, from the rank's bf16 landing copies into its fp8 values and scales.
// The UCX executor runs it once the step's waits have landed.
#include "refit/lowering/host_copy.h"
#include "refit/lowering/rank_program.h"

namespace refit {

// Quantizes every block of `step` where the rank's destination buffers lie in this process.
// Preconditions: `step` is one of program.quantize_steps(), and `buffers` are the program's.
void run_quantize_step(const lowering::RankProgram& program, const lowering::QuantizeStep& step,
                       const lowering::HostBuffers& buffers);

}  // namespace refit
