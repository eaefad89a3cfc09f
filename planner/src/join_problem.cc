// join_problem (membership.h): filling a joining engine as a problem in a rank space of its own,
// whose source side is the training ranks and the peers' ranks.
#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "engine_layouts.h"
#include "refit/core/try.h"
#include "refit/planner/membership.h"

namespace refit {
namespace {

std::size_t at(std::int32_t i) { return static_cast<std::size_t>(i); }

std::vector<std::int32_t> peers_used(const JoinOptions& o) {
  return o.source == JoinSource::kTraining ? std::vector<std::int32_t>{} : o.peers;
}

[[nodiscard]] Result<void> check_join(const JoinOptions& o, const ReshardProblem& problem) {
  REFIT_TRY(check_member_engines(MemberEngines{.engines = o.engines, .members = {0}}, problem));
  if (o.joining < 0 || o.joining >= o.engines)
    return out_of_range(fmt::format("joining engine {} is not in [0, {})", o.joining, o.engines));
  for (std::size_t i = 0; i < o.peers.size(); ++i) {
    const auto e = o.peers[i];
    if (e < 0 || e >= o.engines)
      return out_of_range(fmt::format("peer engine {} is not in [0, {})", e, o.engines));
    if (e == o.joining) return invalid(fmt::format("engine {} joins, so it cannot be a peer", e));
    if (i > 0 && e <= o.peers[i - 1])
      return invalid(
          fmt::format("peer engine {} follows {}: peers are ascending and distinct", e, o.peers[i - 1]));
  }
  if (o.source == JoinSource::kPeers && o.peers.empty())
    return invalid("a join from peers only needs at least one peer engine");
  return {};
}

// Where each global rank goes in the join's rank space (-1: not there), and back.
struct Renumbering {
  std::vector<std::int32_t> peer;     // by global rank: its rank as a peer, or -1
  std::vector<std::int32_t> joining;  // by global rank: its rank in the joining engine, or -1
  std::vector<Rank> global;           // by join rank
  std::int32_t training_ranks = 0;    // 0 when only peers send
  std::int32_t source_ranks = 0;      // training ranks and peers' ranks
};

Renumbering renumber(const ReshardProblem& problem, const JoinOptions& o) {
  Renumbering r{.peer = std::vector<std::int32_t>(at(problem.world_size()), -1),
                .joining = std::vector<std::int32_t>(at(problem.world_size()), -1),
                .global = {},
                .training_ranks = o.source == JoinSource::kPeers ? 0 : problem.source_ranks(),
                .source_ranks = 0};
  for (std::int32_t g = 0; g < r.training_ranks; ++g) r.global.push_back(Rank{g});
  for (const auto e : peers_used(o))
    for (const Rank g : engine_ranks(problem, o.engines, e)) {
      r.peer[at(g.value)] = static_cast<std::int32_t>(r.global.size());
      r.global.push_back(g);
    }
  r.source_ranks = static_cast<std::int32_t>(r.global.size());
  for (const Rank g : engine_ranks(problem, o.engines, o.joining)) {
    r.joining[at(g.value)] = static_cast<std::int32_t>(r.global.size());
    r.global.push_back(g);
  }
  return r;
}

// The summed bandwidth of the distinct NICs of `ranks`.
double send_bandwidth(const PlacedCluster& cluster, const std::vector<Rank>& ranks) {
  std::set<std::int32_t> nics;
  for (const Rank r : ranks)
    if (const auto n = cluster.nic_of(r)) nics.insert(*n);
  double sum = 0;
  for (const auto n : nics) sum += cluster.cluster().nics()[at(n)].bandwidth.value;
  return sum;
}

// Per tensor, whether the peers send it. kBoth balances bytes over the two sides' NICs: the
// largest tensors first, each to the side that would have sent its bytes so far sooner (bytes
// over the side's summed NIC bandwidth), the peers on a tie.
std::vector<bool> peer_tensors(const ReshardProblem& problem, const PlacedCluster& cluster,
                               const JoinOptions& o, const Renumbering& r) {
  const auto n = problem.tensors().size();
  if (o.source != JoinSource::kBoth) return std::vector<bool>(n, o.source == JoinSource::kPeers);
  const std::vector<Rank> training(r.global.begin(), r.global.begin() + r.training_ranks);
  const std::vector<Rank> peers(r.global.begin() + r.training_ranks, r.global.begin() + r.source_ranks);
  const double bandwidth[2] = {send_bandwidth(cluster, training), send_bandwidth(cluster, peers)};
  double bytes[2] = {0, 0};
  auto finish = [&](int side, double more) {
    return bandwidth[side] > 0 ? (bytes[side] + more) / bandwidth[side]
                               : std::numeric_limits<double>::infinity();
  };
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::ranges::stable_sort(order, std::greater{},
                           [&](std::size_t t) { return problem.tensors()[t].tensor.bytes().value; });
  std::vector<bool> out(n, false);
  for (const auto t : order) {
    const auto b = static_cast<double>(problem.tensors()[t].tensor.bytes().value);
    const int side = finish(1, b) <= finish(0, b) ? 1 : 0;
    bytes[side] += b;
    out[t] = side == 1;
  }
  return out;
}

}  // namespace

Result<JoinProblem> join_problem(const ReshardProblem& problem, const PlacedCluster& cluster,
                                 const JoinOptions& options) {
  REFIT_TRY(check_join(options, problem));
  REFIT_TRY(planner_detail::check_no_landing(problem, "a join"));
  const auto r = renumber(problem, options);
  const auto from_peers = peer_tensors(problem, cluster, options, r);
  planner_detail::RankKeeper joining(r.joining), peer(r.peer);
  std::vector<TensorReshard> tensors;
  std::int32_t peer_count = 0;
  for (std::size_t t = 0; t < problem.tensors().size(); ++t) {
    const auto& spec = problem.tensors()[t];
    const auto where = fmt::format("tensor '{}'", spec.tensor.name);
    auto destination = REFIT_TRY_IN(joining.keep(spec.destination), where);
    if (from_peers[t]) ++peer_count;
    tensors.push_back(TensorReshard{
        .tensor = spec.tensor,
        .source = from_peers[t] ? REFIT_TRY_IN(peer.keep(spec.destination), where) : spec.source,
        .destination = std::move(destination)});
  }
  const auto destination_ranks = static_cast<std::int32_t>(r.global.size()) - r.source_ranks;
  auto joined = REFIT_TRY(ReshardProblem::make(std::move(tensors), r.source_ranks, destination_ranks));
  std::vector<GpuId> gpus;
  for (const Rank g : r.global) gpus.push_back(cluster.gpu_of(g));
  auto ranks = REFIT_TRY(RankMap::make(cluster.cluster(), std::move(gpus), r.source_ranks));
  return JoinProblem{.problem = std::move(joined),
                     .cluster = REFIT_TRY(PlacedCluster::make(cluster.cluster(), std::move(ranks))),
                     .global = r.global,
                     .training_ranks = r.training_ranks,
                     .from_peers = from_peers,
                     .peer_tensors = peer_count};
}

}  // namespace refit
