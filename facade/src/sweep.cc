#include "refit/facade/sweep.h"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <optional>
#include <ranges>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/try.h"
#include "refit/topology/presets.h"

#include "in_parallel.h"

namespace refit {
namespace {

bool is_layout_key(std::string_view key) { return key == kSweepTrain || key == kSweepInfer; }

bool is_preset(const ClusterSource& c) { return c.file.empty() && c.nccl_xml.empty() && !c.discover; }

// `spec` (NAME or NAME:key=value,...) without what it said of `key`.
std::string without_key(std::string_view spec, std::string_view key) {
  const auto colon = spec.find(':');
  std::vector<std::string> overrides;
  if (colon != std::string_view::npos)
    for (std::string_view rest = spec.substr(colon + 1); !rest.empty();) {
      const auto comma = std::min(rest.find(','), rest.size());
      const auto item = rest.substr(0, comma);
      if (item.substr(0, item.find('=')) != key) overrides.emplace_back(item);
      rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
  const auto name = spec.substr(0, colon);
  return overrides.empty() ? std::string(name) : fmt::format("{}:{}", name, fmt::join(overrides, ","));
}

// `spec` with key set to value, replacing what it said of key.
std::string with_override(std::string_view spec, std::string_view key, std::string_view value) {
  const auto rest = without_key(spec, key);
  return fmt::format("{}{}{}={}", rest, rest.find(':') == std::string::npos ? ":" : ",", key, value);
}

// The preset's hardware: a colocated job's infer_offset is the job's, placed with each point.
[[nodiscard]] Result<Cluster> hardware_of(const std::string& spec) {
  return make_preset_cluster(without_key(spec, "infer_offset"));
}

[[nodiscard]] Result<void> check_axis(const SweepAxis& axis, const ProblemSource& problem,
                                      const ClusterSource& cluster) {
  const auto keys = sweep_keys();
  if (std::ranges::find(keys, axis.key, &std::pair<std::string, std::string>::first) == keys.end())
    return not_found(
        fmt::format("unknown key (expected one of: {})", fmt::join(keys | std::views::keys, ", ")));
  if (axis.values.empty()) return invalid("needs at least one value");
  if (is_layout_key(axis.key) && (problem.model.empty() || !problem.manifest.empty()))
    return invalid("varies a layout, which needs a problem made from a model (--model), not a manifest");
  if (!is_layout_key(axis.key) && !is_preset(cluster))
    return invalid("varies the hardware of a preset (--cluster), not of a cluster file, dump or discovery");
  // Each hardware value on the preset as given, before any point is predicted: a bad last value
  // once failed the sweep after every point before it had run.
  if (!is_layout_key(axis.key) && axis.key != kSweepNicsPerDomain) {
    const std::string base = cluster.preset.empty() ? std::string(kDefaultPreset) : cluster.preset;
    for (const auto& value : axis.values) REFIT_TRY(hardware_of(with_override(base, axis.key, value)));
  }
  return {};
}

// The nodes of the preset's first NVLink domain (every domain of a preset has as many).
[[nodiscard]] Result<std::int32_t> nodes_per_domain(const std::string& spec) {
  const auto cluster = REFIT_TRY(hardware_of(spec));
  std::set<std::int32_t> nodes;
  for (const GpuId g : cluster.domains().front().gpus) nodes.insert(cluster.gpu(g).node);
  return static_cast<std::int32_t>(nodes.size());
}

// nics_per_domain as the preset's nics_per_node, once the point's other keys are applied.
[[nodiscard]] Result<void> apply_nics_per_domain(SweepPoint& point, const std::string& value) {
  const auto where = fmt::format("--vary {}={}", kSweepNicsPerDomain, value);
  auto& spec = point.cluster.preset;
  const auto nodes = REFIT_TRY_IN(nodes_per_domain(spec), where);
  std::int32_t nics = 0;
  const auto* end = value.data() + value.size();
  if (const auto r = std::from_chars(value.data(), end, nics);
      r.ec != std::errc{} || r.ptr != end || nics <= 0)
    return parse_error(fmt::format("{}: expected a positive integer", where));
  if (nics % nodes != 0)
    return invalid(fmt::format("{} does not split over the domain's {} nodes", where, nodes));
  spec = with_override(spec, "nics_per_node", fmt::format("{}", nics / nodes));
  // Refused here, so that the message names the key the user varied rather than the one it became.
  REFIT_TRY_IN(hardware_of(spec), fmt::format("{} (nics_per_node={} on each of the domain's {} nodes)", where,
                                              nics / nodes, nodes));
  return {};
}

// The point at the given value of each axis.
[[nodiscard]] Result<SweepPoint> point_at(const ProblemSource& problem, const ClusterSource& cluster,
                                          const std::vector<SweepAxis>& axes,
                                          const std::vector<std::size_t>& at) {
  SweepPoint p{.values = {}, .problem = problem, .cluster = cluster};
  if (is_preset(p.cluster) && p.cluster.preset.empty()) p.cluster.preset = kDefaultPreset;
  std::optional<std::string> nics_per_domain;
  for (std::size_t a = 0; a < axes.size(); ++a) {
    const auto& [key, value] = p.values.emplace_back(axes[a].key, axes[a].values[at[a]]);
    if (key == kSweepTrain)
      p.problem.train = value;
    else if (key == kSweepInfer)
      p.problem.infer = value;
    else if (key == kSweepNicsPerDomain)
      nics_per_domain = value;
    else
      p.cluster.preset = with_override(p.cluster.preset, key, value);
  }
  if (nics_per_domain) REFIT_TRY(apply_nics_per_domain(p, *nics_per_domain));
  return p;
}

// The next combination, the last axis fastest; false after the last one.
bool advance(std::vector<std::size_t>& at, const std::vector<SweepAxis>& axes) {
  for (std::size_t a = axes.size(); a-- > 0;) {
    if (++at[a] < axes[a].values.size()) return true;
    at[a] = 0;
  }
  return false;
}

std::string point_name(const SweepPoint& point) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : point.values) parts.push_back(fmt::format("{}={}", key, value));
  return fmt::format("at {}", fmt::join(parts, ", "));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> sweep_keys() {
  auto keys = preset_keys();
  std::erase_if(keys, [](const auto& k) { return k.first == "infer_offset"; });  // the job's, not hardware
  keys.emplace_back(kSweepNicsPerDomain, "NICs per NVLink domain, spread evenly over its nodes");
  keys.emplace_back(kSweepTrain, "Megatron sizes of the training layout, as --train");
  keys.emplace_back(kSweepInfer, "vLLM sizes of the inference layout, as --infer");
  return keys;
}

namespace {

// A sweep predicts every point, each from seconds to minutes, and holds them all: a grid past
// this many points is a mistake, not a plan (ten axes of ten values once took all the memory
// before the first prediction).
constexpr std::size_t kMaxSweepPoints = 10'000;

[[nodiscard]] Result<void> check_point_count(const std::vector<SweepAxis>& axes) {
  std::size_t points = 1;
  std::vector<std::string> sizes;
  for (const auto& axis : axes) {
    points = axis.values.size() > kMaxSweepPoints / std::max<std::size_t>(points, 1)
                 ? kMaxSweepPoints + 1
                 : points * axis.values.size();
    sizes.push_back(fmt::format("{} {}", axis.values.size(), axis.key));
  }
  if (points <= kMaxSweepPoints) return {};
  return out_of_range(
      fmt::format("--vary: {} make more than {} points: sweep fewer values, or split the sweep",
                  fmt::join(sizes, " x "), kMaxSweepPoints));
}

}  // namespace

Result<std::vector<SweepPoint>> sweep_points(const ProblemSource& problem, const ClusterSource& cluster,
                                             const std::vector<SweepAxis>& axes) {
  std::set<std::string> seen;
  for (const auto& axis : axes) {
    if (!seen.insert(axis.key).second) return invalid(fmt::format("--vary {}: given twice", axis.key));
    REFIT_TRY_IN(check_axis(axis, problem, cluster), fmt::format("--vary {}", axis.key));
  }
  REFIT_TRY(check_point_count(axes));
  std::vector<SweepPoint> points;
  std::vector<std::size_t> at(axes.size(), 0);
  do {
    points.push_back(REFIT_TRY(point_at(problem, cluster, axes, at)));
  } while (advance(at, axes));
  return points;
}

Result<Predictions> predict_point(const SweepPoint& point, const PredictOptions& options) {
  const auto where = point_name(point);
  const auto problem = REFIT_TRY_IN(load_problem(point.problem), where);
  const auto cluster = REFIT_TRY_IN(load_cluster(point.cluster, job_of(problem)), where);
  return REFIT_TRY_IN(
      compare({.source = point.problem, .problem = problem, .cluster = cluster.placed}, options), where);
}

Result<std::vector<Result<Predictions>>> sweep(const std::vector<SweepPoint>& points,
                                               const SweepOptions& options) {
  if (options.predict.trace) return invalid("--trace: a sweep draws no trace (simulate one point instead)");
  if (options.jobs < 0) return out_of_range(fmt::format("--jobs: {} is negative", options.jobs));
  std::vector<Result<Predictions>> out(points.size());
  std::mutex reporting;
  std::size_t done = 0;
  detail::in_parallel(points.size(), detail::threads_for(options.jobs), [&](std::size_t i) {
    out[i] = predict_point(points[i], options.predict);
    const std::lock_guard lock(reporting);
    ++done;
    if (options.progress) options.progress(done, points.size());
  });
  return out;
}

}  // namespace refit
