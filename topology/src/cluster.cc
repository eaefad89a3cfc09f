#include "refit/topology/cluster.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/quantization.h"
#include "refit/core/try.h"

namespace refit {
namespace {

namespace lim = cluster_limits;

// Finite and within [kMinBandwidth, kMaxBandwidth], or 0 when `zero_ok` (also refuses nan).
bool bandwidth_ok(BytesPerSecond b, bool zero_ok) {
  return (zero_ok && b.value == 0) || (b >= lim::kMinBandwidth && b <= lim::kMaxBandwidth);
}

std::unexpected<Error> bandwidth_error(const std::string& field, BytesPerSecond b, bool zero_ok) {
  // A value past what a double holds in bytes/s (1e308 GB/s) is infinite here, not what was written.
  const auto given =
      std::isinf(b.value) ? std::string("beyond any bandwidth") : fmt::format("{} GB/s", b.gbps());
  return out_of_range(fmt::format("{} is {}, must be between {} and {} GB/s{}", field, given,
                                  lim::kMinBandwidth.gbps(), lim::kMaxBandwidth.gbps(),
                                  zero_ok ? " (or 0)" : ""));
}

bool latency_ok(Seconds s) { return s.value >= 0 && s <= lim::kMaxLatency; }

std::unexpected<Error> latency_error(const std::string& field, Seconds s) {
  return out_of_range(fmt::format("{} is {} us, must be between 0 and {}", field, s.value * 1e6,
                                  lim::kMaxLatency.value * 1e6));
}

[[nodiscard]] Result<void> check_counts(const ClusterSpec& s) {
  const auto cap = static_cast<std::size_t>(limits::kMaxRanks);
  if (s.gpus.size() > cap) return out_of_range(fmt::format("gpus: {} GPUs, at most {}", s.gpus.size(), cap));
  if (s.nics.size() > cap) return out_of_range(fmt::format("nics: {} NICs, at most {}", s.nics.size(), cap));
  return {};
}

// Names `gpus[i].quantize_gbps` where one rate serves every format, as the file then says it.
template <class At>
[[nodiscard]] Result<void> check_quantize_rates(const QuantizeRates& rates, const At& at) {
  const bool one = std::ranges::all_of(rates, [&](BytesPerSecond r) { return r == rates.front(); });
  for (const QuantScheme s : all_quant_schemes())
    if (const auto rate = of_scheme(rates, s); !bandwidth_ok(rate, true))
      return bandwidth_error(
          one ? at() + ".quantize_gbps" : fmt::format("{}.quantize_gbps.{}", at(), quant_scheme_name(s)),
          rate, true);
  return {};
}

[[nodiscard]] Result<void> check_gpus(const ClusterSpec& s) {
  if (s.gpus.empty()) return invalid("gpus: the cluster has no GPU");
  for (std::size_t i = 0; i < s.gpus.size(); ++i) {
    const auto& g = s.gpus[i];
    // Formatted only on an error: a cluster may have a million GPUs.
    const auto at = [i] { return fmt::format("gpus[{}]", i); };
    if (g.id.value != static_cast<std::int32_t>(i))
      return invalid(
          fmt::format("{}.id is {}, expected {} (ids are dense and in order)", at(), g.id.value, i));
    if (g.domain < 0 || g.domain >= static_cast<std::int32_t>(s.domains.size()))
      return not_found(
          fmt::format("{}.domain {} does not exist ({} domains)", at(), g.domain, s.domains.size()));
    if (g.node < 0 || g.node >= limits::kMaxRanks)
      return out_of_range(fmt::format("{}.node is {}, must be in [0, {})", at(), g.node, limits::kMaxRanks));
    if (!bandwidth_ok(g.nvlink_bandwidth, true))
      return bandwidth_error(at() + ".nvlink_gbps", g.nvlink_bandwidth, true);
    if (!bandwidth_ok(g.copy_bandwidth, false))
      return bandwidth_error(at() + ".copy_gbps", g.copy_bandwidth, false);
    REFIT_TRY(check_quantize_rates(g.quantize_bandwidth, at));
    if (const auto& n = g.nccl_costs) {
      if (!latency_ok(n->per_op)) return latency_error(at() + ".nccl_overhead_us.per_op", n->per_op);
      if (!latency_ok(n->per_step)) return latency_error(at() + ".nccl_overhead_us.per_step", n->per_step);
    }
  }
  return {};
}

[[nodiscard]] Result<void> check_domains(const ClusterSpec& s) {
  std::vector<int> seen(s.gpus.size(), -1);
  for (std::size_t d = 0; d < s.domains.size(); ++d) {
    const auto& dom = s.domains[d];
    const auto at = [d] { return fmt::format("domains[{}]", d); };
    if (dom.id != static_cast<std::int32_t>(d))
      return invalid(fmt::format("{}.id is {}, expected {}", at(), dom.id, d));
    if (dom.gpus.empty()) return invalid(fmt::format("{}.gpus is empty", at()));
    for (std::size_t k = 0; k < dom.gpus.size(); ++k) {
      const auto g = dom.gpus[k].value;
      const auto gat = [&] { return fmt::format("{}.gpus[{}]", at(), k); };
      if (g < 0 || g >= static_cast<std::int32_t>(s.gpus.size()))
        return not_found(fmt::format("{}: GPU {} does not exist", gat(), g));
      if (seen[static_cast<std::size_t>(g)] >= 0)
        return invalid(
            fmt::format("{}: GPU {} is already in domain {}", gat(), g, seen[static_cast<std::size_t>(g)]));
      seen[static_cast<std::size_t>(g)] = static_cast<int>(d);
      if (s.gpus[static_cast<std::size_t>(g)].domain != static_cast<std::int32_t>(d))
        return mismatch(
            fmt::format("{}: GPU {} says domain {}", gat(), g, s.gpus[static_cast<std::size_t>(g)].domain));
    }
  }
  for (std::size_t g = 0; g < seen.size(); ++g)
    if (seen[g] < 0) return invalid(fmt::format("gpus[{}] is in no domain", g));
  // What a domain's GPUs send each other crosses NVLink: a GPU without any is a domain of its own.
  for (const auto& dom : s.domains)
    for (const auto g : dom.gpus)
      if (dom.gpus.size() > 1 && s.gpus[static_cast<std::size_t>(g.value)].nvlink_bandwidth.value <= 0)
        return invalid(
            fmt::format("gpus[{}].nvlink_gbps is 0 in domain {} of {} GPUs: a GPU without NVLink is a "
                        "domain of its own",
                        g.value, dom.id, dom.gpus.size()));
  return {};
}

[[nodiscard]] Result<void> check_nics(const ClusterSpec& s) {
  // A GPU reaches the network through one NIC (the planner and simulator route it so).
  std::vector<int> served_by(s.gpus.size(), -1);
  for (std::size_t i = 0; i < s.nics.size(); ++i) {
    const auto& n = s.nics[i];
    const auto at = [i] { return fmt::format("nics[{}]", i); };
    if (n.id != static_cast<std::int32_t>(i))
      return invalid(fmt::format("{}.id is {}, expected {}", at(), n.id, i));
    if (n.node < 0 || n.node >= limits::kMaxRanks)
      return out_of_range(fmt::format("{}.node is {}, must be in [0, {})", at(), n.node, limits::kMaxRanks));
    if (!bandwidth_ok(n.bandwidth, false)) return bandwidth_error(at() + ".gbps", n.bandwidth, false);
    if (!latency_ok(n.latency)) return latency_error(at() + ".latency_us", n.latency);
    if (!latency_ok(n.chunk_overhead)) return latency_error(at() + ".chunk_overhead_us", n.chunk_overhead);
    if (!latency_ok(n.transfer_overhead))
      return latency_error(at() + ".transfer_overhead_us", n.transfer_overhead);
    std::set<std::int32_t> listed;
    for (std::size_t k = 0; k < n.gpus.size(); ++k) {
      const auto g = n.gpus[k].value;
      if (g < 0 || g >= static_cast<std::int32_t>(s.gpus.size()))
        return not_found(fmt::format("{}.gpus[{}]: GPU {} does not exist", at(), k, g));
      if (!listed.insert(g).second)
        return invalid(fmt::format("{}.gpus[{}]: GPU {} is listed twice", at(), k, g));
      if (s.gpus[static_cast<std::size_t>(g)].node != n.node)
        return mismatch(fmt::format("{}.gpus[{}]: GPU {} is on node {}, the NIC on node {}", at(), k, g,
                                    s.gpus[static_cast<std::size_t>(g)].node, n.node));
      if (auto& by = served_by[static_cast<std::size_t>(g)]; by >= 0)
        return invalid(
            fmt::format("{}.gpus[{}]: GPU {} is already served by nics[{}]: a GPU reaches the network "
                        "through one NIC",
                        at(), k, g, by));
      else
        by = static_cast<int>(i);
    }
  }
  return {};
}

// Each cache on a node some GPU is on, one per node, with figures a link could have.
[[nodiscard]] Result<void> check_caches(const ClusterSpec& s) {
  std::set<std::int32_t> nodes, cached;
  for (const auto& g : s.gpus) nodes.insert(g.node);
  for (std::size_t i = 0; i < s.caches.size(); ++i) {
    const auto& c = s.caches[i];
    const auto at = [i] { return fmt::format("caches[{}]", i); };
    if (!nodes.contains(c.node)) return not_found(fmt::format("{}.node: no GPU is on node {}", at(), c.node));
    if (!cached.insert(c.node).second)
      return invalid(fmt::format("{}.node: node {} already has a cache", at(), c.node));
    if (c.capacity.value < 1)
      return out_of_range(fmt::format("{}.capacity_bytes is {}, must be >= 1", at(), c.capacity.value));
    if (!bandwidth_ok(c.nic_bandwidth, false))
      return bandwidth_error(at() + ".nic_gbps", c.nic_bandwidth, false);
    if (!latency_ok(c.nic_latency)) return latency_error(at() + ".latency_us", c.nic_latency);
    if (!latency_ok(c.chunk_overhead)) return latency_error(at() + ".chunk_overhead_us", c.chunk_overhead);
    if (!latency_ok(c.transfer_overhead))
      return latency_error(at() + ".transfer_overhead_us", c.transfer_overhead);
    if (!bandwidth_ok(c.copy_bandwidth, false))
      return bandwidth_error(at() + ".copy_gbps", c.copy_bandwidth, false);
  }
  return {};
}

}  // namespace

Cluster::Cluster(ClusterSpec spec) : spec_(std::move(spec)), nic_of_gpu_(spec_.gpus.size(), -1) {
  for (const auto& n : spec_.nics)
    for (const auto g : n.gpus)
      if (nic_of_gpu_[static_cast<std::size_t>(g.value)] < 0)
        nic_of_gpu_[static_cast<std::size_t>(g.value)] = n.id;
  std::set<std::int32_t> nodes;
  for (const auto& g : spec_.gpus) nodes.insert(g.node);
  node_count_ = static_cast<std::int32_t>(nodes.size());
}

Result<Cluster> Cluster::make(ClusterSpec spec) {
  const double r = spec.fabric.oversubscription;
  if (!(r >= 1.0 && r <= lim::kMaxOversubscription))
    return out_of_range(
        fmt::format("fabric.oversubscription is {}, must be between 1 and {}", r, lim::kMaxOversubscription));
  if (!latency_ok(spec.nvlink_latency)) return latency_error("nvlink_latency_us", spec.nvlink_latency);
  for (auto check : {check_counts, check_gpus, check_domains, check_nics, check_caches})
    REFIT_TRY(check(spec));
  return Cluster(std::move(spec));
}

BytesPerSecond Cluster::domain_nic_bandwidth(std::int32_t domain) const {
  std::set<std::int32_t> nics;
  for (const auto g : spec_.domains[static_cast<std::size_t>(domain)].gpus)
    if (auto n = nic_of(g)) nics.insert(*n);
  BytesPerSecond total{0};
  for (auto n : nics) total = total + spec_.nics[static_cast<std::size_t>(n)].bandwidth;
  return total;
}

}  // namespace refit
