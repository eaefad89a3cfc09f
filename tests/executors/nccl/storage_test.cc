// The NCCL executor's program over framework parameters (models/storage_map.h), run on CPUs:
// Megatron's parameters of tiny models to vLLM's, every strategy, rank mapping and a few staging
// sizes; every destination region must hold its pattern and every padding byte stay zero.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nccl_fixture.h"
#include "program_sim.h"
#include "refit/core/try.h"
#include "refit/executors/framework_buffers.h"
#include "refit/facade/problem_source.h"
#include "refit/models/problem_builder.h"
#include "refit/models/storage_map.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"

namespace refit::nccl_detail::testing {
namespace {

struct Stored {
  ReshardProblem problem;
  models::StorageMap megatron;
  models::StorageMap vllm;
};

// A case: its model read and quantized as `refit run` would with the case's PROBLEM options.
Result<Stored> stored(const std::string& file, const std::string& train, const std::string& infer,
                      const ModelOptions& options) {
  const auto m = REFIT_TRY(load_model(std::string(REFIT_TEST_DATA_DIR) + "/models/" + file, options));
  const auto t = REFIT_TRY(models::parse_megatron(train));
  const auto i = REFIT_TRY(models::parse_vllm(infer));
  auto problem = REFIT_TRY(apply_quantization(REFIT_TRY(models::build_problem(m, t, i)), options));
  auto megatron = REFIT_TRY(models::megatron_storage(m, t, problem));
  auto vllm = REFIT_TRY(models::vllm_storage(m, i, problem));
  return Stored{.problem = std::move(problem), .megatron = std::move(megatron), .vllm = std::move(vllm)};
}

void run_and_verify(const Stored& s, const Plan& plan, Mapping mapping, Bytes staging) {
  const HostAllocator heap = [](Bytes b) -> Result<std::unique_ptr<HostAllocation>> {
    return heap_allocation(b);
  };
  std::vector<FrameworkBuffers> memory;
  HostRanks ranks;
  for (std::int32_t r = 0; r < s.problem.world_size(); ++r) {
    const bool source = s.problem.is_source(Rank{r});
    auto m = FrameworkBuffers::allocate(s.problem, source ? s.megatron : s.vllm, Rank{r}, heap).value();
    m.fill_pattern(s.problem);
    ranks.ranks.push_back(LocalRankBuffers{.rank = Rank{r}, .buffers = m.buffers()});
    memory.push_back(std::move(m));
  }
  auto processes = make_processes(plan, ranks, comm_map(mapping, plan.world_size()), staging);
  ASSERT_TRUE(processes) << processes.error().message;
  const auto sim = processes->sim();
  const auto ran = simulate(sim, SimPolicy::kCopyFirst);
  ASSERT_TRUE(ran) << ran.error().message;
  for (std::size_t r = 0; r < memory.size(); ++r) {
    const auto ok = memory[r].verify(s.problem);
    EXPECT_TRUE(ok) << "rank " << r << ": " << ok.error().message;
  }
}

// The storage cases tests/python/test_storage.py checks against the numpy reference of the
// frameworks' layouts (tests/data/storage_cases.json): every one through the NCCL program too.
std::vector<Stored> storage_cases() {
  std::ifstream in(std::string(REFIT_TEST_DATA_DIR) + "/storage_cases.json");
  const auto doc = nlohmann::json::parse(in);
  std::vector<Stored> out;
  for (const auto& c : doc.at("cases")) {
    ModelOptions options;
    const auto& given = c.at("options");
    for (std::size_t k = 0; k < given.size(); ++k) {
      options.per_expert = options.per_expert || given[k] == "--per-expert";
      options.mtp = options.mtp || given[k] == "--mtp";
      if (k + 1 == given.size()) continue;
      if (given[k] == "--quantize") options.quantize = given[k + 1];
      if (given[k] == "--quantize-at") options.quantize_at = given[k + 1];
    }
    auto s = stored(c.at("config"), c.at("train"), c.at("infer"), options);
    if (s)
      out.push_back(std::move(*s));
    else
      ADD_FAILURE() << c.at("config") << " " << c.at("train") << " -> " << c.at("infer") << ": "
                    << s.error().message;
  }
  return out;
}

class StoredEveryStrategy : public ::testing::TestWithParam<std::string_view> {};

// Every storage case in domains of two, both rank mappings, staging that cuts pieces and staging
// that does not.
TEST_P(StoredEveryStrategy, FrameworkParametersRunToTheRightBytesOnCpus) {
  const auto cases = storage_cases();
  ASSERT_GE(cases.size(), 25u);
  // The FP8-trained cases move Transformer Engine's fp8 values and padded scales.
  ASSERT_TRUE(std::ranges::any_of(cases, [](const Stored& s) {
    return std::ranges::any_of(s.problem.tensors(), [](const TensorReshard& t) {
      return t.tensor.quantization && t.tensor.quantization->site == QuantSite::kTraining;
    });
  }));
  for (const auto& s : cases) {
    const auto cluster = refit::testing::make_test_cluster(
        (s.problem.world_size() + 1) / 2, 2, s.problem.source_ranks(), s.problem.destination_ranks());
    const auto plan = make_plan(GetParam(), s.problem, cluster,
                                PlanOptions{.chunk = Bytes{512}, .broadcast_buffer = Bytes{1 << 20}})
                          .value();
    for (const auto mapping : {Mapping::kOnePerProcess, Mapping::kPairs})
      for (const auto staging : {Bytes{1024}, Bytes{1 << 20}}) {
        SCOPED_TRACE(::testing::Message()
                     << "mapping " << static_cast<int>(mapping) << ", staging " << staging.value);
        run_and_verify(s, plan, mapping, staging);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Nccl, StoredEveryStrategy, ::testing::ValuesIn(strategy_names()),
                         [](const auto& info) {
                           std::string name(info.param);
                           std::ranges::replace(name, '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace refit::nccl_detail::testing
