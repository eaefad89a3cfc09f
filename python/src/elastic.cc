// refit simulate --members/--join/--fail for Python: the facade's predict_elastic, bound; the
// package makes refit.ElasticSimulation of what this returns. And the join performed: the
// facade's plan_join, bound; the package makes refit.Join of it.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "refit/facade/elastic_prediction.h"
#include "refit/facade/join_run.h"

namespace refit::python {
namespace {

using namespace nb::literals;

// (the prediction's row as refit.simulate takes it, the command's "elastic" object)
nb::tuple simulate_elastic(const ProblemHandle& problem, const ClusterHandle& cluster,
                           const std::string& strategy, std::int64_t chunk_bytes,
                           std::vector<std::int32_t> members, std::optional<std::int32_t> join,
                           std::vector<std::int32_t> peers, const std::string& source,
                           std::optional<std::int32_t> fail, std::optional<double> timeout_s) {
  auto from = parse_join_source(source);
  if (!from) raise_error(Error(from.error()).in("--from"));
  const ElasticOptions e{.members = std::move(members),
                         .join = join,
                         .peers = std::move(peers),
                         .from = *from,
                         .fail = fail,
                         .timeout = timeout_s ? Seconds{*timeout_s} : ElasticOptions{}.timeout};
  PredictOptions o{.strategy = strategy};
  o.plan.chunk = Bytes{chunk_bytes};
  auto predicted = unwrap([&] {
    nb::gil_scoped_release release;
    return predict_elastic(
        {.source = problem.source, .problem = *problem.problem, .cluster = *cluster.placed}, o, e);
  }());
  return nb::make_tuple(prediction_dict(predicted.predictions, 0, nullptr),
                        python_of(elastic_json(predicted)["elastic"]));
}

// The join's problem, plan and placed cluster as the package's handles, with each global rank's
// part ((role, join rank or -1), by global rank) and the request resolved.
nb::dict plan_join_handles(const ProblemHandle& problem, const ClusterHandle& cluster, std::int32_t joining,
                           std::vector<std::int32_t> peers, const std::string& source,
                           const std::string& strategy, std::int64_t chunk_bytes) {
  auto from = parse_join_source(source);
  if (!from) raise_error(Error(from.error()).in("source"));
  auto run = unwrap([&]() -> Result<JoinRun> {
    nb::gil_scoped_release release;
    const auto engines = REFIT_TRY(inference_engines(problem.source));
    return plan_join(*problem.problem, *cluster.placed, engines,
                     JoinRequest{.joining = joining, .peers = std::move(peers), .from = *from}, strategy,
                     PlanOptions{.chunk = Bytes{chunk_bytes}});
  }());
  nb::list parts, world;
  for (std::int32_t g = 0; g < problem.problem->world_size(); ++g) {
    const auto part = run.part(Rank{g});
    parts.append(nb::make_tuple(std::string(join_role_name(part.role)), part.rank ? part.rank->value : -1));
  }
  for (const Rank g : run.world()) world.append(g.value);
  nb::dict out;
  out["peers"] = run.options.peers;
  out["source"] = std::string(join_source_name(run.options.source));
  out["world"] = world;
  out["parts"] = parts;
  out["peer_tensors"] = run.join.peer_tensors;
  out["plan_seconds"] = run.plan_seconds.value;
  out["problem"] =
      ProblemHandle{.problem = std::make_shared<const ReshardProblem>(std::move(run.join.problem)),
                    .source = {},
                    .notes = {}};
  out["cluster"] = ClusterHandle{.placed = std::make_shared<const PlacedCluster>(std::move(run.join.cluster)),
                                 .notes = {}};
  out["plan"] = PlanHandle{std::make_shared<const Plan>(std::move(run.plan))};
  return out;
}

}  // namespace

void bind_elastic(nb::module_& m) {
  m.def("simulate_elastic", &simulate_elastic, "problem"_a, "cluster"_a, "strategy"_a, "chunk_bytes"_a,
        "members"_a, "join"_a, "peers"_a, "source"_a, "fail"_a, "timeout_s"_a,
        "A refit of some engines, a joining engine's fill, or what a dying engine costs the others "
        "(refit simulate --members/--join/--fail): the prediction's row and the elastic fields.");
  m.def("plan_join", &plan_join_handles, "problem"_a, "cluster"_a, "joining"_a, "peers"_a, "source"_a,
        "strategy"_a, "chunk_bytes"_a,
        "The join of an engine that joins or restarts (refit run --join): its problem, plan and placed "
        "cluster in the join's own rank space, the global ranks of its world, and every global rank's "
        "part (role, join rank).");
}

}  // namespace refit::python
