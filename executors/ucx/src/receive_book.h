#pragma once
// The receiving half of an execution's bookkeeping on one rank: which chunks it grants, and when.
// In-place chunks (landing where they belong, or in scratch) are granted per sender up to a window
// of chunks not yet landed; staged chunks as receive-staging slots come free; both in plan order.
// It also keeps what has landed (by receive: how many first chunks, and a rank's quantize steps
// once run), which forwarding chunks wait for. Plain bookkeeping: the engine posts the grants it
// hands out and unpacks what lands, so that it can be tested without UCX.
#include <cstdint>
#include <optional>
#include <vector>

#include "slot_pool.h"
#include "ucx_program.h"

namespace refit::ucx_detail {

// A chunk the rank lets its sender put: where its pieces go (runs in the rank's regions).
struct Grant {
  std::size_t receive = 0;  // index in UcxProgram::receives()
  std::int64_t chunk = 0;
  std::vector<Run> runs;
};

class ReceiveBook {
 public:
  // window: in-place chunks granted ahead to one sender, at least 1.
  ReceiveBook(const UcxProgram& program, std::int32_t world, std::int64_t window);

  // The grants of the start: every sender's first window, and staged chunks while slots last.
  void start(std::vector<Grant>& out);

  // The receive of `transfer` from rank `from`, if this rank receives it from that rank.
  std::optional<std::size_t> receive_from(std::int64_t transfer, std::int32_t from) const;
  // The receive of `transfer` (any sender); none if this rank does not receive it.
  std::optional<std::size_t> receive_of(std::int64_t transfer) const;
  // Whether chunk `chunk` of the receive may land now: granted and not landed yet (any chunk of a
  // dropped receive that has not landed: its sender may have put it before it dropped).
  bool awaits(std::size_t receive, std::int64_t chunk) const;
  // The staging slot the chunk was granted, or -1 (in place).
  std::int64_t slot(std::size_t receive, std::int64_t chunk) const;

  // The chunk has landed (and was unpacked): its slot or window place goes to the next chunks.
  void land(std::size_t receive, std::int64_t chunk, std::vector<Grant>& out);
  // A chunk of a dropped receive arrived: not used, what it was granted goes to the next chunks.
  void discard(std::size_t receive, std::int64_t chunk, std::vector<Grant>& out);
  // Quantize step `step` has run: its chunks count as landed for the chunks that forward it.
  void step_ran(std::size_t step);

  // Whether every wait is over (what a forwarding chunk or a quantize step waits for).
  bool landed(const std::vector<ChunkWait>& waits) const;
  // The receive's first chunk not landed (its chunk count once all have).
  std::int64_t landed_prefix(std::size_t receive) const { return prefix_[receive]; }
  // Chunks still to land, those of dropped receives not counted.
  std::int64_t chunks_left() const { return chunks_left_; }

  // Elastic refit: the receive's missing chunks will not come. Their grants stay held until
  // release(): the sender may still put a chunk it had started.
  void drop(std::size_t receive);
  bool dropped(std::size_t receive) const { return dropped_[receive]; }
  // What a dropped receive's grants held comes back (its sender dropped it too, or is gone).
  void release(std::size_t receive, std::vector<Grant>& out);
  bool released(std::size_t receive) const { return released_[receive]; }

 private:
  using ChunkRef = std::pair<std::size_t, std::int64_t>;  // (receive, chunk)

  void grant_in_place(std::size_t sender, std::vector<Grant>& out);
  void grant_staged(std::vector<Grant>& out);
  void free_chunk(std::size_t receive, std::int64_t chunk);
  std::size_t sender(std::size_t receive) const;

  const UcxProgram& program_;
  std::int64_t window_;
  std::vector<std::int32_t> receive_of_transfer_;  // by transfer id; -1: not received here
  std::vector<std::vector<bool>> arrived_;         // by receive, by chunk
  std::vector<std::int64_t> prefix_;  // by receive, then by quantize step: first chunks all landed
  std::vector<std::vector<std::int64_t>> slot_of_;  // by receive, by chunk: staging slot, or -1
  std::vector<std::vector<bool>> granted_;          // by receive, by chunk: granted in place, not landed
  std::vector<ChunkRef> staged_;                    // staged chunks in plan order
  std::size_t next_staged_ = 0;
  std::vector<std::vector<ChunkRef>> in_place_;  // by sender rank: other chunks, plan order
  std::vector<std::size_t> next_in_place_;       // by sender rank
  std::vector<std::int64_t> in_place_granted_;   // by sender rank: granted, not yet landed
  SlotPool slots_;
  std::int64_t chunks_left_ = 0;
  std::vector<bool> dropped_;   // by receive
  std::vector<bool> released_;  // by receive
};

}  // namespace refit::ucx_detail
