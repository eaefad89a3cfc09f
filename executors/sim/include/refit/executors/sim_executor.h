#pragma once
// The sim executor: runs the whole Plan through the simulator in this one process instead of
// moving bytes, so code written against Executor learns how long the refit would take on a
// cluster it does not have (sizing a cluster, CI without GPUs). It never touches the buffers.
//
// prepare() refuses a plan that does not solve the problem (validate()) or a rank outside it;
// the first execute() of a prepared plan simulates it, later ones return the same prediction.
// The report gives the rank's bytes from the plan and, as elapsed, the predicted refit time;
// last_simulation() has the breakdown, resource utilisation and critical path.
#include <memory>
#include <optional>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/executors/executor.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/topology/rank_map.h"

namespace refit {

class SimExecutor final : public Executor {
 public:
  SimExecutor(ReshardProblem problem, PlacedCluster cluster, PlanSimulationOptions options = {})
      : problem_(std::move(problem)), cluster_(std::move(cluster)), options_(std::move(options)) {}

  std::string_view name() const override { return "sim"; }
  ExecutorCapabilities capabilities() const override { return {.host_memory = true, .cuda_memory = true}; }
  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                              const RankBuffers& buffers) override;
  [[nodiscard]] Result<ExecutionReport> execute(PreparedPlan& prepared) override;
  // The simulation behind the last execute(), if any.
  const std::optional<PlanSimulation>& last_simulation() const { return last_; }

 private:
  ReshardProblem problem_;
  PlacedCluster cluster_;
  PlanSimulationOptions options_;
  std::optional<PlanSimulation> last_;
};

}  // namespace refit
