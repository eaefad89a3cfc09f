#pragma once
// Where a process keeps the data its plan ranks send and receive. A received segment inside the
// rank's destination box lands there; one that a later transfer forwards but that lies (partly)
// outside it lands in scratch, laid out as its own box; anything else lands in staging only.
// Senders read sources from source shards, forwarded data from wherever it landed.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "box_walk.h"
#include "local_view.h"
#include "message_layout.h"
#include "program.h"
#include "relay_parts.h"

namespace refit::nccl_detail {

// A row-major array of array.box at `array.offset` in the buffer (kind, index).
struct Located {
  BufferKind kind = BufferKind::kShard;
  std::int32_t index = 0;
  Stored array;

  Address address(std::int64_t offset) const { return Address{kind, index, offset}; }
};

// Elements [first, first + count) of `box`, read from `from`.
struct SendPart {
  Located from;
  Box box;
  std::int64_t first = 0;
  std::int64_t count = 0;
};

class Storage {
 public:
  Storage(const Plan& plan, const RelayIndex& relays, const LocalView& view);

  std::int64_t scratch_bytes() const { return scratch_bytes_; }
  // The staging slot of a plan rank this process runs, or -1.
  std::int32_t slot_of(Rank r) const;

  // What piece `p` of transfer `t` is read from, on the sending slot: one part in the usual case;
  // a forwarded box gathered from several upstream segments comes as one part per box.
  // Refuses a source box that no source shard of the rank holds.
  Result<std::vector<SendPart>> send_parts(std::int32_t slot, const Transfer& t, const Piece& p) const;

  // Where segment `segment` of transfer `t` lands on the receiving slot; nothing: staging only.
  std::optional<Located> landing(std::int32_t slot, const Transfer& t, std::int32_t segment) const;
  // The slot's destination shard that meets `box` of `tensor` without holding all of it.
  std::optional<Located> partial_destination(std::int32_t slot, std::uint32_t tensor, const Box& box) const;

 private:
  std::optional<Located> shard_holding(const std::vector<LocalShard>& shards, std::uint32_t tensor,
                                       const Box& box) const;
  // Where the slot keeps segment `segment` of transfer `v`, which it received and forwards.
  Located received(std::int32_t slot, std::int32_t v, std::int32_t segment) const;
  static std::uint64_t key(std::int32_t transfer, std::int32_t segment) {
    return (static_cast<std::uint64_t>(transfer) << 32) | static_cast<std::uint32_t>(segment);
  }

  const Plan& plan_;
  const RelayIndex& relays_;
  const LocalView& view_;
  std::unordered_map<std::uint64_t, std::int64_t> scratch_;  // (transfer, segment) -> offset
  std::int64_t scratch_bytes_ = 0;
};

}  // namespace refit::nccl_detail
