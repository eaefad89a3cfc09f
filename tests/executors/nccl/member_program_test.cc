// The NCCL executor's program for a step over a membership (member_program.h), run on CPUs:
// every process's program, derived from the full plan and the membership alone, is executed by
// program_sim (each step's group matched across processes, under both stream orders).
//
// Expected maths: every member engine's destination shards end holding the verification pattern
// (all their bytes, element by element); a non-member's keep the junk they started with (nothing
// is written into them); every byte of the step's plan is sent and received once
// (check_coverage), each step's sends and receives pair up per communicator rank (check_pairing),
// so no group waits on a peer that does not post it, and a relay forwards only what an earlier
// step delivered (check_relays).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "engine_problems.h"
#include "nccl_fixture.h"
#include "program_checks.h"
#include "program_sim.h"
#include "refit/core/try.h"
#include "refit/executors/member_step.h"
#include "refit/executors/pattern.h"
#include "refit/planner/strategy.h"

namespace refit::nccl_detail::testing {
namespace {

// Members hold the pattern; a non-member's bytes are all the fixture's 0xEE junk.
Result<void> verify_members(const ReshardProblem& problem, const HostRanks& ranks,
                            const EngineMembership& m) {
  for (const auto& r : ranks.ranks) {
    const auto engine = m.engine_of[static_cast<std::size_t>(r.rank.value)];
    const bool member = engine == kNoEngine || m.members[static_cast<std::size_t>(engine)];
    for (const auto& d : r.buffers.destinations) {
      const auto& spec = problem.tensors()[d.tensor].tensor;
      const auto where = fmt::format("rank {}, tensor '{}' {}", r.rank.value, spec.name, d.box.to_string());
      if (member) {
        REFIT_TRY_IN(verify_pattern(d.tensor, spec.shape, d.box, dtype_size(spec.dtype), d.bytes), where);
      } else if (std::ranges::any_of(d.bytes, [](std::byte b) { return b != std::byte{0xEE}; })) {
        return mismatch(where + ": written, though its engine is no member");
      }
    }
  }
  return {};
}

TEST(NcclMemberProgram, MembersGetEveryByteAndNonMembersNone) {
  refit::testing::RandomProblems gen(37);
  std::mt19937 rng(37);
  std::int64_t refed = 0;
  std::int64_t non_members = 0;
  for (int i = 0; i < 30; ++i) {
    const auto [engines, sources, problem, cluster] = refit::testing::random_engine_case(gen);
    auto m = consecutive_engines(sources, problem.destination_ranks(), problem.destination_ranks() / engines)
                 .value();
    m.members = refit::testing::random_members(engines, rng);
    const auto* strategy = i % 3 == 0 ? "direct" : i % 3 == 1 ? "refit" : "gather-broadcast";
    const auto full =
        make_plan(strategy, problem, cluster, PlanOptions{.chunk = Bytes{gen.uniform(16, 120)}}).value();
    const auto step =
        member_step(full, m, std::vector<bool>(static_cast<std::size_t>(full.world_size()))).value();
    refed += std::ranges::count(step.full_id, kRefed);
    non_members += std::ranges::count(m.members, false);
    const auto mapping = static_cast<Mapping>(i % 3);  // one per process, all in one, pairs
    const Bytes staging{gen.uniform(64, 600)};
    for (const auto policy : {SimPolicy::kCopyFirst, SimPolicy::kCommFirst}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << i << ", " << strategy << ", staging " << staging.value
                   << (policy == SimPolicy::kCopyFirst ? ", copy first" : ", comm first"));
      auto ranks = make_host_ranks(problem);
      const auto processes =
          make_member_processes(full, m, ranks, comm_map(mapping, full.world_size()), staging);
      ASSERT_TRUE(processes) << processes.error().message;
      // The step schedule made from the step's plan: every byte of it sent and received once, in
      // groups that pair up, relays forwarding only what an earlier step delivered.
      for (const auto& checked : {check_coverage(step.plan, *processes), check_pairing(*processes),
                                  check_relays(step.plan, *processes)})
        EXPECT_TRUE(checked) << checked.error().message;
      const auto ran = simulate(processes->sim(), policy);
      ASSERT_TRUE(ran) << ran.error().message;
      const auto verified = verify_members(problem, ranks, m);
      EXPECT_TRUE(verified) << verified.error().message;
    }
  }
  // Not vacuous: engines were left out, and members' data came through them and was re-fed.
  EXPECT_GT(non_members, 0);
  EXPECT_GT(refed, 0);
}

}  // namespace
}  // namespace refit::nccl_detail::testing
