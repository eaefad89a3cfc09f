// refit simulate --members/--join/--fail for Python: the facade's predict_elastic, bound; the
// package makes refit.ElasticSimulation of what this returns.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "refit/facade/elastic_prediction.h"

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

}  // namespace

void bind_elastic(nb::module_& m) {
  m.def("simulate_elastic", &simulate_elastic, "problem"_a, "cluster"_a, "strategy"_a, "chunk_bytes"_a,
        "members"_a, "join"_a, "peers"_a, "source"_a, "fail"_a, "timeout_s"_a,
        "A refit of some engines, a joining engine's fill, or what a dying engine costs the others "
        "(refit simulate --members/--join/--fail): the prediction's row and the elastic fields.");
}

}  // namespace refit::python
