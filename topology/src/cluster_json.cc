#include "refit/topology/cluster_json.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "hardware_constants.h"
#include "refit/core/json_fields.h"
#include "refit/core/quantization.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/core/utf8.h"

namespace refit {
namespace {

using Json = nlohmann::ordered_json;

// The decimal x for which `read(x)` (the loader's conversion) gives back exactly `value`.
// Prefer a short decimal (12 significant digits) so that files stay readable, else search the
// doubles next to value/scale: the conversion rounds, so the plain quotient may miss by an ulp.
template <class Read>
double exact_decimal(double value, double scale, Read read) {
  const double raw = value / scale;
  // strtod, not stod: a subnormal quotient (a latency of 1e-308 us) is a value, not an error.
  const double shortest = std::strtod(fmt::format("{:.12g}", raw).c_str(), nullptr);
  if (read(shortest) == value) return shortest;
  double up = raw;
  double down = raw;
  for (int i = 0; i < 8; ++i) {
    if (read(up) == value) return up;
    if (read(down) == value) return down;
    up = std::nextafter(up, std::numeric_limits<double>::infinity());
    down = std::nextafter(down, -std::numeric_limits<double>::infinity());
  }
  return raw;
}

double gbps_field(BytesPerSecond b) {
  return exact_decimal(b.value, 1e9, [](double x) { return BytesPerSecond::from_gbps(x).value; });
}
double us_field(Seconds s) {
  return exact_decimal(s.value, 1e-6, [](double x) { return hw::micros(x).value; });
}

Json gpu_ids(const std::vector<GpuId>& gpus) {
  Json out = Json::array();
  for (const auto g : gpus) out.push_back(g.value);
  return out;
}

// One rate where every format has it, else a rate per measured format's name; none unmeasured.
std::optional<Json> quantize_json(const QuantizeRates& rates) {
  if (std::ranges::all_of(rates, [](BytesPerSecond r) { return r.value == 0; })) return std::nullopt;
  if (std::ranges::all_of(rates, [&](BytesPerSecond r) { return r == rates.front(); }))
    return Json(gbps_field(rates.front()));
  Json out = Json::object();
  for (const QuantScheme s : all_quant_schemes())
    if (const auto r = of_scheme(rates, s); r.value > 0)
      out[std::string(quant_scheme_name(s))] = gbps_field(r);
  return out;
}

Json gpu_to_json(const GpuSpec& g) {
  Json j{{"id", g.id.value},
         {"node", g.node},
         {"domain", g.domain},
         {"nvlink_gbps", gbps_field(g.nvlink_bandwidth)},
         {"copy_gbps", gbps_field(g.copy_bandwidth)}};
  if (g.memory.value > 0) j["memory_gb"] = static_cast<double>(g.memory.value) / 1e9;
  if (!g.pci_bus_id.empty()) j["pci_bus_id"] = g.pci_bus_id;
  if (const auto q = quantize_json(g.quantize_bandwidth)) j["quantize_gbps"] = *q;
  if (g.nccl_costs)
    j["nccl_overhead_us"] = {{"per_op", us_field(g.nccl_costs->per_op)},
                             {"per_step", us_field(g.nccl_costs->per_step)}};
  return j;
}

Json nic_to_json(const NicSpec& n) {
  Json j{{"id", n.id}};
  if (!n.name.empty()) j["name"] = n.name;
  j["node"] = n.node;
  j["gbps"] = gbps_field(n.bandwidth);
  j["latency_us"] = us_field(n.latency);
  j["gpus"] = gpu_ids(n.gpus);
  if (!n.pci_bus_id.empty()) j["pci_bus_id"] = n.pci_bus_id;
  if (n.chunk_overhead.value > 0) j["chunk_overhead_us"] = us_field(n.chunk_overhead);
  if (n.transfer_overhead.value > 0) j["transfer_overhead_us"] = us_field(n.transfer_overhead);
  return j;
}

Json cache_to_json(const CacheSpec& c) {
  return {{"node", c.node},
          {"capacity_bytes", c.capacity.value},
          {"nic_gbps", gbps_field(c.nic_bandwidth)},
          {"latency_us", us_field(c.nic_latency)},
          {"chunk_overhead_us", us_field(c.chunk_overhead)},
          {"transfer_overhead_us", us_field(c.transfer_overhead)},
          {"copy_gbps", gbps_field(c.copy_bandwidth)}};
}

using json_fields::FieldReader;
using json_fields::require_known_keys;

// Ids, nodes and domains are int32 in the model.
constexpr std::int64_t kMaxId = std::numeric_limits<std::int32_t>::max();
constexpr std::string_view kRoot = "the cluster file";

std::int32_t id32(std::int64_t v) { return static_cast<std::int32_t>(v); }

std::vector<GpuId> gpu_ids_of(const std::vector<std::int64_t>& values) {
  std::vector<GpuId> out;
  for (const auto v : values) out.emplace_back(id32(v));
  return out;
}

// Reads each element of the array `key` with `read_one`, appending to `out`.
template <class T, class ReadOne>
[[nodiscard]] Result<void> read_array(const nlohmann::json& root, std::string_view key, std::vector<T>& out,
                                      ReadOne read_one) {
  const nlohmann::json* items = REFIT_TRY(json_fields::require_array(root, key, ""));
  for (std::size_t i = 0; i < items->size(); ++i)
    out.push_back(REFIT_TRY(
        read_one((*items)[i], json_fields::element(std::string(key), i), static_cast<std::int32_t>(i))));
  return {};
}

// A cluster's assumptions are sentences every prediction repeats, to a terminal too: a few, short,
// printable ones.
constexpr std::size_t kMaxAssumptions = 64;
constexpr std::size_t kMaxAssumptionChars = 1000;

[[nodiscard]] Result<std::string> read_assumption(const nlohmann::json& j, const std::string& at,
                                                  std::int32_t) {
  if (!j.is_string()) return invalid(fmt::format("{}: must be a string, got {}", at, j.type_name()));
  auto text = j.get<std::string>();
  if (text.empty() || text.size() > kMaxAssumptionChars)
    return out_of_range(
        fmt::format("{}: a sentence of 1 to {} characters, got {}", at, kMaxAssumptionChars, text.size()));
  if (has_control_character(text))
    return invalid(fmt::format("{}: a control character (a line break or an escape) in the sentence", at));
  return text;
}

[[nodiscard]] Result<void> read_assumptions(const nlohmann::json& root, std::vector<std::string>& out) {
  if (!json_fields::has(root, "assumptions")) return {};
  const nlohmann::json* items = REFIT_TRY(json_fields::require_array(root, "assumptions", ""));
  if (items->size() > kMaxAssumptions)
    return out_of_range(
        fmt::format("assumptions: at most {} sentences, got {}", kMaxAssumptions, items->size()));
  return read_array(root, "assumptions", out, read_assumption);
}

// Optional GPU memory in decimal GB: 0 (unknown) when absent; refused outside [0, 1e6] GB.
Bytes memory_field(FieldReader& f, std::string_view key) {
  const double gb = f.number_or(key, 0.0);
  if (!(gb >= 0 && gb <= 1e6)) {
    f.fail(key, fmt::format("must be a size in GB within [0, 1e6], got {}", gb), ErrorCode::kOutOfRange);
    return Bytes{0};
  }
  return Bytes{std::llround(gb * 1e9)};
}

// quantize_gbps: one rate for every FP8 format, or an object of a rate per format's name; a format
// left out is unmeasured (0), as is every format when the field is absent.
QuantizeRates quantize_field(FieldReader& f, const nlohmann::json& gpu) {
  const auto it = gpu.find("quantize_gbps");
  if (it == gpu.end() || !it->is_object())
    return every_scheme(BytesPerSecond::from_gbps(f.number_or("quantize_gbps", 0.0)));
  QuantizeRates rates{};
  FieldReader per(*it, f.path("quantize_gbps"));
  for (const auto& [name, rate] : it->items()) {
    const auto scheme = parse_quant_scheme(name);
    if (!scheme) {
      per.fail(name, scheme.error().message);
      continue;
    }
    of_scheme(rates, *scheme) = BytesPerSecond::from_gbps(per.number(name));
  }
  f.keep_error(per.status());
  return rates;
}

// nccl_overhead_us: {"per_op": us, "per_step": us}, both given; absent when unmeasured.
[[nodiscard]] Result<std::optional<NcclCosts>> nccl_costs_field(const nlohmann::json& gpu,
                                                                const std::string& at) {
  if (!json_fields::has(gpu, "nccl_overhead_us")) return std::nullopt;
  const std::string path = json_fields::child(at, "nccl_overhead_us");
  const auto& j = gpu.at("nccl_overhead_us");
  REFIT_TRY(require_known_keys(j, path, {"per_op", "per_step"}, kRoot));
  FieldReader f(j, path);
  NcclCosts costs{.per_op = hw::micros(f.number("per_op")), .per_step = hw::micros(f.number("per_step"))};
  REFIT_TRY(f.status());
  return costs;
}

// Braced initialisers evaluate in order, so the first bad field is the one reported.
[[nodiscard]] Result<GpuSpec> read_gpu(const nlohmann::json& j, const std::string& at, std::int32_t index) {
  REFIT_TRY(require_known_keys(j, at,
                               {"id", "node", "domain", "nvlink_gbps", "copy_gbps", "memory_gb", "pci_bus_id",
                                "quantize_gbps", "nccl_overhead_us"},
                               kRoot));
  FieldReader f(j, at, kMaxId);
  GpuSpec gpu{.id = GpuId{id32(f.integer_or("id", 0, index))},
              .node = id32(f.integer("node", 0)),
              .domain = id32(f.integer("domain", 0)),
              .nvlink_bandwidth = BytesPerSecond::from_gbps(f.number("nvlink_gbps")),
              .copy_bandwidth = BytesPerSecond::from_gbps(f.number("copy_gbps")),
              .memory = memory_field(f, "memory_gb"),
              .pci_bus_id = f.label_or("pci_bus_id", ""),
              .quantize_bandwidth = quantize_field(f, j)};
  REFIT_TRY(f.status());
  gpu.nccl_costs = REFIT_TRY(nccl_costs_field(j, at));
  return gpu;
}

[[nodiscard]] Result<NicSpec> read_nic(const nlohmann::json& j, const std::string& at, std::int32_t index) {
  REFIT_TRY(require_known_keys(j, at,
                               {"id", "name", "node", "gbps", "latency_us", "gpus", "pci_bus_id",
                                "chunk_overhead_us", "transfer_overhead_us"},
                               kRoot));
  FieldReader f(j, at, kMaxId);
  NicSpec nic{.id = id32(f.integer_or("id", 0, index)),
              .name = f.label_or("name", ""),
              .node = id32(f.integer("node", 0)),
              .bandwidth = BytesPerSecond::from_gbps(f.number("gbps")),
              .latency = hw::micros(f.number("latency_us")),
              .gpus = gpu_ids_of(f.integers("gpus", 0)),
              .pci_bus_id = f.label_or("pci_bus_id", ""),
              .chunk_overhead = hw::micros(f.number_or("chunk_overhead_us", 0.0)),
              .transfer_overhead = hw::micros(f.number_or("transfer_overhead_us", 0.0))};
  REFIT_TRY(f.status());
  return nic;
}

[[nodiscard]] Result<DomainSpec> read_domain(const nlohmann::json& j, const std::string& at,
                                             std::int32_t index) {
  REFIT_TRY(require_known_keys(j, at, {"id", "gpus"}, kRoot));
  FieldReader f(j, at, kMaxId);
  DomainSpec domain{.id = id32(f.integer_or("id", 0, index)), .gpus = gpu_ids_of(f.integers("gpus", 0))};
  REFIT_TRY(f.status());
  return domain;
}

[[nodiscard]] Result<CacheSpec> read_cache(const nlohmann::json& j, const std::string& at, std::int32_t) {
  REFIT_TRY(require_known_keys(j, at,
                               {"node", "capacity_bytes", "nic_gbps", "latency_us", "chunk_overhead_us",
                                "transfer_overhead_us", "copy_gbps"},
                               kRoot));
  FieldReader f(j, at, kMaxId);
  FieldReader sizes(j, at);  // a capacity may pass 2 GiB, where ids may not
  CacheSpec cache{.node = id32(f.integer("node", 0)),
                  .capacity = Bytes{sizes.integer("capacity_bytes", 1)},
                  .nic_bandwidth = BytesPerSecond::from_gbps(f.number("nic_gbps")),
                  .nic_latency = hw::micros(f.number("latency_us")),
                  .chunk_overhead = hw::micros(f.number_or("chunk_overhead_us", 0.0)),
                  .transfer_overhead = hw::micros(f.number_or("transfer_overhead_us", 0.0)),
                  .copy_bandwidth = BytesPerSecond::from_gbps(f.number("copy_gbps"))};
  for (const auto* reader : {&f, &sizes}) REFIT_TRY(reader->status());
  return cache;
}

// An optional object field: absent reads as {}; its keys must be among `known`.
[[nodiscard]] Result<nlohmann::json> optional_object(const nlohmann::json& root, std::string_view key,
                                                     std::initializer_list<std::string_view> known) {
  const auto& value = json_fields::has(root, key) ? root.at(key) : nlohmann::json::object();
  REFIT_TRY(require_known_keys(value, std::string(key), known, kRoot));
  return value;
}

[[nodiscard]] Result<void> read_globals(const nlohmann::json& root, ClusterSpec& spec) {
  const auto fabric = REFIT_TRY(optional_object(root, "fabric", {"oversubscription"}));
  FieldReader f(root, "", kMaxId);
  spec.name = f.label_or("name", "");
  spec.nvlink_latency = hw::micros(f.number("nvlink_latency_us"));
  FieldReader fab(fabric, "fabric", kMaxId);
  if (fab.has("oversubscription")) spec.fabric.oversubscription = fab.number("oversubscription");
  for (const auto* reader : {&f, &fab}) REFIT_TRY(reader->status());
  return {};
}

// The file's placement: a rank map on `cluster`, or nothing when it places no rank.
[[nodiscard]] Result<std::optional<RankMap>> read_placement(const nlohmann::json& root,
                                                            const Cluster& cluster) {
  const auto placement = REFIT_TRY(optional_object(root, "placement", {"source_ranks", "rank_to_gpu"}));
  FieldReader place(placement, "placement", kMaxId);
  const auto source_ranks = id32(place.integer_or("source_ranks", 0, 0));
  const auto gpus =
      place.has("rank_to_gpu") ? gpu_ids_of(place.integers("rank_to_gpu", 0)) : std::vector<GpuId>{};
  REFIT_TRY(place.status());
  if (gpus.empty() && source_ranks == 0) return std::optional<RankMap>{};
  return REFIT_TRY_IN(RankMap::make(cluster, gpus, source_ranks), "placement");
}

}  // namespace

nlohmann::ordered_json cluster_to_json(const Cluster& cluster, const RankMap* ranks) {
  const auto& s = cluster.spec();
  Json j;
  j["name"] = s.name;
  j["nvlink_latency_us"] = us_field(s.nvlink_latency);
  j["fabric"] = {{"oversubscription", s.fabric.oversubscription}};
  j["gpus"] = Json::array();
  for (const auto& g : s.gpus) j["gpus"].push_back(gpu_to_json(g));
  j["domains"] = Json::array();
  for (const auto& d : s.domains) j["domains"].push_back({{"id", d.id}, {"gpus", gpu_ids(d.gpus)}});
  j["nics"] = Json::array();
  for (const auto& n : s.nics) j["nics"].push_back(nic_to_json(n));
  if (!s.caches.empty()) {
    j["caches"] = Json::array();
    for (const auto& c : s.caches) j["caches"].push_back(cache_to_json(c));
  }
  if (!s.assumptions.empty()) j["assumptions"] = s.assumptions;
  if (ranks != nullptr && ranks->rank_count() > 0)
    j["placement"] = {{"source_ranks", ranks->source_ranks()}, {"rank_to_gpu", gpu_ids(ranks->gpus())}};
  return j;
}

Result<ClusterFile> cluster_from_json(const nlohmann::json& json) {
  REFIT_TRY(require_known_keys(json, "",
                               {"name", "nvlink_latency_us", "fabric", "gpus", "domains", "nics", "caches",
                                "assumptions", "placement"},
                               kRoot));
  ClusterSpec spec;
  REFIT_TRY(read_globals(json, spec));
  REFIT_TRY(read_array(json, "gpus", spec.gpus, read_gpu));
  REFIT_TRY(read_array(json, "domains", spec.domains, read_domain));
  REFIT_TRY(read_array(json, "nics", spec.nics, read_nic));
  if (json_fields::has(json, "caches")) REFIT_TRY(read_array(json, "caches", spec.caches, read_cache));
  REFIT_TRY(read_assumptions(json, spec.assumptions));
  ClusterFile file{.cluster = REFIT_TRY(Cluster::make(std::move(spec))), .ranks = std::nullopt};
  file.ranks = REFIT_TRY(read_placement(json, file.cluster));
  return file;
}

Result<ClusterFile> parse_cluster_json(std::string_view text) {
  return cluster_from_json(REFIT_TRY(json_fields::parse_object(text, kRoot)));
}

Result<ClusterFile> load_cluster_file(const std::filesystem::path& path) {
  const auto text = REFIT_TRY(read_text_file(path));
  return REFIT_TRY_IN(parse_cluster_json(text), path.string());
}

}  // namespace refit
