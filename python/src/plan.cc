// refit._refit.Plan: planning (refit::plan), what a plan costs and its lower bound, what the
// lowering chose for a rank, and the simulator's prediction. Results go back as dicts with the
// field names of the refit command's --json; the Python package makes dataclasses of them.
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "path_caster.h"
#include "refit/core/elapsed.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/facade/prediction.h"
#include "refit/planner/links.h"

namespace refit::python {

nb::object python_of(const nlohmann::ordered_json& j) {
  return nb::module_::import_("json").attr("loads")(j.dump());
}

namespace {

using namespace nb::literals;

// A plan and the wall time it took to make (or load), as refit plan reports it.
std::tuple<PlanHandle, double> make(const ProblemHandle& problem, const ClusterHandle& cluster,
                                    const std::string& strategy, std::int64_t chunk_bytes, bool for_delta) {
  // Named as refit plan --strategy names it.
  if (auto known = find_strategy(strategy); !known) raise_error(std::move(known.error()).in("--strategy"));
  Result<Plan> made;
  double seconds = 0;
  {
    nb::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    made = refit::plan(*problem.problem, *cluster.placed, strategy,
                       PlanOptions{.chunk = Bytes{chunk_bytes}, .neighbour_relays = !for_delta});
    seconds = seconds_since(start).value;
  }
  return {PlanHandle{std::make_shared<const Plan>(unwrap(std::move(made)))}, seconds};
}

// A plan file, checked against the problem and the cluster as refit simulate --plan checks it.
std::tuple<PlanHandle, double> load(const FsPath& path, const ProblemHandle& problem,
                                    const ClusterHandle& cluster) {
  Result<Plan> loaded;
  double seconds = 0;
  {
    nb::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    loaded = load_plan(path.bytes, *problem.problem, *cluster.placed);
    seconds = seconds_since(start).value;
  }
  return {PlanHandle{std::make_shared<const Plan>(unwrap(std::move(loaded)))}, seconds};
}

void save(const PlanHandle& p, const FsPath& path) {
  unwrap(write_file(path.bytes, [&](std::ostream& out) { write_plan_json(*p.plan, out); }));
}

std::string to_json(const PlanHandle& p) {
  std::ostringstream out;
  write_plan_json(*p.plan, out);
  return out.str();
}

nb::dict lower_bound_dict(const LowerBound& lb) {
  nb::dict d;
  d["lower_bound_s"] = lb.time.value;
  d["lower_bound_binding"] = lb.binding;
  d["destination_domain_s"] = lb.destination_domain.value;
  d["source_side_s"] = lb.source_side.value;
  d["source_domain_s"] = lb.source_domain.value;
  d["source_nic_s"] = lb.source_nic.value;
  d["gpu_ingress_s"] = lb.gpu_ingress.value;
  d["gpu_egress_s"] = lb.gpu_egress.value;
  d["gpu_fill_s"] = lb.gpu_fill.value;
  return d;
}

// Every field of refit plan --json but plan_seconds (the caller's) and, when explain_rank is
// given, "explain" with "explain_text" next to it.
nb::dict summary(const PlanHandle& p, const ProblemHandle& problem, const ClusterHandle& cluster,
                 std::optional<std::int32_t> explain_rank) {
  const Plan& plan = *p.plan;
  PlanStats s;
  LowerBound lb;
  Result<lowering::PlanLowering> low;
  {
    nb::gil_scoped_release release;
    s = compute_stats(plan, *cluster.placed);
    lb = lower_bound(*problem.problem, *cluster.placed);
    low = lowering::explain_plan(plan, *problem.problem, explain_rank);
  }
  const auto lowered = unwrap(std::move(low));
  auto d = nb::cast<nb::dict>(python_of(plan_report_json(plan, s, lb, lowered)));
  if (lowered.summary) d["explain_text"] = lowered.text;
  return d;
}

nb::dict lower_bound_of(const ProblemHandle& problem, const ClusterHandle& cluster) {
  LowerBound lb;
  {
    nb::gil_scoped_release release;
    lb = lower_bound(*problem.problem, *cluster.placed);
  }
  return lower_bound_dict(lb);
}

}  // namespace

nb::dict prediction_dict(const Predictions& p, std::size_t row, const std::ostringstream* trace) {
  auto d = nb::cast<nb::dict>(python_of(predictions_json(p)["strategies"][row]));
  const auto& r = p.rows[row];
  d["cluster"] = p.cluster;
  d["lower_bound_binding"] = p.bound.binding;
  if (!d.contains("notes")) d["notes"] = nb::list();
  nb::list critical;
  for (const auto& c : r.sim.critical_path)
    critical.append(nb::make_tuple(c.transfer, c.what, c.start.value, c.end.value));
  d["critical_path"] = critical;
  if (trace) d["trace"] = trace->str();
  return d;
}

namespace {

// staging: the executors' staging per rank in bytes (refit run --staging); None: their default.
PredictOptions predict_options(std::optional<std::int32_t> window, std::optional<std::string> deployment,
                               std::optional<std::int64_t> staging) {
  return PredictOptions{.deployment = deployment.value_or(""),
                        .window = window,
                        .staging = staging ? Bytes{*staging} : lowering::kDefaultStaging};
}

// What refit simulate predicts of a plan made before (refit simulate --plan): on `cluster`, which
// its links must fit (its own, or other hardware of the same shape), as the deployment runs it.
nb::dict simulate(const PlanHandle& p, const ProblemHandle& problem, const ClusterHandle& cluster,
                  std::optional<std::int32_t> window, bool trace, std::optional<std::string> deployment,
                  std::optional<std::int64_t> staging) {
  std::ostringstream trace_text;
  auto options = predict_options(window, std::move(deployment), staging);
  options.trace = trace ? &trace_text : nullptr;
  auto predicted = unwrap([&]() -> Result<Predictions> {
    nb::gil_scoped_release release;
    REFIT_TRY_IN(check_links(*p.plan, *cluster.placed), "cluster: the plan does not fit it");
    return predict({.source = problem.source, .problem = *problem.problem, .cluster = *cluster.placed},
                   options, *p.plan);
  }());
  return prediction_dict(predicted, 0, trace ? &trace_text : nullptr);
}

// What refit simulate --strategy predicts: the strategy planned here, as the deployment runs it.
nb::dict predict_strategy(const ProblemHandle& problem, const ClusterHandle& cluster,
                          const std::string& strategy, std::int64_t chunk_bytes,
                          std::optional<std::int32_t> window, bool trace,
                          std::optional<std::string> deployment, std::optional<std::int64_t> staging) {
  std::ostringstream trace_text;
  auto options = predict_options(window, std::move(deployment), staging);
  options.strategy = strategy;
  options.plan.chunk = Bytes{chunk_bytes};
  options.trace = trace ? &trace_text : nullptr;
  auto predicted = unwrap([&] {
    nb::gil_scoped_release release;
    return predict({.source = problem.source, .problem = *problem.problem, .cluster = *cluster.placed},
                   options);
  }());
  return prediction_dict(predicted, 0, trace ? &trace_text : nullptr);
}

// What refit simulate --compare predicts: every strategy, a dict each.
nb::list compare_all(const ProblemHandle& problem, const ClusterHandle& cluster, std::int64_t chunk_bytes,
                     std::optional<std::int32_t> window, std::optional<std::int64_t> staging) {
  auto options = predict_options(window, std::nullopt, staging);
  options.plan.chunk = Bytes{chunk_bytes};
  auto predicted = unwrap([&] {
    nb::gil_scoped_release release;
    return compare({.source = problem.source, .problem = *problem.problem, .cluster = *cluster.placed},
                   options);
  }());
  nb::list out;
  for (std::size_t i = 0; i < predicted.rows.size(); ++i) out.append(prediction_dict(predicted, i, nullptr));
  return out;
}

std::vector<std::tuple<std::string, std::string>> deployment_table() {
  std::vector<std::tuple<std::string, std::string>> out;
  for (const auto& d : deployments()) out.emplace_back(std::string(d.name), std::string(d.description));
  return out;
}

std::vector<std::tuple<std::string, std::string, std::string, std::int32_t>> strategy_table() {
  std::vector<std::tuple<std::string, std::string, std::string, std::int32_t>> out;
  for (const auto& s : strategies()) {
    const auto& model = execution_model(s.execution);
    out.emplace_back(std::string(s.name), std::string(s.description), std::string(model.name),
                     model.pair_window);
  }
  return out;
}

}  // namespace

void bind_plan(nb::module_& m) {
  m.attr("DEFAULT_CHUNK_BYTES") = PlanOptions{}.chunk.value;
  nb::class_<PlanHandle>(m, "Plan",
                         "Which bytes move from which rank to which, over which link, in what order "
                         "(the refit-plan format). Plans are deterministic: the same inputs give the same "
                         "hash in every process.")
      .def_static("make", &make, "problem"_a, "cluster"_a, "strategy"_a, "chunk_bytes"_a,
                  "for_delta"_a = false,
                  "Plans with the named strategy and checks the plan against the problem; returns the "
                  "plan and the seconds planning took. for_delta: for a delta refit (no relay keeps "
                  "bytes outside its own boxes).")
      .def_static("load", &load, "path"_a, "problem"_a, "cluster"_a,
                  "Reads a plan file (refit plan --out) and checks that it solves the problem; returns "
                  "the plan and the seconds loading took.")
      .def("save", &save, "path"_a, "Writes the plan file (refit-plan format, version 1).")
      .def("to_json", &to_json, "The plan in the refit-plan format (JSON text).")
      .def_prop_ro(
          "strategy", [](const PlanHandle& p) { return p.plan->strategy; },
          "The strategy that made the plan.")
      .def_prop_ro(
          "execution_model",
          [](const PlanHandle& p) { return std::string(execution_model(p.plan->execution).name); },
          "What runs the plan: refit-ucx, refit-nccl or nccl-collectives.")
      .def_prop_ro(
          "hash", [](const PlanHandle& p) { return plan_hash_hex(*p.plan); },
          "The plan's digest (16 hex digits).")
      .def_prop_ro(
          "world_size", [](const PlanHandle& p) { return p.plan->world_size(); },
          "Training plus inference ranks.")
      .def("summary", &summary, "problem"_a, "cluster"_a, "explain_rank"_a = nb::none(),
           "The fields of refit plan --json (but plan_seconds): what moves where, the busiest NICs and "
           "the lower bound; with explain_rank, what the lowering chose for that rank.")
      .def("simulate", &simulate, "problem"_a, "cluster"_a, "window"_a = nb::none(), "trace"_a = false,
           "deployment"_a = nb::none(), "staging_bytes"_a = nb::none(),
           "Predicts the refit time on the cluster (refit simulate) as the deployment runs the plan "
           "(None: the strategy's default): window is the chunks granted ahead per (sender, receiver) "
           "pair (None: the execution model's); trace adds the Chrome trace event JSON; staging_bytes "
           "is the executors' staging per rank (None: their default).");
  m.def("predict", &predict_strategy, "problem"_a, "cluster"_a, "strategy"_a, "chunk_bytes"_a,
        "window"_a = nb::none(), "trace"_a = false, "deployment"_a = nb::none(),
        "staging_bytes"_a = nb::none(),
        "Plans the strategy and predicts it as the deployment runs it (refit simulate --strategy): a "
        "deployed baseline runs the problem quantized at the receivers, as deployed today.");
  m.def("compare", &compare_all, "problem"_a, "cluster"_a, "chunk_bytes"_a, "window"_a = nb::none(),
        "staging_bytes"_a = nb::none(),
        "Every strategy as its default deployment runs it, and direct and m2n-ring also as refit's "
        "executors would (refit simulate --compare); a dict per row.");
  m.def("lower_bound", &lower_bound_of, "problem"_a, "cluster"_a,
        "The time no plan can beat on the cluster, which term binds, and each term.");
  m.def("deployments", &deployment_table,
        "(name, description) of every deployment (refit simulate --deployment).");
  m.def("strategies", &strategy_table,
        "(name, description, execution model, pair window) of every strategy; the first is the default.");
}

}  // namespace refit::python
