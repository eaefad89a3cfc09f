#include "plan_builder.h"

#include "rotation_origin.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <tuple>
#include <utility>

#include "counting_sort.h"
#include "first_seen_ids.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/links.h"
#include "refit_pieces.h"

namespace refit::planner_detail {

std::uint32_t PlanBuilder::MessageIndex::tag_of(const Key& k) {
  std::uint64_t h = k.key * 0x9e3779b97f4a7c15ull;
  h ^= (static_cast<std::uint64_t>(k.phase) << 48) ^ (static_cast<std::uint64_t>(k.from) << 24) ^
       static_cast<std::uint64_t>(k.to);
  return static_cast<std::uint32_t>((h * 0xbf58476d1ce4e5b9ull) >>
                                    32);  // top bits: every key bit reaches them
}

template <class KeyOf>
std::pair<Handle, bool> PlanBuilder::MessageIndex::find_or_add(const Key& key, Handle fresh,
                                                               const KeyOf& key_of) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  const std::uint32_t tag = tag_of(key);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = slot_of(tag);; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.handle < 0) {
      slot = Slot{.tag = tag, .handle = fresh};
      ++size_;
      return {fresh, true};
    }
    if (slot.tag == tag && key_of(slot.handle) == key) return {slot.handle, false};
  }
}

void PlanBuilder::MessageIndex::grow() {
  const std::vector<Slot> old =
      std::exchange(slots_, std::vector<Slot>(std::max<std::size_t>(16, 2 * slots_.size())));
  shift_ = 32 - std::countr_zero(slots_.size());
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.handle < 0) continue;
    std::size_t i = slot_of(s.tag);
    while (slots_[i].handle >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

PlanBuilder::PlanBuilder(const ReshardProblem& problem, const PlacedCluster& cluster,
                         const StrategyInfo& strategy, Bytes chunk)
    : problem_(problem), cluster_(cluster), strategy_(strategy), chunk_(chunk) {}

Handle PlanBuilder::add(std::uint32_t phase, std::uint64_t key, Rank from, Rank to, std::uint32_t tensor,
                        Box box, Handle via) {
  const auto key_of = [&](Handle h) {
    const auto& p = pending_[static_cast<std::size_t>(h)];
    return Key{.phase = p.phase, .key = p.key, .from = p.from.value, .to = p.to.value};
  };
  const auto [handle, inserted] =
      index_.find_or_add(Key{.phase = phase, .key = key, .from = from.value, .to = to.value},
                         static_cast<Handle>(pending_.size()), key_of);
  if (inserted)
    pending_.push_back(
        Pending{.phase = phase, .from = from, .to = to, .key = key, .bytes = Bytes{0}, .segments = {}});
  auto& p = pending_[static_cast<std::size_t>(handle)];
  p.segments.push_back(Segment{.tensor = tensor, .box = std::move(box), .via = via});
  p.bytes += Bytes{box_bytes(p.segments.back())};
  if (via != kFromSourceShard) ++p.relays;
  return handle;
}

namespace {

// A message's keys in plan order, copied out of it so that sorting reads no message (the sorts
// run over up to millions of them).
struct Place {
  std::uint32_t phase;
  std::int32_t from;
  std::int32_t to;
  std::int64_t arrival;
  std::uint8_t lead;  // PlanBuilder::Lead
  Handle handle;
  auto pair() const { return std::tuple(phase, from, to); }
};

// The round of the message at `position` of an order, within its phase.
struct Round {
  std::uint32_t phase;
  std::int64_t round;
  std::size_t position;
};

// `order` (pairs contiguous, each in its order) laid out by `rounds` (sorted), each pair's
// messages kept in their order: the rounds interleave the pairs; each pair's messages then take
// the pair's places in its own order (the rotation would otherwise wrap a pair's last messages in
// front of its first). A pair's k-th place in round order takes the k-th message of its run.
std::vector<Handle> in_pair_order(std::span<const Place> order, std::span<const Round> rounds) {
  std::vector<std::size_t> run_of(order.size());  // by position: where its pair's run begins
  for (std::size_t begin = 0; begin < order.size();) {
    std::size_t end = begin;
    while (end < order.size() && order[end].pair() == order[begin].pair()) ++end;
    std::fill(run_of.begin() + static_cast<std::ptrdiff_t>(begin),
              run_of.begin() + static_cast<std::ptrdiff_t>(end), begin);
    begin = end;
  }
  std::vector<std::size_t> placed(order.size(), 0);  // by run begin: its messages placed so far
  std::vector<Handle> out(order.size());
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    const auto run = run_of[rounds[i].position];
    out[i] = order[run + placed[run]++].handle;
  }
  return out;
}

// `order` stably sorted by (phase, from, to, arrival, lead) in linear time but for each pair's
// own messages: by the least significant rank first, then each pair's run by arrival and lead.
std::vector<Place> by_pair_and_arrival(std::vector<Place> order, std::size_t phases, std::size_t ranks) {
  order =
      counting_sorted(std::move(order), ranks, [](const Place& p) { return static_cast<std::size_t>(p.to); });
  order = counting_sorted(std::move(order), ranks,
                          [](const Place& p) { return static_cast<std::size_t>(p.from); });
  order = counting_sorted(std::move(order), phases, [](const Place& p) { return std::size_t{p.phase}; });
  for (auto begin = order.begin(); begin != order.end();) {
    const auto end =
        std::find_if(begin, order.end(), [&](const Place& p) { return p.pair() != begin->pair(); });
    std::stable_sort(begin, end, [](const Place& a, const Place& b) {
      return std::tie(a.arrival, a.lead) < std::tie(b.arrival, b.lead);
    });
    begin = end;
  }
  return order;
}

}  // namespace

std::vector<Handle> PlanBuilder::rotated_order(std::span<const std::int64_t> arrival,
                                               std::span<const std::uint8_t> lead, bool keep_pair_order,
                                               std::vector<std::uint64_t>* out_rounds) const {
  std::vector<Place> order(pending_.size());
  for (std::size_t h = 0; h < pending_.size(); ++h)
    order[h] = {.phase = pending_[h].phase,
                .from = pending_[h].from.value,
                .to = pending_[h].to.value,
                .arrival = arrival[h],
                .lead = lead.empty() ? std::uint8_t{kFeedsNetwork} : lead[h],
                .handle = static_cast<Handle>(h)};
  // Within a phase, sender s walks its receivers (ascending) starting at its (s mod n)-th of n,
  // a rotated all-to-all: the senders spread over the receivers instead of all starting on the
  // same one; s counts from its part's origin (rotation_origin.h). Transfers then go round by
  // round: every sender's k-th message before any k+1-th. A pair's messages go by `arrival`,
  // then `lead`, in the order they were made where both are equal.
  std::uint32_t phases = 0;
  for (const auto& p : order) phases = std::max(phases, p.phase + 1);
  order = by_pair_and_arrival(std::move(order), phases, static_cast<std::size_t>(problem_.world_size()));
  std::vector<std::pair<std::int32_t, std::int32_t>> pairs(order.size());
  std::ranges::transform(order, pairs.begin(), [](const Place& p) { return std::pair(p.from, p.to); });
  const auto origin = rotation_origins(pairs, problem_.source_ranks(), problem_.world_size());
  std::vector<Round> rounds(order.size());
  for (std::size_t begin = 0; begin < order.size();) {
    std::size_t end = begin;
    while (end < order.size() && order[end].phase == order[begin].phase &&
           order[end].from == order[begin].from)
      ++end;
    const auto n = static_cast<std::int64_t>(end - begin);
    const auto shift = (order[begin].from - origin[static_cast<std::size_t>(order[begin].from)]) % n;
    for (std::size_t i = begin; i < end; ++i)
      rounds[i] = {.phase = order[i].phase,
                   .round = (static_cast<std::int64_t>(i - begin) - shift + n) % n,
                   .position = i};
    begin = end;
  }
  std::size_t most = 0;  // rounds
  for (const auto& r : rounds) most = std::max(most, static_cast<std::size_t>(r.round) + 1);
  rounds = counting_sorted(std::move(rounds), most,
                           [](const Round& r) { return static_cast<std::size_t>(r.round); });
  rounds = counting_sorted(std::move(rounds), phases, [](const Round& r) { return std::size_t{r.phase}; });
  if (out_rounds) {
    out_rounds->resize(rounds.size());
    std::ranges::transform(rounds, out_rounds->begin(), [](const Round& r) {
      return static_cast<std::uint64_t>(r.phase) << 32 | static_cast<std::uint64_t>(r.round);
    });
  }
  if (keep_pair_order) return in_pair_order(order, rounds);
  std::vector<Handle> out(order.size());
  for (std::size_t i = 0; i < rounds.size(); ++i) out[i] = order[rounds[i].position].handle;
  return out;
}

namespace {

// `part` of `whole` bytes as a fraction in fixed point: 2^50 is all of it, enough to tell 8 MiB
// apart in 10^15 bytes.
std::int64_t fraction_of(std::int64_t part, std::int64_t whole) {
  constexpr double kAll = 1125899906842624.0;  // 2^50
  return static_cast<std::int64_t>(static_cast<double>(part) / static_cast<double>(whole) * kAll);
}

// The bytes of `outer` (row-major) after the last element of `inner`, a box inside it.
std::int64_t bytes_after(const Box& outer, const Box& inner, std::int64_t element_size) {
  std::int64_t through = 0;  // elements of outer up to and including inner's last
  for (std::size_t d = 0; d < outer.rank(); ++d)
    through = through * outer.extent[d] + (inner.offset[d] + inner.extent[d] - 1 - outer.offset[d]);
  return (outer.volume() - through - 1) * element_size;
}

}  // namespace

PlanBuilder::PerSegment::PerSegment(std::span<const std::size_t> counts) : first_(counts.size() + 1, 0) {
  std::partial_sum(counts.begin(), counts.end(), first_.begin() + 1);
  values_.assign(first_.back(), 0);
}

std::span<std::int64_t> PlanBuilder::PerSegment::of(Handle h) {
  const auto i = static_cast<std::size_t>(h);
  return std::span(values_).subspan(first_[i], first_[i + 1] - first_[i]);
}

std::span<const std::int64_t> PlanBuilder::PerSegment::of(Handle h) const {
  const auto i = static_cast<std::size_t>(h);
  return std::span(values_).subspan(first_[i], first_[i + 1] - first_[i]);
}

std::vector<std::uint8_t> PlanBuilder::leads() const {
  std::vector<std::uint8_t> out(pending_.size(), kFeedsNothing);
  for (const auto& p : pending_) {
    if (p.relays == 0) continue;
    const auto lead =
        link_between(cluster_, p.from, p.to) == LinkKind::kNetwork ? kFeedsNetwork : kFeedsNvlink;
    for (const auto& s : p.segments)
      if (s.via != kFromSourceShard) {
        auto& l = out[static_cast<std::size_t>(s.via)];
        l = std::min<std::uint8_t>(l, lead);
      }
  }
  return out;
}

std::vector<bool> PlanBuilder::forwarded(std::span<const std::uint8_t> leads) {
  std::vector<bool> out(leads.size());
  for (std::size_t h = 0; h < leads.size(); ++h) out[h] = leads[h] != kFeedsNothing;
  return out;
}

std::vector<Bytes> PlanBuilder::chunks(std::span<const std::uint8_t> leads,
                                       std::span<const Handle> order) const {
  std::vector<Bytes> out(pending_.size(), chunk_);
  if (leads.empty()) return out;
  const auto s = streams();
  std::vector<std::int64_t> pair_bytes(s.pairs, 0);
  for (std::size_t h = 0; h < pending_.size(); ++h) pair_bytes[s.pair[h]] += s.bytes[h];
  const std::int64_t least = std::min(kMinForwardedChunk, chunk_.value);
  for (std::size_t h = 0; h < pending_.size(); ++h)
    if (leads[h] != kFeedsNothing)
      out[h] = Bytes{std::clamp(pair_bytes[s.pair[h]] / kForwardedChunks, least, chunk_.value)};
  for (const Handle h : order) {
    auto& c = out[static_cast<std::size_t>(h)];
    if (pending_[static_cast<std::size_t>(h)].relays > 0)
      for (const auto& seg : pending_[static_cast<std::size_t>(h)].segments)
        if (seg.via != kFromSourceShard) c = std::min(c, out[static_cast<std::size_t>(seg.via)]);
  }
  return out;
}

PlanBuilder::Streams PlanBuilder::streams() const {
  struct PairHash {
    std::uint64_t operator()(std::uint64_t pair) const { return pair; }
  };
  FirstSeenIds<std::uint64_t, PairHash> ids;
  Streams out{.pair = std::vector<std::uint32_t>(pending_.size()),
              .bytes = std::vector<std::int64_t>(pending_.size()),
              .pairs = 0};
  for (std::size_t h = 0; h < pending_.size(); ++h) {
    const auto& p = pending_[h];
    out.pair[h] = ids.insert((static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.from.value)) << 32) |
                             static_cast<std::uint32_t>(p.to.value))
                      .first;
    out.bytes[h] = p.bytes.value;
  }
  out.pairs = ids.size();
  return out;
}

UpstreamSegments PlanBuilder::upstream_segments(const std::vector<bool>& forwarded) const {
  UpstreamSegments out;
  for (std::size_t h = 0; h < pending_.size(); ++h)
    if (forwarded[h]) out.add(static_cast<Handle>(h), pending_[h].segments);
  return out;
}

PlanBuilder::PerSegment PlanBuilder::segment_arrivals(std::span<const Handle> order,
                                                      const std::vector<bool>& forwarded,
                                                      const UpstreamSegments& upstream_segments) const {
  // A (sender, receiver) pair is one in-order stream, so a segment has arrived once its pair has
  // carried it and everything before it. Pairs sharing links equally carry bytes at one rate: the
  // pair's bytes up to its end order arrivals. Pairs sharing them by their bytes
  // (ExecutionModel::pairs_share_by_bytes) all go through the same fraction of their bytes at
  // once: that fraction orders arrivals. Only the segments of forwarded messages need their ends.
  std::vector<std::size_t> counts(pending_.size());
  for (std::size_t h = 0; h < pending_.size(); ++h)
    counts[h] = forwarded[h] ? pending_[h].segments.size() : 0;
  PerSegment end(counts);
  const auto stream = streams();
  std::vector<std::int64_t> carried(stream.pairs, 0);
  for (const Handle h : order) {
    const auto i = static_cast<std::size_t>(h);
    auto& pair = carried[stream.pair[i]];
    if (!forwarded[i]) pair += stream.bytes[i];
    const auto ends = end.of(h);
    for (std::size_t k = 0; k < ends.size(); ++k) ends[k] = pair += box_bytes(pending_[i].segments[k]);
  }
  const bool by_fraction = execution_model(strategy_.execution).pairs_share_by_bytes;
  const auto measure = [&](std::int64_t bytes, Handle h) {
    return by_fraction ? fraction_of(bytes, carried[stream.pair[static_cast<std::size_t>(h)]]) : bytes;
  };
  for (std::size_t h = 0; h < pending_.size(); ++h)
    for (auto& e : end.of(static_cast<Handle>(h))) e = measure(e, static_cast<Handle>(h));
  // When s has reached its message's sender. Gathered from several upstream segments: once all of
  // it has; part of one (a row slab of it): once the upstream has carried the slab's last byte.
  const auto landed = [&](const Segment& s) -> std::int64_t {
    if (s.via == kFromSourceShard) return 0;
    const auto& upstream = pending_[static_cast<std::size_t>(s.via)];
    const auto ends = std::as_const(end).of(s.via);
    const auto k = upstream_segments.holding(s.via, upstream.segments, s);
    if (!k) return ends.back();
    const auto element = dtype_size(problem_.tensors()[s.tensor].tensor.dtype);
    return ends[*k] - measure(bytes_after(upstream.segments[*k].box, s.box, element), s.via);
  };
  // A forwarded message that forwards in turn carries a segment no sooner than it has landed.
  for (const Handle h : order) {
    const auto ends = end.of(h);
    for (std::size_t k = 0; k < ends.size(); ++k)
      ends[k] = std::max(ends[k], landed(pending_[static_cast<std::size_t>(h)].segments[k]));
  }
  for (std::size_t h = 0; h < pending_.size(); ++h)  // messages without relays: none to wait for
    counts[h] = pending_[h].relays > 0 ? pending_[h].segments.size() : 0;
  PerSegment arrival(counts);
  for (std::size_t h = 0; h < pending_.size(); ++h) {
    const auto at = arrival.of(static_cast<Handle>(h));
    for (std::size_t i = 0; i < at.size(); ++i) at[i] = landed(pending_[h].segments[i]);
  }
  return arrival;
}

Plan PlanBuilder::finish(RelayOrder relays, std::vector<std::uint64_t>* rounds) && {
  const std::vector<std::int64_t> unordered(pending_.size(), 0);
  const bool arrival = relays == RelayOrder::kArrival;
  auto lead = arrival ? leads() : std::vector<std::uint8_t>{};
  auto relayed = forwarded(lead);
  auto order = rotated_order(unordered, lead, arrival, arrival ? nullptr : rounds);
  if (arrival) {
    cut_relay_segments();
    auto upstream = upstream_segments(relayed);
    // Forwarded messages go by when their own data lands, which moves where they are in their
    // pairs' streams and so when what they forward lands: arrivals are taken again in that order,
    // again once relays carry their segments in the order those land, and again after each
    // forwarding depth is cut into slices.
    order = rotated_order(latest(segment_arrivals(order, relayed, upstream)), lead, true);
    order_relays_by_arrival(segment_arrivals(order, relayed, upstream));
    auto depth = forwarding_depths();
    const std::size_t deepest = std::max<std::size_t>(1, depth.empty() ? 0 : std::ranges::max(depth));
    for (std::size_t level = 1; level <= deepest; ++level) {
      // A depth with nothing to cut leaves the order as it is, but for the last one's rounds.
      if (level < deepest && !sliced_at(depth, level)) continue;
      upstream = upstream_segments(relayed);
      const auto arrival = segment_arrivals(order, relayed, upstream);
      const auto when = slice_relays(arrival, upstream, depth, level);
      lead = leads();
      relayed = forwarded(lead);
      order = rotated_order(when, lead, true, level == deepest ? rounds : nullptr);
    }
  }
  const auto chunk = chunks(lead, order);
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
    if (p.relays > 0)
      for (auto& s : p.segments)
        if (s.via != kFromSourceShard) s.via = id_of[static_cast<std::size_t>(s.via)];
    plan.transfers.push_back(Transfer{static_cast<std::int32_t>(i), p.from, p.to,
                                      link_between(cluster_, p.from, p.to), std::move(p.segments), p.bytes,
                                      chunk[static_cast<std::size_t>(order[i])]});
  }
  pending_.clear();
  index_ = {};
  return plan;
}

}  // namespace refit::planner_detail
