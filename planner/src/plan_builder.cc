#include "plan_builder.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "refit/planner/links.h"

namespace refit::planner_detail {

std::size_t PlanBuilder::KeyHash::operator()(const Key& k) const noexcept {
  std::uint64_t h = k.key * 0x9e3779b97f4a7c15ull;
  h ^= (static_cast<std::uint64_t>(k.phase) << 48) ^ (static_cast<std::uint64_t>(k.from) << 24) ^
       static_cast<std::uint64_t>(k.to);
  return static_cast<std::size_t>(h * 0xbf58476d1ce4e5b9ull);
}

PlanBuilder::PlanBuilder(const ReshardProblem& problem, const PlacedCluster& cluster,
                         const StrategyInfo& strategy, Bytes chunk)
    : problem_(problem), cluster_(cluster), strategy_(strategy), chunk_(chunk) {}

Handle PlanBuilder::add(std::uint32_t phase, std::uint64_t key, Rank from, Rank to, std::uint32_t tensor,
                        Box box, Handle via) {
  auto [it, inserted] =
      index_.try_emplace(Key{.phase = phase, .key = key, .from = from.value, .to = to.value},
                         static_cast<Handle>(pending_.size()));
  if (inserted)
    pending_.push_back(Pending{.phase = phase, .from = from, .to = to, .bytes = Bytes{0}, .segments = {}});
  auto& p = pending_[static_cast<std::size_t>(it->second)];
  p.bytes += Bytes{box.volume() * dtype_size(problem_.tensors()[tensor].tensor.dtype)};
  p.segments.push_back(Segment{.tensor = tensor, .box = std::move(box), .via = via});
  return it->second;
}

std::vector<Handle> PlanBuilder::rotated_order(std::span<const std::int64_t> arrival,
                                               bool keep_pair_order) const {
  std::vector<Handle> order(pending_.size());
  std::iota(order.begin(), order.end(), 0);
  // Within a phase, sender s walks its receivers (ascending) starting at its (s mod n)-th of n,
  // a rotated all-to-all: the senders spread over the receivers instead of all starting on the
  // same one. Transfers then go round by round: every sender's k-th message before any k+1-th.
  // A pair's messages go by `arrival`, in the order they were made where it is equal.
  std::ranges::stable_sort(order, {}, [&](Handle h) {
    const auto& p = pending_[static_cast<std::size_t>(h)];
    return std::tuple(p.phase, p.from.value, p.to.value, arrival[static_cast<std::size_t>(h)]);
  });
  std::vector<std::pair<std::int64_t, std::size_t>> round(order.size());  // (round, position)
  for (std::size_t begin = 0; begin < order.size();) {
    const auto& first = pending_[static_cast<std::size_t>(order[begin])];
    std::size_t end = begin;
    while (end < order.size() && pending_[static_cast<std::size_t>(order[end])].phase == first.phase &&
           pending_[static_cast<std::size_t>(order[end])].from == first.from)
      ++end;
    const auto n = static_cast<std::int64_t>(end - begin);
    const auto shift = first.from.value % n;
    for (std::size_t i = begin; i < end; ++i)
      round[i] = {(static_cast<std::int64_t>(i - begin) - shift + n) % n, i};
    begin = end;
  }
  std::ranges::stable_sort(round, {}, [&](const auto& r) {
    return std::pair(pending_[static_cast<std::size_t>(order[r.second])].phase, r.first);
  });
  if (keep_pair_order) return in_pair_order(order, round);
  std::vector<Handle> rounds(order.size());
  for (std::size_t i = 0; i < round.size(); ++i) rounds[i] = order[round[i].second];
  return rounds;
}

std::vector<Handle> PlanBuilder::in_pair_order(
    std::span<const Handle> order, std::span<const std::pair<std::int64_t, std::size_t>> round) const {
  // The rounds interleave the pairs; each pair's messages then take the pair's places in its own
  // order (the rotation would otherwise wrap a pair's last messages in front of its first).
  std::map<std::tuple<std::uint32_t, std::int32_t, std::int32_t>, std::vector<std::size_t>> places;
  for (std::size_t i = 0; i < round.size(); ++i) {
    const auto& p = pending_[static_cast<std::size_t>(order[round[i].second])];
    places[{p.phase, p.from.value, p.to.value}].push_back(i);
  }
  std::vector<Handle> rounds(order.size());
  for (const auto& [pair, at] : places) {
    std::vector<std::size_t> positions;  // where the pair's messages lie in `order`
    for (const std::size_t i : at) positions.push_back(round[i].second);
    std::ranges::sort(positions);
    for (std::size_t k = 0; k < at.size(); ++k) rounds[at[k]] = order[positions[k]];
  }
  return rounds;
}

std::vector<std::int64_t> PlanBuilder::arrivals(std::span<const Handle> order) const {
  // A (sender, receiver) pair is one in-order stream, and the pairs into one receiver share its
  // link, so a message has arrived once its pair has carried it and everything before it: the
  // pair's bytes up to its end order arrivals at one receiver.
  std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> carried;
  std::vector<std::int64_t> end(pending_.size(), 0);
  for (const Handle h : order) {
    const auto& p = pending_[static_cast<std::size_t>(h)];
    end[static_cast<std::size_t>(h)] = carried[{p.from.value, p.to.value}] += p.bytes.value;
  }
  // A relay message waits for the last of its upstream messages.
  std::vector<std::int64_t> arrival(pending_.size(), 0);
  for (std::size_t h = 0; h < pending_.size(); ++h)
    for (const auto& s : pending_[h].segments)
      if (s.via != kFromSourceShard) arrival[h] = std::max(arrival[h], end[static_cast<std::size_t>(s.via)]);
  return arrival;
}

Plan PlanBuilder::finish(RelayOrder relays) && {
  const std::vector<std::int64_t> unordered(pending_.size(), 0);
  const bool arrival = relays == RelayOrder::kArrival;
  auto order = rotated_order(unordered, arrival);
  if (arrival) order = rotated_order(arrivals(order), true);
  std::vector<std::int32_t> id_of(pending_.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    id_of[static_cast<std::size_t>(order[i])] = static_cast<std::int32_t>(i);

  Plan plan;
  plan.strategy = std::string(strategy_.name);
  plan.execution = strategy_.execution;
  for (const auto& t : problem_.tensors()) plan.tensors.push_back(t.tensor);
  plan.source_ranks = problem_.source_ranks();
  plan.destination_ranks = problem_.destination_ranks();
  plan.transfers.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto& p = pending_[static_cast<std::size_t>(order[i])];
    for (auto& s : p.segments)
      if (s.via != kFromSourceShard) s.via = id_of[static_cast<std::size_t>(s.via)];
    plan.transfers.push_back(Transfer{static_cast<std::int32_t>(i), p.from, p.to,
                                      link_between(cluster_, p.from, p.to), std::move(p.segments), p.bytes,
                                      chunk_});
  }
  pending_.clear();
  index_.clear();
  return plan;
}

}  // namespace refit::planner_detail
