// The lower bound (docs/guide/planning.md, "The lower bound"). Every term counts only links a plan
// can use: a byte leaves a domain through the NIC of one of the job's ranks there (its holder's,
// or after an NVLink hop another rank's, of either side), never through a GPU the job leaves
// idle. A GPU's own links bound what enters and leaves it: NVLink plus its NIC, or NVLink alone
// when the job has one domain (no rank elsewhere to relay through, and a plan never puts a network
// link inside a domain). Bytes a GPU needs and already holds (a rank of each side on it) cross
// neither, but are still written into the destination's buffers: by the GPU's copies, or over a
// link from another holder.
#include <algorithm>
#include <limits>
#include <set>
#include <span>

#include "refit/core/overlap.h"
#include "refit/planner/plan_stats.h"

namespace refit {
namespace {

struct Needs {
  std::vector<double> domain_bytes;  // per domain, from outside
  std::vector<double> domain_only;   // per domain, bytes only it holds that another domain needs
  std::vector<double> single_nic;    // per NIC, leaving bytes that only it can carry out
  std::vector<double> gpu_bytes;     // per GPU, bytes it needs as a destination and lacks
  std::vector<double> gpu_only;      // per GPU, bytes only it holds that another GPU needs
  std::vector<double> gpu_filled;    // per GPU, bytes it needs as a destination, held or not
  double leaving_bytes = 0;          // unique bytes some domain needs from outside
};

// The NICs through which the job's ranks in one domain reach the network, each distinct NIC once;
// `unlimited` when one of them has no NIC (its network traffic crosses none, as the simulator
// routes it).
struct DomainNics {
  std::vector<std::int32_t> nics;
  bool unlimited = false;
};

std::vector<DomainNics> job_nics_by_domain(const ReshardProblem& p, const PlacedCluster& c) {
  std::vector<DomainNics> out(c.cluster().domains().size());
  for (std::int32_t r = 0; r < p.source_ranks() + p.destination_ranks(); ++r) {
    auto& d = out[static_cast<std::size_t>(c.domain_of(Rank{r}))];
    const auto nic = c.nic_of(Rank{r});
    if (!nic)
      d.unlimited = true;
    else if (std::ranges::find(d.nics, *nic) == d.nics.end())
      d.nics.push_back(*nic);
  }
  return out;
}

// What the piece at hand needs of the network, from the domains of its holders.
struct Leaving {
  const std::vector<DomainNics>& nics;
  std::vector<std::int32_t> holder_domains;  // distinct

  void set_holders(const std::vector<Rank>& holders, const PlacedCluster& c) {
    holder_domains.clear();
    for (const Rank h : holders)
      if (std::ranges::find(holder_domains, c.domain_of(h)) == holder_domains.end())
        holder_domains.push_back(c.domain_of(h));
  }
  bool held_in(std::int32_t domain) const {
    return std::ranges::find(holder_domains, domain) != holder_domains.end();
  }
  // The one NIC through which every holder's domain reaches the network, if there is one: with
  // another, a plan could relay the bytes over NVLink to a rank behind that one.
  std::optional<std::int32_t> only_nic() const {
    std::optional<std::int32_t> only;
    for (const auto d : holder_domains) {
      const auto& n = nics[static_cast<std::size_t>(d)];
      if (n.unlimited || n.nics.size() != 1 || (only && *only != n.nics.front())) return std::nullopt;
      only = n.nics.front();
    }
    return only;
  }
};

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// What the domains' uplinks carry each way on an oversubscribed fabric ((sum of the domain's NIC
// bandwidth) / r); unlimited on a fabric that is not, where no uplink is in the way.
double uplink_bandwidth(const PlacedCluster& c, std::int32_t domain) {
  const double r = c.cluster().fabric().oversubscription;
  return r > 1.0 ? c.cluster().domain_nic_bandwidth(domain).value / r : kUnlimited;
}

// What the NICs of the job's ranks in `domains` carry at once each way: each distinct NIC once
// (one NIC may serve several domains: a calibrated host's every process is a domain behind one
// shared-memory "NIC"); unlimited when one of those ranks has no NIC.
double nic_bandwidth_of(const std::vector<DomainNics>& nics, std::span<const std::int32_t> domains,
                        const PlacedCluster& c) {
  std::set<std::int32_t> distinct;
  for (const auto d : domains) {
    const auto& n = nics[static_cast<std::size_t>(d)];
    if (n.unlimited) return kUnlimited;
    distinct.insert(n.nics.begin(), n.nics.end());
  }
  double total = 0;
  for (const auto n : distinct) total += c.cluster().nics()[static_cast<std::size_t>(n)].bandwidth.value;
  return total;
}

// What can leave or enter one domain over the network at once: its job ranks' NICs, or on an
// oversubscribed fabric its uplinks, where those are narrower.
double domain_network_bandwidth(const std::vector<DomainNics>& nics, std::int32_t domain,
                                const PlacedCluster& c) {
  return std::min(nic_bandwidth_of(nics, std::span(&domain, 1), c), uplink_bandwidth(c, domain));
}

// The distinct GPUs of `ranks` (a shard's few holders), in `out`.
void gpus_of(const std::vector<Rank>& ranks, const PlacedCluster& c, std::vector<std::int32_t>& out) {
  out.clear();
  for (Rank r : ranks) out.push_back(c.gpu_of(r).value);
  std::ranges::sort(out);
  out.erase(std::ranges::unique(out).begin(), out.end());
}

// A piece's bytes at the GPUs `needing` it: each that lacks it must take them in; if one GPU
// holds them all and another needs them, they must leave that one. Holders and replicas are few:
// linear scans, no allocation per piece.
void add_gpu_needs(Needs& n, const std::vector<Rank>& holders, const std::vector<std::int32_t>& needing,
                   const PlacedCluster& c, double bytes) {
  const auto holds = [&](std::int32_t g) {
    return std::ranges::any_of(holders, [&](Rank h) { return c.gpu_of(h).value == g; });
  };
  bool elsewhere = false;
  for (const std::int32_t g : needing) {
    n.gpu_filled[static_cast<std::size_t>(g)] += bytes;
    if (!holds(g)) {
      n.gpu_bytes[static_cast<std::size_t>(g)] += bytes;
      elsewhere = true;
    }
  }
  const std::int32_t first = c.gpu_of(holders.front()).value;
  if (elsewhere && std::ranges::all_of(holders, [&](Rank h) { return c.gpu_of(h).value == first; }))
    n.gpu_only[static_cast<std::size_t>(first)] += bytes;
}

void add_tensor(Needs& n, Leaving& leaving, const TensorReshard& t, const Overlap& o,
                const PlacedCluster& c) {
  const double elem = static_cast<double>(dtype_size(t.tensor.dtype));
  std::vector<std::int32_t> needing;
  for (const auto& d : o.destinations) {
    std::set<std::int32_t> domains;
    for (Rank r : d.shard.holders) domains.insert(c.domain_of(r));
    gpus_of(d.shard.holders, c, needing);
    for (const auto& p : d.pieces) {
      const double bytes = static_cast<double>(p.box.volume()) * elem;
      const auto& holders = o.holders(p);
      add_gpu_needs(n, holders, needing, c, bytes);
      leaving.set_holders(holders, c);
      bool leaves = false;
      for (auto dom : domains)
        if (!leaving.held_in(dom)) {
          n.domain_bytes[static_cast<std::size_t>(dom)] += bytes;
          leaves = true;
        }
      if (!leaves) continue;
      n.leaving_bytes += bytes;
      if (leaving.holder_domains.size() == 1)
        n.domain_only[static_cast<std::size_t>(leaving.holder_domains.front())] += bytes;
      if (auto nic = leaving.only_nic()) n.single_nic[static_cast<std::size_t>(*nic)] += bytes;
    }
  }
}

// What the bytes leaving the source side cross at once: the transmit side of the NICs of the
// job's ranks in the source ranks' domains and, on an oversubscribed fabric, those domains'
// uplinks. Either caps the rate, so the smaller sum does.
double source_side_bandwidth(const ReshardProblem& p, const std::vector<DomainNics>& nics,
                             const PlacedCluster& c) {
  std::vector<std::int32_t> domains;
  for (std::int32_t r = 0; r < p.source_ranks(); ++r)
    if (std::ranges::find(domains, c.domain_of(Rank{r})) == domains.end())
      domains.push_back(c.domain_of(Rank{r}));
  double uplinks = 0;
  for (const auto d : domains) uplinks += uplink_bandwidth(c, d);
  return std::min(nic_bandwidth_of(nics, domains, c), uplinks);
}

bool one_domain(const ReshardProblem& p, const PlacedCluster& c) {
  const std::int32_t ranks = p.source_ranks() + p.destination_ranks();
  for (std::int32_t r = 1; r < ranks; ++r)
    if (c.domain_of(Rank{r}) != c.domain_of(Rank{0})) return false;
  return true;
}

// What a GPU's bytes in or out may cross: its NVLink, and where the job has another domain its NIC
// (unlimited without one: its network traffic crosses none).
double gpu_links(const PlacedCluster& c, std::size_t g, bool alone) {
  const GpuId gpu{static_cast<std::int32_t>(g)};
  const double nvlink = c.cluster().gpu(gpu).nvlink_bandwidth.value;
  if (alone) return nvlink;
  const auto nic = c.cluster().nic_of(gpu);
  return nic ? nvlink + c.cluster().nics()[static_cast<std::size_t>(*nic)].bandwidth.value : kUnlimited;
}

// Bytes over an unlimited bandwidth take no time; over none, forever.
Seconds ratio(double bytes, double bytes_per_second) {
  if (bytes <= 0) return Seconds{0};
  return Seconds{bytes_per_second > 0 ? bytes / bytes_per_second : std::numeric_limits<double>::infinity()};
}

}  // namespace

LowerBound lower_bound(const ReshardProblem& problem, const PlacedCluster& c) {
  return lower_bound(problem, c, {});
}

LowerBound lower_bound(const ReshardProblem& problem, const PlacedCluster& c,
                       const std::vector<bool>& moved) {
  const auto nics = job_nics_by_domain(problem, c);
  const std::size_t domains = c.cluster().domains().size();
  Needs n{.domain_bytes = std::vector<double>(domains),
          .domain_only = std::vector<double>(domains),
          .single_nic = std::vector<double>(c.cluster().nics().size()),
          .gpu_bytes = std::vector<double>(c.cluster().gpus().size()),
          .gpu_only = std::vector<double>(c.cluster().gpus().size()),
          .gpu_filled = std::vector<double>(c.cluster().gpus().size()),
          .leaving_bytes = 0};
  Leaving leaving{.nics = nics, .holder_domains = {}};
  for (std::size_t i = 0; i < problem.tensors().size(); ++i) {
    const auto& t = problem.tensors()[i];
    if (!moved.empty() && !moved[i]) continue;
    if (auto o = overlaps(t.source, t.destination)) add_tensor(n, leaving, t, *o, c);
  }

  LowerBound lb;
  for (std::size_t d = 0; d < domains; ++d) {
    const double network = domain_network_bandwidth(nics, static_cast<std::int32_t>(d), c);
    lb.domain_need.push_back(Bytes{static_cast<std::int64_t>(n.domain_bytes[d])});
    lb.destination_domain = std::max(lb.destination_domain, ratio(n.domain_bytes[d], network));
    lb.source_domain = std::max(lb.source_domain, ratio(n.domain_only[d], network));
  }
  lb.source_side = ratio(n.leaving_bytes, source_side_bandwidth(problem, nics, c));
  for (std::size_t k = 0; k < n.single_nic.size(); ++k)
    lb.source_nic = std::max(lb.source_nic, ratio(n.single_nic[k], c.cluster().nics()[k].bandwidth.value));
  const bool alone = one_domain(problem, c);
  for (std::size_t g = 0; g < n.gpu_bytes.size(); ++g) {
    lb.gpu_ingress = std::max(lb.gpu_ingress, ratio(n.gpu_bytes[g], gpu_links(c, g, alone)));
    lb.gpu_egress = std::max(lb.gpu_egress, ratio(n.gpu_only[g], gpu_links(c, g, alone)));
    const double copies = c.cluster().gpu(GpuId{static_cast<std::int32_t>(g)}).copy_bandwidth.value;
    lb.gpu_fill = std::max(lb.gpu_fill, ratio(n.gpu_filled[g], copies + gpu_links(c, g, alone)));
  }
  const std::pair<Seconds, const char*> terms[] = {{lb.destination_domain, "destination domain NIC receive"},
                                                   {lb.source_side, "source side NIC send"},
                                                   {lb.source_domain, "source domain NIC send"},
                                                   {lb.source_nic, "single source NIC"},
                                                   {lb.gpu_ingress, "GPU ingress"},
                                                   {lb.gpu_egress, "GPU egress"},
                                                   {lb.gpu_fill, "GPU fill"}};
  for (const auto& [t, name] : terms)
    if (t > lb.time || lb.binding.empty()) {
      lb.time = t;
      lb.binding = name;
    }
  return lb;
}

}  // namespace refit
