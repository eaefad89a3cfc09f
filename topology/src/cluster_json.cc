#include "refit/topology/cluster_json.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "hardware_constants.h"
#include "json_fields.h"
#include "text_file.h"

namespace refit {
namespace {

using detail::JsonFields;
using Json = nlohmann::ordered_json;

// The decimal x for which `read(x)` (the loader's conversion) gives back exactly `value`.
// Prefer a short decimal (12 significant digits) so that files stay readable, else search the
// doubles next to value/scale: the conversion rounds, so the plain quotient may miss by an ulp.
template <class Read>
double exact_decimal(double value, double scale, Read read) {
  const double raw = value / scale;
  const double shortest = std::stod(fmt::format("{:.12g}", raw));
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

Json gpu_to_json(const GpuSpec& g) {
  Json j{{"id", g.id.value},
         {"node", g.node},
         {"domain", g.domain},
         {"nvlink_gbps", gbps_field(g.nvlink_bandwidth)},
         {"copy_gbps", gbps_field(g.copy_bandwidth)}};
  if (!g.pci_bus_id.empty()) j["pci_bus_id"] = g.pci_bus_id;
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
  return j;
}

// Reads each element of the array `key` with `read_one`, appending to `out`.
template <class T, class ReadOne>
Result<void> read_array(const JsonFields& f, std::string_view key, std::vector<T>& out, ReadOne read_one) {
  auto items = f.array(key);
  if (!items) return std::unexpected(items.error());
  for (std::size_t i = 0; i < items->size(); ++i) {
    auto item = read_one(*(*items)[i].first, (*items)[i].second, static_cast<std::int32_t>(i));
    if (!item) return std::unexpected(item.error());
    out.push_back(std::move(*item));
  }
  return {};
}

Result<GpuSpec> read_gpu(const nlohmann::json& j, const std::string& at, std::int32_t index) {
  auto f = JsonFields::open(j, at, {"id", "node", "domain", "nvlink_gbps", "copy_gbps", "pci_bus_id"});
  if (!f) return std::unexpected(f.error());
  auto id = f->integer_or("id", index);
  auto node = f->integer("node");
  auto domain = f->integer("domain");
  auto nvlink = f->number("nvlink_gbps");
  auto copy = f->number("copy_gbps");
  auto pci = f->string_or("pci_bus_id", "");
  if (auto e = detail::first_error(id, node, domain, nvlink, copy, pci)) return std::unexpected(*e);
  return GpuSpec{
      GpuId{*id}, *node, *domain, BytesPerSecond::from_gbps(*nvlink), BytesPerSecond::from_gbps(*copy), *pci};
}

Result<NicSpec> read_nic(const nlohmann::json& j, const std::string& at, std::int32_t index) {
  auto f = JsonFields::open(j, at, {"id", "name", "node", "gbps", "latency_us", "gpus", "pci_bus_id"});
  if (!f) return std::unexpected(f.error());
  auto id = f->integer_or("id", index);
  auto name = f->string_or("name", "");
  auto node = f->integer("node");
  auto gbps = f->number("gbps");
  auto latency = f->number("latency_us");
  auto gpus = f->gpu_list("gpus");
  auto pci = f->string_or("pci_bus_id", "");
  if (auto e = detail::first_error(id, name, node, gbps, latency, gpus, pci)) return std::unexpected(*e);
  return NicSpec{*id, *name, *node, BytesPerSecond::from_gbps(*gbps), hw::micros(*latency), *gpus, *pci};
}

Result<DomainSpec> read_domain(const nlohmann::json& j, const std::string& at, std::int32_t index) {
  auto f = JsonFields::open(j, at, {"id", "gpus"});
  if (!f) return std::unexpected(f.error());
  auto id = f->integer_or("id", index);
  auto gpus = f->gpu_list("gpus");
  if (auto e = detail::first_error(id, gpus)) return std::unexpected(*e);
  return DomainSpec{*id, *gpus};
}

Result<void> read_globals(const JsonFields& root, ClusterSpec& spec) {
  auto name = root.string_or("name", "");
  if (!name) return std::unexpected(name.error());
  spec.name = *name;
  auto latency = root.number("nvlink_latency_us");
  if (!latency) return std::unexpected(latency.error());
  spec.nvlink_latency = hw::micros(*latency);
  auto fabric = root.object_or_empty("fabric", {"oversubscription"});
  if (!fabric) return std::unexpected(fabric.error());
  if (fabric->has("oversubscription")) {
    auto ratio = fabric->number("oversubscription");
    if (!ratio) return std::unexpected(ratio.error());
    spec.fabric.oversubscription = *ratio;
  }
  auto placement = root.object_or_empty("placement", {"source_ranks", "rank_to_gpu"});
  if (!placement) return std::unexpected(placement.error());
  auto source = placement->integer_or("source_ranks", 0);
  if (!source) return std::unexpected(source.error());
  spec.source_ranks = *source;
  if (placement->has("rank_to_gpu")) {
    auto ranks = placement->gpu_list("rank_to_gpu");
    if (!ranks) return std::unexpected(ranks.error());
    spec.rank_to_gpu = *ranks;
  }
  return {};
}

}  // namespace

nlohmann::ordered_json cluster_to_json(const Cluster& cluster) {
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
  j["placement"] = {{"source_ranks", s.source_ranks}, {"rank_to_gpu", gpu_ids(s.rank_to_gpu)}};
  return j;
}

Result<Cluster> cluster_from_json(const nlohmann::json& json) {
  auto root = JsonFields::open(
      json, "", {"name", "nvlink_latency_us", "fabric", "gpus", "domains", "nics", "placement"});
  if (!root) return std::unexpected(root.error());
  ClusterSpec spec;
  if (auto ok = read_globals(*root, spec); !ok) return std::unexpected(ok.error());
  if (auto ok = read_array(*root, "gpus", spec.gpus, read_gpu); !ok) return std::unexpected(ok.error());
  if (auto ok = read_array(*root, "domains", spec.domains, read_domain); !ok)
    return std::unexpected(ok.error());
  if (auto ok = read_array(*root, "nics", spec.nics, read_nic); !ok) return std::unexpected(ok.error());
  return Cluster::make(std::move(spec));
}

Result<Cluster> parse_cluster_json(std::string_view text) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ...".
    const std::string_view what = e.what();
    const auto tag_end = what.find("] ");
    return invalid(fmt::format("not valid JSON: {}",
                               tag_end == std::string_view::npos ? what : what.substr(tag_end + 2)));
  }
  return cluster_from_json(json);
}

Result<Cluster> load_cluster_file(const std::filesystem::path& path, const RankPlacementOptions& placement) {
  auto text = detail::read_text_file(path);
  if (!text) return std::unexpected(text.error());
  auto cluster = parse_cluster_json(*text);
  if (!cluster) return std::unexpected(std::move(cluster.error()).in(path.string()));
  if (required_gpus(placement) == 0) return cluster;
  ClusterSpec spec = cluster->spec();
  if (auto placed = place_ranks(spec, placement); !placed) return std::unexpected(placed.error());
  return Cluster::make(std::move(spec));
}

}  // namespace refit
