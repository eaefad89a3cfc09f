#pragma once
// What the parts of the refit._refit module share: the objects Python holds (a problem, a placed
// cluster, a plan), how a refit::Error becomes a Python exception, and the bind_* functions the
// module calls. The bindings call the front door (refit/refit.h) and nothing below it plans or
// loads on their own; the pure-Python package (python/refit/) turns what they return into
// dataclasses.
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

#include "shape_caster.h"

#include "refit/facade/prediction.h"
#include "refit/refit.h"

namespace refit::python {

namespace nb = nanobind;

// Raises the Python exception of the error's code (refit._errors.make_error: bad input is a
// ValueError, a timeout a TimeoutError, other failures a RuntimeError), with the message as the
// refit command prints it after "refit <command>: error: ". Needs the GIL.
[[noreturn]] void raise_error(const Error& error);

template <class T>
T unwrap(Result<T>&& result) {
  if (!result) raise_error(result.error());
  return std::move(*result);
}
inline void unwrap(Result<void>&& result) {
  if (!result) raise_error(result.error());
}

// How one side of a problem stores its shards in a framework's parameters (load_storage).
struct StorageHandle {
  std::shared_ptr<const ReshardProblem> problem;
  std::shared_ptr<const models::StorageMap> map;
};

// Each side's storage map of a problem, made when first asked (by any thread).
struct StorageCache {
  std::mutex mutex;
  std::optional<StorageHandle> sides[2];  // inference, training
};

// A reshard problem as Python holds it: shared, immutable, with where it came from (for its
// storage maps).
struct ProblemHandle {
  std::shared_ptr<const ReshardProblem> problem;
  ProblemSource source;
  std::vector<std::string> notes;  // what loading decided that was not asked for (resolve_layouts)
  std::shared_ptr<StorageCache> storage = std::make_shared<StorageCache>();
};

// The storage map of the problem's training side (Megatron's parameters) or inference side
// (vLLM's), made once. Call it with the GIL held: it releases it while it waits or works.
[[nodiscard]] Result<StorageHandle> side_storage(const ProblemHandle& problem, bool training);

// A cluster with a job placed on it, and what discovery noted while loading it.
struct ClusterHandle {
  std::shared_ptr<const PlacedCluster> placed;
  std::vector<std::string> notes;
};

struct PlanHandle {
  std::shared_ptr<const Plan> plan;
};

// A prediction as the Python package takes it: the fields of one row of refit simulate --json,
// with the command's cluster and binding term, the resources, the critical path and the trace.
nb::dict prediction_dict(const Predictions& p, std::size_t row, const std::ostringstream* trace);

// The facade's JSON reports as Python objects: one writer of the fields for the CLI and for us.
nb::object python_of(const nlohmann::ordered_json& j);

void bind_problem(nb::module_& m);
void bind_cluster(nb::module_& m);
void bind_plan(nb::module_& m);
void bind_executor(nb::module_& m);
void bind_sweep(nb::module_& m);
void bind_elastic(nb::module_& m);
void bind_files(nb::module_& m);

}  // namespace refit::python
