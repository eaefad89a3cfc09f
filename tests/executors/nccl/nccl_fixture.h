#pragma once
// Host buffers for every rank of a problem (sources filled with the test pattern, destinations
// with junk), the processes a rank mapping makes of them, and their programs.
#include <cstddef>
#include <memory>
#include <vector>

#include "local_view.h"
#include "program.h"
#include "program_sim.h"
#include "refit/core/problem.h"
#include "refit/executors/membership.h"
#include "refit/planner/plan.h"

namespace refit::nccl_detail::testing {

struct HostRanks {
  std::vector<std::vector<std::byte>> memory;  // backing store of every shard
  std::vector<LocalRankBuffers> ranks;         // by plan rank
};
HostRanks make_host_ranks(const ReshardProblem& problem);

// Every destination shard holds the pattern; the error names the rank and tensor.
[[nodiscard]] Result<void> verify_destinations(const ReshardProblem& problem, const HostRanks& ranks);

// Plan rank -> communicator rank.
enum class Mapping {
  kOnePerProcess,  // plan rank r is communicator rank r
  kAllInOne,       // one process, a communicator of size 1, every send is to itself
  kPairs,          // plan ranks 2k and 2k+1 share communicator rank k
};
CommRankMap comm_map(Mapping m, std::int32_t world);

struct Processes {
  std::vector<LocalView> views;  // by communicator rank
  std::vector<Program> programs;
  // The executor's memory of fp8 values and scales (FP8 in flight), filled with 0xEE junk.
  std::vector<std::unique_ptr<std::vector<std::byte>>> quantized;
  std::vector<SimProcess> sim() const;
};
// As the executor's prepare makes them, weights quantized at the senders included.
[[nodiscard]] Result<Processes> make_processes(const Plan& plan, HostRanks& ranks, const CommRankMap& map,
                                               Bytes staging);
// As the executor makes them for a step over membership `m` (member_program.h), from the views
// prepared for `full`; every rank alive, none gone.
[[nodiscard]] Result<Processes> make_member_processes(const Plan& full, const EngineMembership& m,
                                                      HostRanks& ranks, const CommRankMap& map,
                                                      Bytes staging);

}  // namespace refit::nccl_detail::testing
