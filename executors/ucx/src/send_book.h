#pragma once
// The sending half of an execution's bookkeeping on one rank: which chunk goes next. Per receiver
// (a pair), the rank sends its chunks in plan order. The head chunk may go once it is granted,
// the received chunks it forwards have landed (ReceiveBook) and, if it must be packed, a pack slot
// is free. Among the pairs whose head may go, the next is the one PairPacing puts first, while
// its link kind has room (lowering/pair_pacing.h), when the execution model says that pairs share
// links by their bytes; otherwise any ready head goes. It also counts what is put and not yet
// flushed, and what a dropped transfer no longer owes. Plain bookkeeping: the engine packs, puts
// and flushes, so that it can be tested without UCX.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "receive_book.h"
#include "refit/lowering/pair_pacing.h"
#include "slot_pool.h"
#include "ucx_program.h"

namespace refit::ucx_detail {

using ChunkRef = std::pair<std::int32_t, std::int64_t>;  // (index in UcxProgram::sends(), chunk)

// How the sends share the links, from the executor's execution model.
struct SendPacing {
  bool by_bytes = false;  // pairs share links by their bytes (PairPacing), else every ready chunk goes
  // A pair with at most this many chunks granted ahead of its head runs low on grants.
  std::int64_t low_grants = 0;
};

class SendBook {
 public:
  SendBook(const UcxProgram& program, std::int32_t world, SendPacing pacing);

  // The send of `transfer` (any receiver); none if this rank does not send it.
  std::optional<std::size_t> send_of(std::int64_t transfer) const;
  // The send a grant from rank `from` of chunk `chunk` of `transfer` is for: one this rank sends
  // that rank, with the chunk not granted yet.
  std::optional<std::size_t> grantable(std::int64_t transfer, std::int32_t from, std::int64_t chunk) const;
  void grant(std::size_t send, std::int64_t chunk, std::vector<Run> runs);
  bool granted(const ChunkRef& c) const { return grant_of(c).has_value(); }
  // Where the receiver lets the chunk's pieces go. Precondition: granted.
  const std::optional<std::vector<Run>>& grant_of(const ChunkRef& c) const;

  // The chunk that goes next, taken off its pair's queue and counted as posted on its link; none
  // while no pair's head may go.
  std::optional<ChunkRef> next(const ReceiveBook& received);
  // Whether the chunk's pair has at most SendPacing::low_grants chunks granted ahead of its head.
  bool grants_run_low(const ChunkRef& c) const;
  // The next chunk of the pair with receiver rank `pair`, if it has one left.
  std::optional<ChunkRef> head(std::size_t pair) const;
  std::size_t pairs() const { return queue_.size(); }

  // A pack slot for a chunk that must be packed. Precondition: one is free (next() said so).
  std::int64_t take_pack_slot() { return pack_slots_.take(); }
  void give_pack_slot(std::int64_t slot) { pack_slots_.give(slot); }

  // The chunk was put; its flush is pending.
  void put(const ChunkRef& c);
  // Its flush completed (or failed for a gone receiver): the chunk is done, its slot back.
  void flushed(const ChunkRef& c, std::int64_t slot);
  // Chunks still to send or flush, those of dropped sends not counted.
  std::int64_t chunks_left() const { return chunks_left_; }

  // Elastic refit: the send's unsent chunks no longer count (chunks already put still get their
  // flush). False if it was dropped already.
  bool drop(std::size_t send);
  bool dropped(std::size_t send) const { return dropped_[send]; }
  // The send's pending flushes no longer count (its receiver is gone); the engine settles each.
  void abandon(std::size_t send);
  // An abandoned flush: its slot comes back and the link no longer counts its chunk.
  void settle(const ChunkRef& c, std::int64_t slot);
  // Whether the send is dropped and none of its chunks is in flight: the receiver may be told.
  bool drop_settled(std::size_t send) const { return dropped_[send] && flushing_[send] == 0; }

 private:
  bool ready(const ChunkRef& c, const ReceiveBook& received) const;
  void skip_dropped();
  std::optional<std::size_t> next_pair(const ReceiveBook& received) const;
  bool link_has_room(std::size_t pair) const;
  std::size_t link_of(const ChunkRef& c) const;
  std::int64_t chunk_bytes(const ChunkRef& c) const;
  void count_in_flight(const ChunkRef& c, std::int64_t sign);

  const UcxProgram& program_;
  SendPacing pacing_rule_;
  std::vector<std::int32_t> send_of_transfer_;                        // by transfer id; -1: not sent here
  std::vector<std::vector<std::optional<std::vector<Run>>>> grants_;  // by send, by chunk
  std::vector<std::vector<ChunkRef>> queue_;                          // by receiver rank, plan order
  std::vector<std::size_t> next_;                                     // by receiver rank
  lowering::PairPacing pacing_;                                       // by receiver rank
  std::array<std::int64_t, kLinkKinds> in_flight_bytes_{};            // posted, not flushed
  std::array<std::int64_t, kLinkKinds> in_flight_chunks_{};
  SlotPool pack_slots_;
  std::int64_t chunks_left_ = 0;
  std::vector<bool> dropped_;             // by send
  std::vector<std::int64_t> put_chunks_;  // by send
  std::vector<std::int32_t> flushing_;    // by send: chunks put, flush pending
};

}  // namespace refit::ucx_detail
