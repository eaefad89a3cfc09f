// The lower bound (docs/guide/planning.md, "The lower bound"), with its term that is just as
// unbeatable as the others: bytes whose every holder sits behind one NIC must cross that NIC at
// least once. A GPU's own links bound what enters and leaves it: NVLink plus its NIC, or NVLink
// alone when the job has one domain (no rank elsewhere to relay through, and a plan never puts a
// network link inside a domain). Bytes a GPU needs and already holds (a rank of each side on it)
// cross neither.
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
  std::vector<double> single_nic;    // per NIC, bytes only it can send
  std::vector<double> gpu_bytes;     // per GPU, bytes it needs as a destination and lacks
  std::vector<double> gpu_only;      // per GPU, bytes only it holds that another GPU needs
  double leaving_bytes = 0;          // unique bytes some domain needs from outside
};

bool holder_in(const std::vector<Rank>& holders, const PlacedCluster& c, std::int32_t domain) {
  return std::ranges::any_of(holders, [&](Rank h) { return c.domain_of(h) == domain; });
}

// The NIC every holder sits behind, if there is one: a holder without a NIC sends over the network
// through none (as the simulator routes it), so it does not count as behind one.
std::optional<std::int32_t> only_nic(const std::vector<Rank>& holders, const PlacedCluster& c) {
  std::set<std::int32_t> nics;
  for (Rank h : holders) {
    const auto n = c.nic_of(h);
    if (!n) return std::nullopt;
    nics.insert(*n);
  }
  return nics.size() == 1 ? std::optional(*nics.begin()) : std::nullopt;
}

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// What the domains' uplinks carry each way on an oversubscribed fabric ((sum of the domain's NIC
// bandwidth) / r); unlimited on a fabric that is not, where no uplink is in the way.
double uplink_bandwidth(const PlacedCluster& c, std::int32_t domain) {
  const double r = c.cluster().fabric().oversubscription;
  return r > 1.0 ? c.cluster().domain_nic_bandwidth(domain).value / r : kUnlimited;
}

// What the NICs of `ranks` carry at once each way: each distinct NIC once; unlimited when one of
// them has no NIC (its network traffic crosses none).
double nic_bandwidth_of(std::span<const Rank> ranks, const PlacedCluster& c) {
  std::set<std::int32_t> nics;
  for (const Rank r : ranks) {
    const auto n = c.nic_of(r);
    if (!n) return kUnlimited;
    nics.insert(*n);
  }
  double total = 0;
  for (const auto n : nics) total += c.cluster().nics()[static_cast<std::size_t>(n)].bandwidth.value;
  return total;
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
  for (const std::int32_t g : needing)
    if (!holds(g)) {
      n.gpu_bytes[static_cast<std::size_t>(g)] += bytes;
      elsewhere = true;
    }
  const std::int32_t first = c.gpu_of(holders.front()).value;
  if (elsewhere && std::ranges::all_of(holders, [&](Rank h) { return c.gpu_of(h).value == first; }))
    n.gpu_only[static_cast<std::size_t>(first)] += bytes;
}

void add_tensor(Needs& n, const TensorReshard& t, const Overlap& o, const PlacedCluster& c) {
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
      bool leaves = false;
      for (auto dom : domains)
        if (!holder_in(holders, c, dom)) {
          n.domain_bytes[static_cast<std::size_t>(dom)] += bytes;
          leaves = true;
        }
      if (!leaves) continue;
      n.leaving_bytes += bytes;
      if (auto nic = only_nic(holders, c)) n.single_nic[static_cast<std::size_t>(*nic)] += bytes;
    }
  }
}

// What the bytes leaving the source side cross at once: the transmit side of the source ranks'
// NICs and, on an oversubscribed fabric, the uplinks of their domains ((sum of a domain's NIC
// bandwidth) / r each). Either caps the rate, so the smaller sum does. Where NICs serve one domain
// each, the uplinks' sum is the NICs' / r; a NIC shared by several domains (a calibrated host:
// every process a domain behind one shared-memory "NIC") counts once among the NICs but gives
// each of its domains an uplink of its own.
double source_side_bandwidth(const ReshardProblem& p, const PlacedCluster& c) {
  std::vector<Rank> sources;
  std::set<std::int32_t> domains;
  for (std::int32_t r = 0; r < p.source_ranks(); ++r) {
    sources.push_back(Rank{r});
    domains.insert(c.domain_of(Rank{r}));
  }
  double uplinks = 0;
  for (const auto d : domains) uplinks += uplink_bandwidth(c, d);
  return std::min(nic_bandwidth_of(sources, c), uplinks);
}

// What can enter each domain over the network at once: a rank receives through its own GPU's NIC,
// so the NICs of the job's ranks there (not the NICs of GPUs the job leaves idle), and on an
// oversubscribed fabric the domain's uplinks: the smaller.
std::vector<double> domain_receive_bandwidth(const ReshardProblem& p, const PlacedCluster& c) {
  std::vector<std::vector<Rank>> ranks(c.cluster().domains().size());
  for (std::int32_t r = 0; r < p.source_ranks() + p.destination_ranks(); ++r)
    ranks[static_cast<std::size_t>(c.domain_of(Rank{r}))].push_back(Rank{r});
  std::vector<double> out;
  for (std::size_t d = 0; d < ranks.size(); ++d)
    out.push_back(std::min(nic_bandwidth_of(ranks[d], c), uplink_bandwidth(c, static_cast<std::int32_t>(d))));
  return out;
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
  Needs n{.domain_bytes = std::vector<double>(c.cluster().domains().size()),
          .single_nic = std::vector<double>(c.cluster().nics().size()),
          .gpu_bytes = std::vector<double>(c.cluster().gpus().size()),
          .gpu_only = std::vector<double>(c.cluster().gpus().size()),
          .leaving_bytes = 0};
  for (std::size_t i = 0; i < problem.tensors().size(); ++i) {
    const auto& t = problem.tensors()[i];
    if (!moved.empty() && !moved[i]) continue;
    if (auto o = overlaps(t.source, t.destination)) add_tensor(n, t, *o, c);
  }

  LowerBound lb;
  const auto receive = domain_receive_bandwidth(problem, c);
  for (std::size_t d = 0; d < n.domain_bytes.size(); ++d) {
    lb.domain_need.push_back(Bytes{static_cast<std::int64_t>(n.domain_bytes[d])});
    lb.destination_domain = std::max(lb.destination_domain, ratio(n.domain_bytes[d], receive[d]));
  }
  lb.source_side = ratio(n.leaving_bytes, source_side_bandwidth(problem, c));
  for (std::size_t k = 0; k < n.single_nic.size(); ++k)
    lb.source_nic = std::max(lb.source_nic, ratio(n.single_nic[k], c.cluster().nics()[k].bandwidth.value));
  const bool alone = one_domain(problem, c);
  for (std::size_t g = 0; g < n.gpu_bytes.size(); ++g) {
    lb.gpu_ingress = std::max(lb.gpu_ingress, ratio(n.gpu_bytes[g], gpu_links(c, g, alone)));
    lb.gpu_egress = std::max(lb.gpu_egress, ratio(n.gpu_only[g], gpu_links(c, g, alone)));
  }
  const std::pair<Seconds, const char*> terms[] = {{lb.destination_domain, "destination domain NIC receive"},
                                                   {lb.source_side, "source side NIC send"},
                                                   {lb.source_nic, "single source NIC"},
                                                   {lb.gpu_ingress, "GPU ingress"},
                                                   {lb.gpu_egress, "GPU egress"}};
  for (const auto& [t, name] : terms)
    if (t > lb.time || lb.binding.empty()) {
      lb.time = t;
      lb.binding = name;
    }
  return lb;
}

}  // namespace refit
