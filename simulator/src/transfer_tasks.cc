#include "transfer_tasks.h"

#include <algorithm>
#include <iterator>

namespace refit::sim {

TransferTasks::TransferTasks(const lowering::LoweredPlan& lowered,
                             std::vector<lowering::TransferCopyCost> costs, const Routes& routes,
                             const PieceCuts& cuts, QuantizeTasks& quantize, TaskSink& sink)
    : lowered_(lowered),
      costs_(std::move(costs)),
      routes_(routes),
      cuts_(cuts),
      quantize_(quantize),
      sink_(sink),
      piece_range_(lowered.plan().transfers.size(), {0, 0}),
      ends_(lowered.plan().transfers.size()) {
  pieces_.reserve(lowered.plan().transfers.size() * 2);
}

std::span<const TransferTasks::Piece> TransferTasks::pieces_of(std::int32_t transfer) const {
  const auto [first, last] = piece_range_[at(transfer)];
  return std::span(pieces_).subspan(first, last - first);
}

// The piece of `transfer` that ends with its chunk `chunks` (it was cut there).
TaskId TransferTasks::piece_through(std::int32_t transfer, std::int64_t chunks) const {
  const auto pieces = pieces_of(transfer);
  return std::ranges::lower_bound(pieces, chunks, {}, &Piece::chunks)->task;
}

// What a relay's piece waits for: the upstream's end (after its unpacking) when it needs all of
// it, else the upstream's piece through the chunk it needs.
TaskId TransferTasks::upstream_wait(std::int32_t upstream, std::int64_t chunks) const {
  if (chunks >= lowered_.layout(upstream).chunks()) return ends_[at(upstream)];
  return piece_through(upstream, chunks);
}

// What the transfer's first piece waits for: its sender's quantization of what the first chunk reads, its
// upstreams' ends (but a pipelined relay's, whose pieces wait as add_pieces says), its grant, and in a
// call the call's start and the sender's copy.
void TransferTasks::start_deps(const Transfer& t, const CallGate* gate, std::vector<TaskId>& deps) {
  if (const auto q = quantize_.before(t, 0, cuts_.stream(t.id))) deps.push_back(*q);
  if (cuts_.relay_waits(t.id).empty())
    for (const std::int32_t u : cuts_.upstreams(t.id)) deps.push_back(ends_[at(u)]);
  // The holder was cut after the granting chunk (PieceCuts::ends).
  if (const auto g = cuts_.grant(t.id); g.holder >= 0) deps.push_back(piece_through(g.holder, g.chunks));
  if (gate) {
    deps.push_back(gate->start);
    if (const auto copy = gate->copy_of_rank[at(t.sender.value)]; copy >= 0) deps.push_back(TaskId{copy});
  }
}

void TransferTasks::add_quantize_step(const Transfer& t, const CallGate* gate) {
  std::vector<TaskId> deps;
  for (const std::int32_t u : cuts_.upstreams(t.id)) deps.push_back(ends_[at(u)]);
  if (gate) deps.push_back(gate->start);
  const TaskId task = quantize_.add_step(t, std::move(deps));
  piece_range_[at(t.id)].first = pieces_.size();
  pieces_.push_back({lowered_.layout(t.id).chunks(), task});
  piece_range_[at(t.id)].second = pieces_.size();
  ends_[at(t.id)] = task;
}

void TransferTasks::add(std::span<const std::int32_t> transfers, const CallGate* gate) {
  for (const std::int32_t t : transfers) add_transfer(lowered_.plan().transfers[at(t)], gate);
}

void TransferTasks::add_transfer(const Transfer& t, const CallGate* gate) {
  if (t.quantizes()) return add_quantize_step(t, gate);
  const auto id = at(t.id);
  const auto& cost = costs_[id];
  auto& label = sink_.label();
  label.clear();
  fmt::format_to(std::back_inserter(label), "#{} {}->{}", t.id, t.sender.value, t.receiver.value);
  auto& spec = sink_.spec();
  routes_.crossed(t, cost.packs, cost.unpacks, spec.resources);
  spec.track = routes_.track(t);
  spec.category = static_cast<std::uint32_t>(Routes::kind(t.link));
  spec.label = std::string_view(label.data(), label.size());
  spec.stream = cuts_.stream(t.id);
  add_pieces(t, routes_.copy_time(cost.pack_first, t.sender), gate);
  piece_range_[id].second = pieces_.size();
  ends_[id] = pieces_.back().task;
  if (cost.unpacks) {
    const Seconds unpack_time = routes_.copy_time(cost.unpack_last, t.receiver);
    spec.bytes = Bytes{0};
    spec.latency = unpack_time;
    spec.resources.clear();
    spec.deps.assign(1, ends_[id]);
    spec.stream = -1;
    ends_[id] = sink_.add(t.id, unpack_time);
  }
}

void TransferTasks::add_pieces(const Transfer& t, Seconds pack_time, const CallGate* gate) {
  const auto id = at(t.id);
  const auto relay_waits = cuts_.relay_waits(t.id);
  auto next_wait = relay_waits.begin();
  const bool streamed = cuts_.stream(t.id) >= 0;
  const auto overhead = routes_.sender_overhead(t);
  auto& spec = sink_.spec();
  cuts_.ends(t, ends_scratch_);
  // A piece starts where the transfer waits for more of its sender's quantization.
  const auto waits = quantize_.waits(t.id);
  for (const auto& w : waits)
    if (w.chunk > 0) ends_scratch_.push_back(w.chunk);
  if (!waits.empty()) {
    std::ranges::sort(ends_scratch_);
    ends_scratch_.erase(std::ranges::unique(ends_scratch_).begin(), ends_scratch_.end());
  }
  std::int64_t done = 0;
  std::int64_t begin = 0;  // the piece's first chunk
  piece_range_[id].first = pieces_.size();
  for (const std::int64_t e : ends_scratch_) {
    const bool first = done == 0;
    const bool last = e == ends_scratch_.back();
    const std::int64_t through = lowered_.layout(t.id).chunk_end(e - 1);
    spec.deps.clear();
    if (first) start_deps(t, gate, spec.deps);
    const bool waits_here = std::ranges::binary_search(waits, begin, {}, &lowering::QuantizeWait::chunk);
    if (!first && waits_here)
      if (const auto q = quantize_.before(t, begin, cuts_.stream(t.id))) spec.deps.push_back(*q);
    // In a stream the pieces follow each other anyway; a dependency would make the next piece
    // start a flow of its own instead of taking over the stream's (where it has no overhead).
    if (!first && !streamed) spec.deps.push_back(pieces_.back().task);
    // A relay's piece waits as PieceCuts::relay_waits says: for an upstream's end (after its
    // unpacking) where it needs all of it.
    for (; next_wait != relay_waits.end() && next_wait->from == begin; ++next_wait)
      spec.deps.push_back(upstream_wait(next_wait->upstream, next_wait->chunks));
    spec.bytes = Bytes{through - done};
    spec.latency = first ? routes_.latency(t) + pack_time : Seconds{0};
    spec.overhead = Seconds{static_cast<double>(e - begin) * overhead.per_chunk.value} +
                    (first ? overhead.per_transfer : Seconds{0});
    pieces_.push_back({e, sink_.add(t.id, first ? pack_time : Seconds{0})});
    quantize_.put(t, pieces_.back().task);
    done = through;
    begin = e;
  }
}

}  // namespace refit::sim
