// The NCCL executor's delta step, run on CPUs: each hop of a delta refit moves its pieces'
// payloads as a plan of their own (delta_step.h: one byte tensor per transfer of the refit's plan,
// the pieces back to back), handed to the NCCL executor whole at the sender and at the receiver
// (delta_step_buffers, as DeltaExecutor hands them over). For a direct plan (one round) and a
// relayed refit plan (one round of two hops: the relays forward what arrived in the first), with
// payload sizes drawn at random (empty pieces among them), the NCCL program of every hop and every
// mapping of plan ranks onto
// processes is checked as the dense refit's is (program_checks.h) and simulated in both stream
// orders: every receiver ends with every payload byte its sender had, and nothing is packed or
// unpacked (each chunk is a run of a payload buffer, sent and received where it lies).
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "delta_problem.h"
#include "nccl_fixture.h"
#include "program_checks.h"
#include "program_sim.h"
#include "refit/delta/payload.h"
#include "refit/executors/delta_schedule.h"
#include "refit/executors/delta_step.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"

namespace refit::nccl_detail::testing {
namespace {

// A hop's payload size per piece of the plan (one round): for the hop's pieces a size in [0, the
// largest payload of the GPU codec] (a tenth of them 0: unchanged), 0 for the others.
std::vector<std::int64_t> hop_sizes(const Plan& plan, std::int32_t hop, std::mt19937_64& rng) {
  const auto schedule = delta_schedule(plan);
  std::vector<std::int64_t> sizes;
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments) {
      const auto largest = kDeltaHeaderBytes + plan.segment_bytes(s).value;
      const bool moves = schedule.hop[static_cast<std::size_t>(t.id)] == hop && rng() % 10 != 0;
      sizes.push_back(moves ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(largest + 1)) : 0);
    }
  return sizes;
}

// Every rank's payload memory for `step`, by (rank, transfer of the refit's plan): the senders'
// random bytes, the receivers' 0xEE.
struct Payloads {
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::byte>> memory;
  HostRanks ranks;
};

Payloads payloads_of(const DeltaStep& step, std::int32_t world, std::mt19937_64& rng) {
  Payloads p;
  for (std::size_t k = 0; k < step.plan.transfers.size(); ++k) {
    const auto& t = step.plan.transfers[k];
    const auto bytes = static_cast<std::size_t>(t.bytes.value);
    auto& sent = p.memory[{t.sender.value, step.carries[k]}];
    for (std::size_t i = 0; i < bytes; ++i) sent.push_back(static_cast<std::byte>(rng()));
    p.memory[{t.receiver.value, step.carries[k]}].assign(bytes, std::byte{0xEE});
  }
  for (std::int32_t r = 0; r < world; ++r)
    p.ranks.ranks.push_back(LocalRankBuffers{
        .rank = Rank{r},
        .buffers = delta_step_buffers(step, Rank{r}, MemoryKind::kHost, [&p, r](std::int32_t t) {
          return p.memory.at({r, t}).data();
        })});
  return p;
}

void expect_hop_delivers(const Plan& plan, std::int32_t hop, std::mt19937_64& rng) {
  const auto step = delta_step(plan, hop_sizes(plan, hop, rng)).value();
  ASSERT_FALSE(step.plan.transfers.empty());
  for (const auto mapping : {Mapping::kOnePerProcess, Mapping::kPairs, Mapping::kAllInOne})
    for (const auto policy : {SimPolicy::kCopyFirst, SimPolicy::kCommFirst}) {
      SCOPED_TRACE(::testing::Message() << "hop " << hop << ", mapping " << static_cast<int>(mapping)
                                        << ", policy " << static_cast<int>(policy));
      auto p = payloads_of(step, plan.world_size(), rng);
      const auto processes =
          make_processes(step.plan, p.ranks, comm_map(mapping, plan.world_size()), Bytes{2048});
      ASSERT_TRUE(processes) << processes.error().message;
      for (const auto& checked :
           {check_coverage(step.plan, *processes), check_pairing(*processes),
            check_relays(step.plan, *processes), check_staging(*processes, Bytes{2048})})
        EXPECT_TRUE(checked) << checked.error().message;
      for (const auto& program : processes->programs)
        for (const auto& op : program.ops) EXPECT_FALSE(std::holds_alternative<CopyBatch>(op));
      const auto ran = simulate(processes->sim(), policy);
      ASSERT_TRUE(ran) << ran.error().message;
      for (std::size_t k = 0; k < step.plan.transfers.size(); ++k) {
        const auto& t = step.plan.transfers[k];
        EXPECT_EQ(p.memory.at({t.receiver.value, step.carries[k]}),
                  p.memory.at({t.sender.value, step.carries[k]}))
            << "transfer " << step.carries[k];
      }
    }
}

TEST(NcclDeltaStep, EveryHopsPayloadsReachTheirReceiversWhereTheyLie) {
  const auto problem = refit::testing::delta_problem();
  const auto cluster = refit::testing::make_test_cluster(2, 2, 2, 2);
  std::mt19937_64 rng(34);
  for (const auto* strategy : {"direct", "refit"}) {
    SCOPED_TRACE(strategy);
    const auto plan = make_plan(strategy, problem, cluster, PlanOptions{.chunk = Bytes{512}}).value();
    const auto schedule = delta_schedule(plan);
    ASSERT_EQ(schedule.rounds(), 1);
    const auto hops = schedule.hops.front();
    EXPECT_EQ(hops, std::string_view(strategy) == "refit" ? 2 : 1);
    for (std::int32_t hop = 0; hop < hops; ++hop)
      for (int draw = 0; draw < 4; ++draw) expect_hop_delivers(plan, hop, rng);
  }
}

}  // namespace
}  // namespace refit::nccl_detail::testing
