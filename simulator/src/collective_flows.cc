#include "collective_flows.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "refit/core/index.h"

namespace refit::sim {
namespace {

// A maximal run of consecutive ring ranks in one domain, with the distinct NICs of its members
// in ring order.
struct DomainRun {
  std::int32_t domain = 0;
  std::vector<std::int32_t> nics;
};

void add_nic(DomainRun& run, std::optional<std::int32_t> nic) {
  if (nic && std::ranges::find(run.nics, *nic) == run.nics.end()) run.nics.push_back(*nic);
}

// A closed ring that ends in the domain it starts in has one run there, entered by the last
// edge and left by the first.
std::vector<DomainRun> domain_runs(std::span<const Rank> ranks, bool closed, const PlacedCluster& c) {
  std::vector<DomainRun> runs;
  for (const Rank r : ranks) {
    if (runs.empty() || runs.back().domain != c.domain_of(r)) runs.push_back({c.domain_of(r), {}});
    add_nic(runs.back(), c.nic_of(r));
  }
  if (closed && runs.size() > 1 && runs.front().domain == runs.back().domain) {
    for (const auto nic : runs.front().nics) add_nic(runs.back(), nic);
    runs.front().nics = std::move(runs.back().nics);
    runs.pop_back();
  }
  return runs;
}

// The NIC through which channel `c` leaves or enters a run: its c-th NIC, or none.
std::optional<std::int32_t> channel_nic(const DomainRun& run, std::size_t c) {
  if (run.nics.empty()) return std::nullopt;
  return run.nics[c % run.nics.size()];
}

std::int32_t channel_count(const std::vector<DomainRun>& runs) {
  if (runs.size() < 2) return 1;
  std::size_t fewest = runs.front().nics.size();
  for (const auto& run : runs) fewest = std::min(fewest, run.nics.size());
  return static_cast<std::int32_t>(std::max<std::size_t>(1, fewest));
}

}  // namespace

CollectiveFlows collective_flows(const Collective& collective, const PlacedCluster& cluster,
                                 const LinkResources& links) {
  const bool closed = collective.kind == CollectiveKind::kAllGather;
  const auto runs = domain_runs(collective.ranks, closed, cluster);
  std::vector<Rank> ring = collective.ranks;
  if (closed) ring.push_back(ring.front());
  const std::int32_t channels = channel_count(runs);
  const double n = static_cast<double>(collective.ranks.size());
  const double link_bytes =
      static_cast<double>(collective.bytes.value) * (closed ? (n - 1) / n : 1.0) / collective.efficiency;
  CollectiveFlows out;
  out.crosses_network = runs.size() > 1;
  for (std::int32_t c = 0; c < channels; ++c) {
    ChannelFlow flow{.resources = {},
                     .bytes = Bytes{static_cast<std::int64_t>(std::ceil(link_bytes / channels))}};
    std::size_t run = 0;
    for (std::size_t i = 0; i + 1 < ring.size(); ++i) {
      const Rank a = ring[i], b = ring[i + 1];
      if (cluster.domain_of(a) == cluster.domain_of(b)) {
        flow.resources.push_back(links.nvlink_out[at(cluster.gpu_of(a).value)]);
        flow.resources.push_back(links.nvlink_in[at(cluster.gpu_of(b).value)]);
        continue;
      }
      const std::size_t next = (run + 1) % runs.size();
      const auto exit = channel_nic(runs[run], at(c));
      const auto enter = channel_nic(runs[next], at(c));
      if (exit) flow.resources.push_back(links.nic_tx[at(*exit)]);
      if (enter) flow.resources.push_back(links.nic_rx[at(*enter)]);
      if (!links.uplink_out.empty()) {
        flow.resources.push_back(links.uplink_out[at(cluster.domain_of(a))]);
        flow.resources.push_back(links.uplink_in[at(cluster.domain_of(b))]);
      }
      run = next;
    }
    out.channels.push_back(std::move(flow));
  }
  return out;
}

}  // namespace refit::sim
