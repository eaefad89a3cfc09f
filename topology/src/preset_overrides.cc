// The key=value overrides of a preset spec ("gb200-nvl72:gpus_per_domain=64,nic_gbps=400").
#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hardware_constants.h"
#include "preset_params.h"
#include "refit/core/checked.h"
#include "refit/core/named_table.h"
#include "refit/core/try.h"
#include "refit/topology/cluster.h"

namespace refit::detail {
namespace {

// Whole text a number, but too large for its type (from_chars: result_out_of_range).
bool overflowed(std::string_view text, std::from_chars_result r) {
  return !text.empty() && r.ec == std::errc::result_out_of_range && r.ptr == text.data() + text.size();
}

// A finite number in [min, max].
[[nodiscard]] Result<double> number(std::string_view key, std::string_view text, double min, double max) {
  double v = 0;
  const auto* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (overflowed(text, r) || (r.ec == std::errc{} && r.ptr == end && !std::isfinite(v)))
    return out_of_range(fmt::format("{}={}: expected a number", key, text));
  if (text.empty() || r.ec != std::errc{} || r.ptr != end)
    return parse_error(fmt::format("{}={}: expected a number", key, text));
  if (v < min) return out_of_range(fmt::format("{}={}: must be >= {}", key, text, min));
  if (v > max) return out_of_range(fmt::format("{}={}: must be <= {}", key, text, max));
  return v;
}

// Rates in GB/s (Gb/s for nic_gbps) and latencies in microseconds, as Cluster::make bounds them
// (cluster_limits in cluster.h); a NIC's effective GB/s is its line Gb/s x 47 / 400. A rate has a
// floor above 0, so that no transfer time is infinite or subnormal, and the floor is what a
// refusal names.
constexpr double kMinGbps = 0.001;
constexpr double kMaxGbps = 1e6;
constexpr double kMinNicLineGbps = 0.01;
// 8e6 Gb/s x 47 / 400 = 940,000 GB/s, within kMaxGbps (1e7 was refused by Cluster::make as
// 1,175,000 GB/s, naming a field the user never wrote).
constexpr double kMaxNicLineGbps = 8e6;
static_assert(kMaxNicLineGbps * hw::kNicEffectiveGbpsPer400G / 400 <= kMaxGbps);
constexpr double kMaxLatencyUs = 1e6;

[[nodiscard]] Result<std::int32_t> integer(std::string_view key, std::string_view text, std::int32_t min) {
  std::int32_t v = 0;
  const auto* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (overflowed(text, r)) return out_of_range(fmt::format("{}={}: expected an integer", key, text));
  if (text.empty() || r.ec != std::errc{} || r.ptr != end)
    return parse_error(fmt::format("{}={}: expected an integer", key, text));
  if (v < min) return out_of_range(fmt::format("{}={}: must be >= {}", key, text, min));
  // Counts of GPUs, NICs, nodes and GPU offsets: a cluster is built GPU by GPU from them.
  if (v > limits::kMaxRanks)
    return out_of_range(fmt::format("{}={}: must be <= {}", key, text, limits::kMaxRanks));
  return v;
}

// Sets field = convert(the value `value` holds), or returns its error.
template <class Field, class Value, class Convert>
[[nodiscard]] Result<void> assign(Field& field, Result<Value> value, Convert convert) {
  field = convert(REFIT_TRY(std::move(value)));
  return {};
}
template <class Field, class Value>
[[nodiscard]] Result<void> assign(Field& field, Result<Value> value) {
  return assign(field, std::move(value), [](Value v) { return v; });
}

using Apply = Result<void> (*)(PresetParams&, std::string_view key, std::string_view value);
struct Key {
  std::string_view name;
  std::string_view meaning;
  Apply apply;
};

constexpr Key kKeys[] = {
    {"nodes", "number of nodes (default: as many as the ranks need, in whole domains)",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.nodes, integer(k, v, 1));
     }},
    {"gpus_per_node", "GPUs per node",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       p.one_device_per_rank = false;
       return assign(p.gpus_per_node, integer(k, v, 1));
     }},
    {"gpus_per_domain", "GPUs per NVLink domain (whole nodes, or a divisor of gpus_per_node)",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.gpus_per_domain, integer(k, v, 1));
     }},
    {"nics_per_node", "compute NICs per node, each serving an equal share of its GPUs",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.nics_per_node, integer(k, v, 1));
     }},
    {"nic_gbps", "NIC line rate in Gb/s (400, 800); effective GB/s = line x 47 / 400",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.nic, number(k, v, kMinNicLineGbps, kMaxNicLineGbps), hw::effective_nic_bandwidth);
     }},
    {"nvlink_gbps", "effective NVLink GB/s per GPU per direction",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.nvlink, number(k, v, kMinGbps, kMaxGbps), BytesPerSecond::from_gbps);
     }},
    {"copy_gbps", "effective device-to-device copy GB/s per GPU (pack/unpack)",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       p.copy_assumed.clear();
       return assign(p.copy, number(k, v, kMinGbps, kMaxGbps), BytesPerSecond::from_gbps);
     }},
    {"latency_us", "network latency per message, microseconds",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.latency, number(k, v, 0.0, kMaxLatencyUs), hw::micros);
     }},
    {"chunk_overhead_us",
     "the sender's own time per chunk sent over the network, microseconds (default 0: presets measure "
     "none; refit calibrate does)",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.chunk_overhead, number(k, v, 0.0, kMaxLatencyUs), hw::micros);
     }},
    {"transfer_overhead_us",
     "the sender's own time per transfer sent over the network beyond its chunks', microseconds "
     "(default 0: presets measure none; refit calibrate does)",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.transfer_overhead, number(k, v, 0.0, kMaxLatencyUs), hw::micros);
     }},
    {"nvlink_latency_us", "NVLink latency per message, microseconds",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.nvlink_latency, number(k, v, 0.0, kMaxLatencyUs), hw::micros);
     }},
    {"oversubscription", "fabric oversubscription ratio between domains (1 = non-blocking)",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.oversubscription, number(k, v, 1.0, cluster_limits::kMaxOversubscription));
     }},
    {"infer_offset", "first GPU of the inference ranks (default: right after the training ranks)",
     [](PresetParams& p, std::string_view k, std::string_view v) {
       return assign(p.infer_offset, integer(k, v, 0));
     }},
};

}  // namespace

std::vector<std::pair<std::string, std::string>> override_keys() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& k : kKeys) out.emplace_back(k.name, k.meaning);
  return out;
}

Result<void> apply_overrides(PresetParams& params, std::string_view overrides) {
  std::set<std::string_view> seen;
  while (true) {
    const auto comma = overrides.find(',');
    const auto item = overrides.substr(0, comma);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      return parse_error(
          fmt::format("'{}': expected key=value (keys: {})", item, names_of(kKeys, &Key::name)));
    const auto name = item.substr(0, eq);
    const Key* key = find_named(kKeys, name, &Key::name);
    if (!key)
      return not_found(fmt::format("unknown key '{}' (valid keys: {})", name, names_of(kKeys, &Key::name)));
    if (!seen.insert(name).second) return invalid(fmt::format("key '{}' is given twice", name));
    REFIT_TRY(key->apply(params, name, item.substr(eq + 1)));
    if (comma == std::string_view::npos) return {};
    overrides.remove_prefix(comma + 1);
  }
}

Result<void> check_consistency(const PresetParams& p) {
  const auto gpn = p.gpus_per_node;
  const auto gpd = p.domain_gpus();
  if (gpd % gpn != 0 && gpn % gpd != 0)
    return invalid(
        fmt::format("gpus_per_domain={} and gpus_per_node={}: one must divide the other (a domain is whole "
                    "nodes, or a node holds whole domains)",
                    gpd, gpn));
  if (p.node_nics() > gpn || gpn % p.node_nics() != 0)
    return invalid(fmt::format("nics_per_node={} must divide gpus_per_node={}", p.node_nics(), gpn));
  return {};
}

}  // namespace refit::detail
