#include "piece_cuts.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "refit/core/try.h"

namespace refit::sim {

PieceCuts::PieceCuts(const lowering::LoweredPlan& lowered, const CallSchedule* calls,
                     std::span<const std::int32_t> call_of)
    : lowered_(lowered), plan_(lowered.plan()), calls_(calls), call_of_(call_of) {}

Result<PieceCuts> PieceCuts::make(const lowering::LoweredPlan& lowered, const CallSchedule* calls,
                                  std::span<const std::int32_t> call_of, std::int64_t window) {
  PieceCuts cuts(lowered, calls, call_of);
  cuts.index_upstreams();
  REFIT_TRY(cuts.place_relay_waits());
  cuts.order_transfers();
  cuts.plan_streams(window);
  return cuts;
}

std::span<const std::int32_t> PieceCuts::upstreams(std::int32_t t) const {
  return std::span(upstreams_)
      .subspan(upstream_begin_[at(t)], upstream_begin_[at(t) + 1] - upstream_begin_[at(t)]);
}

std::int64_t PieceCuts::head_chunks(std::int64_t all) const {
  const bool sliced = calls_ && calls_->store_and_forward && calls_->relay_slices > 1;
  return sliced ? (all + calls_->relay_slices - 1) / calls_->relay_slices : 1;
}

// Each transfer's upstream transfers, once (Transfer::upstream builds a list each call), and
// which transfers relays pipeline from.
void PieceCuts::index_upstreams() {
  has_pipelined_dependent_.assign(plan_.transfers.size(), false);
  upstream_begin_.assign(1, 0);
  const bool pipelining = !calls_ || !calls_->store_and_forward || calls_->relay_slices > 1;
  const auto quantizes = [&](std::int32_t u) { return plan_.transfers[at(u)].quantizes(); };
  for (const auto& t : plan_.transfers) {
    const auto up = t.upstream();
    upstreams_.insert(upstreams_.end(), up.begin(), up.end());
    upstream_begin_.push_back(upstreams_.size());
    // A quantize step starts once all it quantizes has landed, and what it made is there at
    // once when it ends: neither side pipelines.
    const bool relay = !up.empty() && !t.quantizes() && std::ranges::none_of(up, quantizes);
    pipelined_.push_back(pipelining && relay);
    if (pipelined_.back())
      for (const auto u : up) has_pipelined_dependent_[at(u)] = true;
  }
}

std::span<const PieceCuts::RelayWait> PieceCuts::relay_waits(std::int32_t t) const {
  const auto first = relay_wait_begin_[at(t)];
  return std::span(relay_waits_).subspan(first, relay_wait_begin_[at(t) + 1] - first);
}

// Where each pipelined relay waits for its upstreams, each of which is cut there.
Result<void> PieceCuts::place_relay_waits() {
  relay_wait_begin_.assign(1, 0);
  wait_cuts_.assign(plan_.transfers.size(), {});
  for (const auto& t : plan_.transfers) {
    if (pipelined_[at(t.id)]) REFIT_TRY(place_waits(t));
    relay_wait_begin_.push_back(relay_waits_.size());
  }
  return {};
}

// The waits of t's first group (one chunk, or a slice where relays store and forward slices),
// then for each upstream the most of it t needs, from the group of the first chunk needing that
// much: a pair sends its chunks in order, so the chunks after it wait too. One wait per piece
// and upstream, the latest.
Result<void> PieceCuts::place_waits(const Transfer& t) {
  const std::int64_t group = head_chunks(lowered_.layout(t.id).chunks());
  const auto first = static_cast<std::ptrdiff_t>(relay_waits_.size());
  for (const auto& w : REFIT_TRY(lowered_.waits(t.id, group - 1)))
    relay_waits_.push_back(RelayWait{.from = 0, .upstream = w.transfer, .chunks = w.chunks});
  for (const auto& n : REFIT_TRY(lowered_.upstream_needs(t.id)))
    relay_waits_.push_back(
        RelayWait{.from = n.at / group * group, .upstream = n.transfer, .chunks = n.chunks});
  const auto mine = std::ranges::subrange(relay_waits_.begin() + first, relay_waits_.end());
  std::ranges::sort(mine, {}, [](const RelayWait& w) { return std::tuple(w.from, w.upstream, -w.chunks); });
  const auto repeated =
      std::ranges::unique(mine, {}, [](const RelayWait& w) { return std::pair(w.from, w.upstream); });
  relay_waits_.erase(repeated.begin(), repeated.end());
  for (auto w = relay_waits_.begin() + first; w != relay_waits_.end(); ++w)
    wait_cuts_[at(w->upstream)].push_back(w->chunks);
  return {};
}

void PieceCuts::order_transfers() {
  for (const auto& t : plan_.transfers)
    if (!calls_ || call_of_[at(t.id)] >= 0) order_.push_back(t.id);
  if (calls_) std::ranges::stable_sort(order_, {}, [&](std::int32_t t) { return call_of_[at(t)]; });
}

// One stream per (sender, receiver) pair of each call queue, and each transfer's grant: where
// in the pair's earlier transfers the chunk `window` chunks before its first lies. Pairs in
// order with window 0: streams without grants.
void PieceCuts::plan_streams(std::int64_t window_chunks) {
  stream_.assign(plan_.transfers.size(), -1);
  grant_.assign(plan_.transfers.size(), Grant{});
  cuts_.assign(plan_.transfers.size(), {});
  if (window_chunks == 0 && !(calls_ && calls_->pairs_in_order)) return;
  const std::int64_t window = window_chunks > 0 ? window_chunks : std::numeric_limits<std::int64_t>::max();
  // The transfers grouped by pair and call queue, each pair's in issue order: calls of two
  // queues (two communicators) reach the same peer over connections of their own.
  using PairKey = std::tuple<std::int32_t, std::int32_t, std::int32_t>;  // queue, sender, receiver
  std::vector<std::pair<PairKey, std::int32_t>> by_pair;                 // (pair, position in order_)
  by_pair.reserve(order_.size());
  for (std::size_t i = 0; i < order_.size(); ++i) {
    const auto& t = plan_.transfers[at(order_[i])];
    if (t.quantizes()) continue;  // no message
    const std::int32_t queue = calls_ ? calls_->calls[at(call_of_[at(t.id)])].queue : 0;
    by_pair.emplace_back(PairKey{queue, t.sender.value, t.receiver.value}, static_cast<std::int32_t>(i));
  }
  std::ranges::sort(by_pair);
  std::vector<std::int64_t> chunks_end;  // the pair's chunks up to and including its i-th transfer
  for (std::size_t i = 0; i < by_pair.size(); ++i) {
    if (i == 0 || by_pair[i].first != by_pair[i - 1].first) {
      ++streams_;
      chunks_end.clear();
    }
    const auto id = at(order_[at(by_pair[i].second)]);
    stream_[id] = streams_ - 1;
    const std::int64_t before = chunks_end.empty() ? 0 : chunks_end.back();
    if (before >= window) {
      const std::int64_t granting = before - window;  // counted from 0 in the pair
      const auto k =
          static_cast<std::size_t>(std::ranges::upper_bound(chunks_end, granting) - chunks_end.begin());
      const std::int64_t holder_first = k == 0 ? 0 : chunks_end[k - 1];
      const std::int32_t holder = order_[at(by_pair[i - chunks_end.size() + k].second)];
      grant_[id] = {holder, granting - holder_first + 1};
      cuts_[at(holder)].push_back(grant_[id].chunks);
    }
    chunks_end.push_back(before + lowered_.layout(static_cast<std::int32_t>(id)).chunks());
  }
}

void PieceCuts::ends(const Transfer& t, std::vector<std::int64_t>& ends) const {
  const auto id = at(t.id);
  const std::int64_t all = lowered_.layout(t.id).chunks();
  const std::int64_t head = head_chunks(all);
  ends = cuts_[id];
  ends.insert(ends.end(), wait_cuts_[id].begin(), wait_cuts_[id].end());
  if (has_pipelined_dependent_[id] || pipelined_[id]) ends.push_back(head);
  for (const auto& w : relay_waits(t.id)) ends.push_back(w.from);  // a piece starts there
  ends.push_back(all);
  std::erase_if(ends, [&](std::int64_t e) { return e < 1 || e > all; });
  std::ranges::sort(ends);
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
}

}  // namespace refit::sim
