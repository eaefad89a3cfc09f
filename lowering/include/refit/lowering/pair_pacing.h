#pragma once
// The order in which a sender's pairs share a link when its execution model says that pairs
// share by their bytes (ExecutionModel::pairs_share_by_bytes): refit's UCX executor posts its
// next chunk to the ready pair whose chunk would end earliest if every pair got a share of the
// link in proportion to its bytes (weighted fair queueing: the smallest (sent + chunk) / total),
// and posts more on a link kind only while fewer than kPacedInFlight bytes or fewer than two
// chunks are posted there (one in flight, one queued behind it), so that the link carries chunks
// in that order rather than sharing itself equally among every pair with work posted. With every
// pair ready from the start, each chunk has gone once the weighted fluid share would have
// finished it (the chunks before it all finish earlier there); with pairs held up by grants or
// relays, within one chunk of it (Parekh and Gallager's bound). The simulator models the fluid
// share: each pair one flow weighted by its bytes (simulator/src/plan_model.cc), so a
// link's pairs all finish together.
#include <cstdint>
#include <vector>

#include "refit/core/units.h"

namespace refit::lowering {

// Enough posted to cover a put's round trip many times over at any NIC speed (8 MiB chunks at
// 50 GB/s take 170 us against a round trip of some 20 us), little enough that the order holds.
inline constexpr Bytes kPacedInFlight{32LL << 20};

class PairPacing {
 public:
  // Per pair: its bytes in the plan (> 0 for a pair with anything to send).
  explicit PairPacing(std::vector<std::int64_t> pair_bytes);

  // Whether pair a's next chunk (a_chunk bytes) goes before pair b's (b_chunk bytes): it ends
  // earlier in the weighted share; ties go to the lower pair.
  bool before(std::size_t a, std::int64_t a_chunk, std::size_t b, std::int64_t b_chunk) const;
  void sent(std::size_t pair, std::int64_t chunk) { sent_[pair] += chunk; }

 private:
  double finish(std::size_t pair, std::int64_t chunk) const;

  std::vector<std::int64_t> total_;
  std::vector<std::int64_t> sent_;
};

}  // namespace refit::lowering
