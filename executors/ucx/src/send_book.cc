#include "send_book.h"

#include <algorithm>

namespace refit::ucx_detail {
namespace {

// Per receiver rank: the bytes this rank sends it.
std::vector<std::int64_t> bytes_per_receiver(const UcxProgram& p, std::size_t world) {
  std::vector<std::int64_t> bytes(world, 0);
  for (const Send& s : p.sends())
    bytes[static_cast<std::size_t>(s.peer.value)] += p.layout(s.transfer).bytes();
  return bytes;
}

}  // namespace

SendBook::SendBook(const UcxProgram& program, std::int32_t world, SendPacing pacing)
    : program_(program),
      pacing_rule_(pacing),
      send_of_transfer_(program.lowered->plan().transfers.size(), -1),
      queue_(static_cast<std::size_t>(world)),
      next_(static_cast<std::size_t>(world), 0),
      pacing_(bytes_per_receiver(program, static_cast<std::size_t>(world))),
      pack_slots_(program.send_staging.slots),
      dropped_(program.sends().size(), false),
      put_chunks_(program.sends().size(), 0),
      flushing_(program.sends().size(), 0) {
  for (std::size_t j = 0; j < program.sends().size(); ++j) {
    const Send& s = program.sends()[j];
    send_of_transfer_[static_cast<std::size_t>(s.transfer)] = static_cast<std::int32_t>(j);
    grants_.emplace_back(s.chunks.size());
    for (std::size_t k = 0; k < s.chunks.size(); ++k)
      queue_[static_cast<std::size_t>(s.peer.value)].emplace_back(static_cast<std::int32_t>(j),
                                                                  static_cast<std::int64_t>(k));
    chunks_left_ += static_cast<std::int64_t>(s.chunks.size());
  }
}

std::optional<std::size_t> SendBook::send_of(std::int64_t transfer) const {
  if (transfer < 0 || static_cast<std::size_t>(transfer) >= send_of_transfer_.size()) return std::nullopt;
  const auto j = send_of_transfer_[static_cast<std::size_t>(transfer)];
  return j < 0 ? std::nullopt : std::optional<std::size_t>(static_cast<std::size_t>(j));
}

std::optional<std::size_t> SendBook::grantable(std::int64_t transfer, std::int32_t from,
                                               std::int64_t chunk) const {
  const auto j = send_of(transfer);
  if (!j) return std::nullopt;
  const Send& s = program_.sends()[*j];
  const bool fresh = s.peer.value == from && chunk >= 0 &&
                     chunk < static_cast<std::int64_t>(s.chunks.size()) &&
                     !grants_[*j][static_cast<std::size_t>(chunk)];
  return fresh ? j : std::nullopt;
}

void SendBook::grant(std::size_t send, std::int64_t chunk, std::vector<Run> runs) {
  grants_[send][static_cast<std::size_t>(chunk)] = std::move(runs);
}

const std::optional<std::vector<Run>>& SendBook::grant_of(const ChunkRef& c) const {
  return grants_[static_cast<std::size_t>(c.first)][static_cast<std::size_t>(c.second)];
}

std::optional<ChunkRef> SendBook::next(const ReceiveBook& received) {
  skip_dropped();
  const auto pair = next_pair(received);
  if (!pair) return std::nullopt;
  const ChunkRef c = queue_[*pair][next_[*pair]++];
  pacing_.sent(*pair, chunk_bytes(c));
  count_in_flight(c, 1);
  return c;
}

// Whether the pair has at most low_grants chunks granted ahead of where it stalls: one of its
// next chunks, that many and one more, is not granted yet (a pair sends in order, so it stops at
// the first).
bool SendBook::grants_run_low(const ChunkRef& c) const {
  const auto pair = static_cast<std::size_t>(program_.sends()[static_cast<std::size_t>(c.first)].peer.value);
  const auto& queue = queue_[pair];
  const std::size_t end = next_[pair] + static_cast<std::size_t>(pacing_rule_.low_grants) + 1;
  if (end > queue.size()) return true;
  return std::any_of(queue.begin() + static_cast<std::ptrdiff_t>(next_[pair]),
                     queue.begin() + static_cast<std::ptrdiff_t>(end),
                     [&](const ChunkRef& q) { return !granted(q); });
}

std::optional<ChunkRef> SendBook::head(std::size_t pair) const {
  if (next_[pair] >= queue_[pair].size()) return std::nullopt;
  return queue_[pair][next_[pair]];
}

void SendBook::put(const ChunkRef& c) {
  ++put_chunks_[static_cast<std::size_t>(c.first)];
  ++flushing_[static_cast<std::size_t>(c.first)];
}

void SendBook::flushed(const ChunkRef& c, std::int64_t slot) {
  --flushing_[static_cast<std::size_t>(c.first)];
  settle(c, slot);
  --chunks_left_;
}

bool SendBook::drop(std::size_t send) {
  if (dropped_[send]) return false;
  dropped_[send] = true;
  chunks_left_ -= static_cast<std::int64_t>(program_.sends()[send].chunks.size()) - put_chunks_[send];
  return true;
}

void SendBook::abandon(std::size_t send) {
  chunks_left_ -= flushing_[send];
  flushing_[send] = 0;
}

void SendBook::settle(const ChunkRef& c, std::int64_t slot) {
  if (slot >= 0) pack_slots_.give(slot);
  count_in_flight(c, -1);
}

bool SendBook::ready(const ChunkRef& c, const ReceiveBook& received) const {
  const auto j = static_cast<std::size_t>(c.first);
  const auto k = static_cast<std::size_t>(c.second);
  return grants_[j][k] && received.landed(program_.waits[j][k]) &&
         (!program_.send_runs[j][k].empty() || pack_slots_.available());
}

// A dropped transfer's chunks are never sent: each pair's head moves past them.
void SendBook::skip_dropped() {
  for (std::size_t p = 0; p < queue_.size(); ++p)
    while (next_[p] < queue_[p].size() && dropped_[static_cast<std::size_t>(queue_[p][next_[p]].first)])
      ++next_[p];
}

// The pair whose head chunk goes next: ready, room on its link, first in PairPacing's order.
std::optional<std::size_t> SendBook::next_pair(const ReceiveBook& received) const {
  std::optional<std::size_t> best;
  for (std::size_t p = 0; p < queue_.size(); ++p) {
    if (next_[p] >= queue_[p].size() || !link_has_room(p) || !ready(queue_[p][next_[p]], received)) continue;
    if (!best ||
        pacing_.before(p, chunk_bytes(queue_[p][next_[p]]), *best, chunk_bytes(queue_[*best][next_[*best]])))
      best = p;
  }
  return best;
}

// Pairs that share links by their bytes post on a link kind only while it has room
// (lowering/pair_pacing.h); otherwise every ready chunk goes at once.
bool SendBook::link_has_room(std::size_t pair) const {
  if (!pacing_rule_.by_bytes) return true;
  const auto link = link_of(queue_[pair][next_[pair]]);
  return in_flight_bytes_[link] < lowering::kPacedInFlight.value || in_flight_chunks_[link] < 2;
}

std::size_t SendBook::link_of(const ChunkRef& c) const {
  const auto t = program_.sends()[static_cast<std::size_t>(c.first)].transfer;
  return static_cast<std::size_t>(program_.lowered->plan().transfers[static_cast<std::size_t>(t)].link);
}

std::int64_t SendBook::chunk_bytes(const ChunkRef& c) const {
  return program_.layout(program_.sends()[static_cast<std::size_t>(c.first)].transfer).chunk_bytes(c.second);
}

// Counts the chunk as posted (sign 1) or flushed (sign -1) on its link kind.
void SendBook::count_in_flight(const ChunkRef& c, std::int64_t sign) {
  const auto link = link_of(c);
  in_flight_bytes_[link] += sign * chunk_bytes(c);
  in_flight_chunks_[link] += sign;
}

}  // namespace refit::ucx_detail
