// join_problem (membership.h): filling a joining engine as a problem in a rank space of its own,
// whose source side is the training ranks and the peers' ranks.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "engine_layouts.h"
#include "refit/core/index.h"
#include "refit/core/try.h"
#include "refit/planner/membership.h"

namespace refit {
namespace {

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
// largest groups (send_groups) first, each to the side that would have sent its bytes so far
// sooner (bytes over the side's summed NIC bandwidth), the peers on a tie.
// The tensors that go from one side together: a weight with its fp8 scales, whose layouts follow
// the weight's blocks rank by rank; each other tensor alone. By group, its tensors.
std::vector<std::vector<std::size_t>> send_groups(const ReshardProblem& problem) {
  std::vector<std::vector<std::size_t>> groups;
  std::map<std::string_view, std::size_t> group_of_weight;
  for (std::size_t t = 0; t < problem.tensors().size(); ++t) {
    const TensorSpec& spec = problem.tensors()[t].tensor;
    const auto& q = spec.quantization;
    const std::string_view weight = q && q->is_scales() ? std::string_view(q->scales_of) : spec.name;
    const auto [it, added] = group_of_weight.try_emplace(weight, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(t);
  }
  return groups;
}

// What a peer sends of a tensor: what its engine holds. A weight quantized at the senders is fp8
// with its scales there, as FP8 training ranks hold it, so that the peers send it as it is.
TensorSpec held_by_peers(TensorSpec spec) {
  if (auto& q = spec.quantization; q && q->site == QuantSite::kSender) {
    q->site = QuantSite::kTraining;
    q->from = quant_value_dtype(q->scheme);
  }
  return spec;
}

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
  const auto groups = send_groups(problem);
  std::vector<double> group_bytes;
  for (const auto& g : groups)
    group_bytes.push_back(std::transform_reduce(g.begin(), g.end(), 0.0, std::plus{}, [&](std::size_t t) {
      return static_cast<double>(problem.tensors()[t].tensor.bytes().value);
    }));
  std::vector<std::size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::ranges::stable_sort(order, std::greater{}, [&](std::size_t g) { return group_bytes[g]; });
  std::vector<bool> out(n, false);
  for (const auto g : order) {
    const int side = finish(1, group_bytes[g]) <= finish(0, group_bytes[g]) ? 1 : 0;
    bytes[side] += group_bytes[g];
    for (const auto t : groups[g]) out[t] = side == 1;
  }
  return out;
}

}  // namespace

Result<JoinProblem> join_problem(const ReshardProblem& problem, const PlacedCluster& cluster,
                                 const JoinOptions& options) {
  REFIT_TRY(check_join(options, problem));
  REFIT_TRY(check_no_landing(problem, "a join"));
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
        .tensor = from_peers[t] ? held_by_peers(spec.tensor) : spec.tensor,
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
