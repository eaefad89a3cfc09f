#include "refit/facade/join_run.h"

#include <algorithm>
#include <array>
#include <chrono>

#include <fmt/format.h>

#include "refit/core/elapsed.h"
#include "refit/core/try.h"
#include "refit/refit.h"

namespace refit {
namespace {

constexpr std::array<std::string_view, 4> kRoleNames = {"free", "training", "peer", "joining"};

[[nodiscard]] Result<void> check_engine(std::int32_t engine, std::int32_t engines, const char* option) {
  if (engine < 0 || engine >= engines)
    return out_of_range(fmt::format("{}: engine {} is not in [0, {})", option, engine, engines));
  return {};
}

// The request's engines against the engine count, each mistake named by its option; what is left
// for join_problem to refuse concerns the problem itself.
[[nodiscard]] Result<JoinOptions> resolve(const JoinRequest& r, std::int32_t engines) {
  REFIT_TRY(check_engine(r.joining, engines, "--join"));
  JoinOptions o{.engines = engines, .joining = r.joining, .peers = r.peers, .source = r.from};
  if (r.from == JoinSource::kTraining) {
    if (!r.peers.empty()) return invalid("--peers: with --from training no engine sends");
    return o;
  }
  for (std::size_t i = 0; i < r.peers.size(); ++i) {
    const auto e = r.peers[i];
    REFIT_TRY(check_engine(e, engines, "--peers"));
    if (e == r.joining) return invalid(fmt::format("--peers: engine {} is the one that joins (--join)", e));
    if (i > 0 && e <= r.peers[i - 1])
      return invalid(
          fmt::format("--peers: {} follows {}: list the engines ascending, each once", e, r.peers[i - 1]));
  }
  if (o.peers.empty())
    for (std::int32_t e = 0; e < engines; ++e)
      if (e != r.joining) o.peers.push_back(e);
  if (!o.peers.empty()) return o;
  // No other engine: with the default every tensor comes from the training ranks.
  if (r.from == JoinSource::kBoth) {
    o.source = JoinSource::kTraining;
    return o;
  }
  return invalid(fmt::format(
      "--from peers: engine {} is the only engine, so no live engine can send (use --from training or both)",
      r.joining));
}

// The buffers of `side` of the tensors the peers send (or, `peers` false, the training ranks).
std::vector<ShardBuffer> sent_by(const std::vector<ShardBuffer>& side, const std::vector<bool>& from_peers,
                                 bool peers) {
  std::vector<ShardBuffer> out;
  for (const auto& b : side)
    if (b.tensor < from_peers.size() && from_peers[b.tensor] == peers) out.push_back(b);
  return out;
}

}  // namespace

std::string_view join_role_name(JoinRole role) { return kRoleNames[static_cast<std::size_t>(role)]; }

JoinPart JoinRun::part(Rank global) const {
  const auto at = std::ranges::find(join.global, global);
  if (at == join.global.end()) return {};
  const Rank rank{static_cast<std::int32_t>(at - join.global.begin())};
  const auto role = rank.value < join.training_ranks ? JoinRole::kTraining
                    : join.problem.is_source(rank)   ? JoinRole::kPeer
                                                     : JoinRole::kJoining;
  return JoinPart{.role = role, .rank = rank};
}

Result<JoinRun> plan_join(const ReshardProblem& problem, const PlacedCluster& cluster, std::int32_t engines,
                          const JoinRequest& request, std::string_view strategy, const PlanOptions& options) {
  auto resolved = REFIT_TRY(resolve(request, engines));
  auto joined = REFIT_TRY_IN(join_problem(problem, cluster, resolved), "--join");
  const auto start = std::chrono::steady_clock::now();
  auto made = REFIT_TRY(plan(joined.problem, joined.cluster, strategy, options));
  return JoinRun{.options = std::move(resolved),
                 .join = std::move(joined),
                 .plan = std::move(made),
                 .plan_seconds = seconds_since(start)};
}

RankBuffers join_buffers(const JoinRun& run, Rank global, const RankBuffers& full) {
  const auto& from_peers = run.join.from_peers;
  RankBuffers out{.memory = full.memory,
                  .sources = {},
                  .destinations = {},
                  .source_parameters = {},
                  .destination_parameters = {}};
  const auto role = run.part(global).role;
  if (role == JoinRole::kTraining) {
    out.sources = sent_by(full.sources, from_peers, false);
    out.source_parameters = full.source_parameters;
  } else if (role == JoinRole::kPeer) {
    out.sources = sent_by(full.destinations, from_peers, true);
    out.source_parameters = full.destination_parameters;
  } else if (role == JoinRole::kJoining) {
    out.destinations = full.destinations;
    out.destination_parameters = full.destination_parameters;
  }
  return out;
}

}  // namespace refit
