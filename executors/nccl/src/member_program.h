#pragma once
// One process's program for a step over a membership (member_step.h), from what prepare kept:
// the full plan, the process's view of its buffers and its quantize ops. The step's plan is
// lowered, scheduled and translated like any plan, so it gets the same step schedule guarantees
// (a group per step that every peer in it posts too). Pure C++: the executor issues the program
// through its CUDA backend, the CPU tests run it through program_sim.
#include <span>
#include <vector>

#include "local_view.h"
#include "program.h"
#include "refit/core/error.h"
#include "refit/executors/member_step.h"

namespace refit::nccl_detail {

struct MemberProgram {
  MemberStep step;
  Program program;  // self-contained: it refers to no plan
};

// `view` as prepared for the full plan; `comm_rank_of` the communicator ranks now (after a
// shrink, shrink_ranks.h; kNoCommRank for the `gone` plan ranks, whose engines the step leaves
// out). Errors name the membership or the rank at fault.
[[nodiscard]] Result<MemberProgram> member_program(const Plan& full, const EngineMembership& m,
                                                   const std::vector<bool>& gone, LocalView view,
                                                   const CommRankMap& comm_rank_of,
                                                   std::span<const QuantizedBox> quantize, Bytes staging);

}  // namespace refit::nccl_detail
