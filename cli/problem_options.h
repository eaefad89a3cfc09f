#pragma once
// The PROBLEM options shared by the commands that take a reshard problem (plan, simulate, run),
// registered onto a ProblemSource that the facade loads (refit/facade/problem_source.h):
//   --model NAME|config.json --train "tp=4,pp=8,ep=16" --infer "tp=8,dp=16"
//       [--dtype X] [--per-expert] [--mtp]
//   | --manifest tensors.json
#include <CLI/CLI.hpp>

#include "refit/facade/problem_source.h"

namespace refit::cli {

// What --train and --infer take, for every command that has them.
inline constexpr const char* kTrainHelp =
    "Megatron training sizes: tp,pp,ep,etp (default tp),cp,dp,pp_first,pp_last,vp,layout,"
    "vocab_divisible_by (default 128; off: unpadded, as Megatron-Bridge),spec=te|local (layer spec),"
    "glu_interleave (moe_mlp_glu_interleave_size) (e.g. tp=4,pp=8,ep=16)";
inline constexpr const char* kInferHelp =
    "vLLM inference sizes: tp,dp (one engine's data parallel),engines,ep=on|off,"
    "placement=linear|round_robin,all2all (the all2all backend) (e.g. tp=8,engines=16)";

// Registers --dtype, --per-expert and --mtp on `cmd` (or on an option group).
void add_model_options(CLI::App* cmd, ModelOptions& options);
// Registers the PROBLEM options in an option group of `cmd`; `source` must outlive parsing.
void add_problem_options(CLI::App* cmd, ProblemSource& source);

}  // namespace refit::cli
