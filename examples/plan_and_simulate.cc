// Plans and predicts a refit without any GPU: Qwen3-30B-A3B from Megatron EP8 x PP2 (16 training
// GPUs) to vLLM TP8 x DP2 (16 inference GPUs) on DGX H100 nodes, every strategy side by side.
//
//   plan_and_simulate [MODEL TRAIN INFER CLUSTER]
//   plan_and_simulate deepseek-v3 pp=16,ep=16 tp=32,engines=8 gb200-nvl72:gpus_per_domain=64
#include <cstdio>
#include <string>

#include <refit/refit.h>

int main(int argc, char** argv) {
  const bool given = argc == 5;
  const refit::ProblemSource source{.model = given ? argv[1] : "qwen3-30b-a3b",
                                    .train = given ? argv[2] : "ep=8,pp=2",
                                    .infer = given ? argv[3] : "tp=8,engines=2"};
  const refit::ClusterSource hardware{.preset = given ? argv[4] : "dgx-h100"};

  const auto problem = refit::load_problem(source);
  if (!problem) return std::fprintf(stderr, "problem: %s\n", problem.error().message.c_str()), 2;
  const auto cluster = refit::load_cluster(hardware, refit::job_of(*problem));
  if (!cluster) return std::fprintf(stderr, "cluster: %s\n", cluster.error().message.c_str()), 2;

  const auto bound = refit::lower_bound(*problem, cluster->placed);
  std::printf("%s on %s: %zu tensors, lower bound %.4f s (%s)\n", source.model.c_str(),
              cluster->placed.name().c_str(), problem->tensors().size(), bound.time.value,
              bound.binding.c_str());
  for (const auto& strategy : refit::strategies()) {
    const auto plan = refit::plan(*problem, cluster->placed, strategy.name);
    if (!plan) return std::fprintf(stderr, "plan: %s\n", plan.error().message.c_str()), 1;
    const auto prediction = refit::simulate_plan(*plan, *problem, cluster->placed);
    if (!prediction) return std::fprintf(stderr, "simulate: %s\n", prediction.error().message.c_str()), 1;
    std::printf("  %-17s %8.4f s  (%.2fx the bound, run as %s)\n", std::string(strategy.name).c_str(),
                prediction->predicted.value, prediction->predicted / bound.time,
                std::string(refit::execution_model(plan->execution).name).c_str());
  }
  return 0;
}
