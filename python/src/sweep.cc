// refit._refit's sweep: the facade's what-if use case (refit/facade/sweep.h). A point travels as
// a dict of plain values (its problem and cluster sources), so that refit.sweep can hand it to
// another process or machine (any concurrent.futures executor) and predict it there.
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "path_caster.h"

namespace refit::python {
namespace {

using namespace nb::literals;

// The type a point's field takes, as a message says it.
template <class T>
constexpr std::string_view expected_type() {
  if constexpr (std::is_same_v<T, bool>)
    return "a bool";
  else if constexpr (std::is_same_v<T, nb::dict>)
    return "a dict";
  else if constexpr (std::is_same_v<T, std::vector<std::pair<std::string, std::string>>>)
    return "a list of (key, value) pairs of str";
  else if constexpr (std::is_same_v<T, FsPath>)
    return "a path";
  else
    return "a str";
}

// `d[key]` as a T, or BadInput naming the field (`where` is the dict's, e.g. "point['problem']"):
// a point may come from anywhere (refit.sweep.predict_point on another machine), and a field of
// the wrong type is refused rather than failing in the cast.
template <class T>
T field(const nb::dict& d, const char* key, std::string_view where) {
  T value{};
  if (!nb::try_cast(d[key], value))
    raise_error(Error{.code = ErrorCode::kInvalidArgument,
                      .message = fmt::format("{}['{}']: expected {}, got {}", where, key, expected_type<T>(),
                                             nb::type_name(d[key].type()).c_str())});
  return value;
}

// `d[key]` into `value` where the dict has it; the facade's own default otherwise.
template <class T>
void take(const nb::dict& d, const char* key, std::string_view where, T& value) {
  if (d.contains(key)) value = field<T>(d, key, where);
}
// A path field: any name the system allows (path_caster.h).
void take_path(const nb::dict& d, const char* key, std::string_view where, std::string& value) {
  if (d.contains(key)) value = field<FsPath>(d, key, where).bytes;
}

// The keys of refit._refit.Problem.load and PlacedCluster.load, which the package keeps as
// Problem._source and Cluster._source.
ProblemSource problem_source(const nb::dict& d, std::string_view where) {
  ProblemSource s;
  take_path(d, "model", where, s.model);
  take(d, "train", where, s.train);
  take(d, "infer", where, s.infer);
  take(d, "dtype", where, s.model_options.dtype);
  take(d, "per_expert", where, s.model_options.per_expert);
  take(d, "mtp", where, s.model_options.mtp);
  take(d, "quantize", where, s.model_options.quantize);
  take(d, "quantize_at", where, s.model_options.quantize_at);
  take_path(d, "manifest", where, s.manifest);
  return s;
}

nb::dict problem_dict(const ProblemSource& s) {
  nb::dict d;
  d["model"] = FsPath{s.model};
  d["train"] = s.train;
  d["infer"] = s.infer;
  d["dtype"] = s.model_options.dtype;
  d["per_expert"] = s.model_options.per_expert;
  d["mtp"] = s.model_options.mtp;
  d["quantize"] = s.model_options.quantize;
  d["quantize_at"] = s.model_options.quantize_at;
  d["manifest"] = FsPath{s.manifest};
  return d;
}

ClusterSource cluster_source(const nb::dict& d, std::string_view where) {
  ClusterSource s;
  take(d, "preset", where, s.preset);
  take_path(d, "file", where, s.file);
  take_path(d, "nccl_xml", where, s.nccl_xml);
  take(d, "discover", where, s.discover);
  take_path(d, "sysfs_root", where, s.sysfs_root);
  take_path(d, "nvml_library", where, s.nvml_library);
  return s;
}

nb::dict cluster_dict(const ClusterSource& s) {
  nb::dict d;
  d["preset"] = s.preset;
  d["file"] = FsPath{s.file};
  d["nccl_xml"] = FsPath{s.nccl_xml};
  d["discover"] = s.discover;
  d["sysfs_root"] = FsPath{s.sysfs_root};
  d["nvml_library"] = FsPath{s.nvml_library};
  return d;
}

nb::dict point_dict(const SweepPoint& p) {
  nb::dict d;
  d["values"] = p.values;
  d["problem"] = problem_dict(p.problem);
  d["cluster"] = cluster_dict(p.cluster);
  return d;
}

// A point as point_dict makes it, or BadInput naming the field that is missing or not what it is.
SweepPoint point_of(nb::handle given) {
  nb::dict d;
  if (!nb::try_cast(given, d))
    raise_error(Error{.code = ErrorCode::kInvalidArgument,
                      .message = fmt::format("point: expected a dict (a point of refit._refit.sweep_points), "
                                             "got {}",
                                             nb::type_name(given.type()).c_str())});
  for (const char* key : {"values", "problem", "cluster"})
    if (!d.contains(key))
      raise_error(Error{
          .code = ErrorCode::kInvalidArgument,
          .message = fmt::format("point: no '{}' (a point has 'values', 'problem' and 'cluster')", key)});
  return SweepPoint{.values = field<std::vector<std::pair<std::string, std::string>>>(d, "values", "point"),
                    .problem = problem_source(field<nb::dict>(d, "problem", "point"), "point['problem']"),
                    .cluster = cluster_source(field<nb::dict>(d, "cluster", "point"), "point['cluster']")};
}

PredictOptions predict_options(std::int64_t chunk_bytes, std::optional<std::int32_t> window) {
  return PredictOptions{.plan = PlanOptions{.chunk = Bytes{chunk_bytes}}, .window = window};
}

nb::list rows_of(const Predictions& p) {
  nb::list out;
  for (std::size_t i = 0; i < p.rows.size(); ++i) out.append(prediction_dict(p, i, nullptr));
  return out;
}

nb::list points(const nb::dict& problem, const nb::dict& cluster,
                const std::vector<std::pair<std::string, std::vector<std::string>>>& vary) {
  std::vector<SweepAxis> axes;
  for (const auto& [key, values] : vary) axes.push_back({.key = key, .values = values});
  const auto made =
      unwrap(sweep_points(problem_source(problem, "problem"), cluster_source(cluster, "cluster"), axes));
  nb::list out;
  for (const auto& p : made) out.append(point_dict(p));
  return out;
}

nb::list predict(nb::handle point, std::int64_t chunk_bytes, std::optional<std::int32_t> window) {
  const auto p = point_of(point);
  auto predicted = unwrap([&] {
    nb::gil_scoped_release release;
    return predict_point(p, predict_options(chunk_bytes, window));
  }());
  return rows_of(predicted);
}

// Every point on the facade's threads; the first point that failed raises its error.
nb::list run_sweep(const nb::list& given, std::int64_t chunk_bytes, std::optional<std::int32_t> window,
                   std::int32_t jobs, std::optional<nb::callable> progress) {
  std::vector<SweepPoint> points;
  for (const auto p : given) points.push_back(point_of(p));
  SweepOptions options{.predict = predict_options(chunk_bytes, window), .jobs = jobs, .progress = nullptr};
  if (progress)
    options.progress = [&progress](std::size_t done, std::size_t total) {
      nb::gil_scoped_acquire gil;
      try {
        (*progress)(done, total);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("refit.sweep progress");  // a display must not stop the sweep
      }
    };
  auto results = unwrap([&] {
    nb::gil_scoped_release release;
    return sweep(points, options);
  }());
  nb::list out;
  for (auto& r : results) out.append(rows_of(unwrap(std::move(r))));
  return out;
}

}  // namespace

void bind_sweep(nb::module_& m) {
  m.def("sweep_keys", &sweep_keys, "(key, meaning) of every key a sweep can vary.");
  m.def("sweep_points", &points, "problem"_a, "cluster"_a, "vary"_a,
        "Every combination of the values in vary ([(key, [value, ...]), ...]) applied to the problem's and "
        "the cluster's sources (dicts of Problem._source, Cluster._source): a dict per point, with its "
        "values and its sources. Errors name the key (--vary KEY).");
  m.def("predict_point", &predict, "point"_a, "chunk_bytes"_a, "window"_a = nb::none(),
        "Loads a point's problem and cluster and compares every strategy (refit simulate --compare): a "
        "dict per row.");
  m.def("sweep", &run_sweep, "points"_a, "chunk_bytes"_a, "window"_a = nb::none(), "jobs"_a = 0,
        "progress"_a = nb::none(),
        "predict_point for every point, jobs at once on threads of refit's own (0: one per core), "
        "progress(done, total) after each: a list of rows per point.");
}

}  // namespace refit::python
