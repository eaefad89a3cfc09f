// The NCCL executor's program over framework parameters (models/storage_map.h), run on CPUs:
// Megatron's parameters of tiny models to vLLM's, every strategy, rank mapping and a few staging
// sizes; every destination region must hold its pattern and every padding byte stay zero.
#include <fstream>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nccl_fixture.h"
#include "program_sim.h"
#include "refit/core/quantized_problem.h"
#include "refit/core/try.h"
#include "refit/executors/framework_buffers.h"
#include "refit/models/fp8_weights.h"
#include "refit/models/hf_config.h"
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

// A case's PROBLEM options: the HF reading options and, with --quantize, the quantisation.
struct CaseOptions {
  models::HfOptions hf;
  std::optional<QuantizeOptions> quantize;
};

Result<Stored> stored(const std::string& file, const std::string& train, const std::string& infer,
                      const CaseOptions& options) {
  const auto m =
      REFIT_TRY(models::load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/" + file, options.hf));
  const auto t = REFIT_TRY(models::parse_megatron(train));
  const auto i = REFIT_TRY(models::parse_vllm(infer));
  auto problem = REFIT_TRY(models::build_problem(m, t, i));
  if (options.quantize)
    problem = REFIT_TRY(quantize_problem(problem, *options.quantize, [](const TensorSpec& s) {
      return models::fp8_engine_quantizes(s.name);
    }));
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
    CaseOptions options;
    const auto& given = c.at("options");
    for (std::size_t k = 0; k < given.size(); ++k) {
      options.hf.per_expert = options.hf.per_expert || given[k] == "--per-expert";
      options.hf.include_mtp = options.hf.include_mtp || given[k] == "--mtp";
      if (given[k] == "--quantize") options.quantize = QuantizeOptions{};
      if (given[k] == "--quantize" && k + 1 < given.size())
        options.quantize->scheme = parse_quant_scheme(given[k + 1].get<std::string>()).value();
      if (given[k] == "--quantize-at" && options.quantize && k + 1 < given.size())
        options.quantize->site = parse_quant_site(given[k + 1].get<std::string>()).value();
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
