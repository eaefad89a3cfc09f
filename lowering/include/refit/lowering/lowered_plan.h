#pragma once
// What every rank derives from the plan alone, before its own buffers come in: each transfer's
// chunks (the one chunk rule) and, for each chunk that forwards data, the received chunks it
// waits for. Executors and the simulator all start from this.
#include <cstdint>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/lowering/message_layout.h"
#include "refit/lowering/relays.h"
#include "refit/planner/plan.h"

namespace refit::lowering {

// Staging per rank when nobody says otherwise (ExecutorOptions::staging), and so the chunks the
// simulator assumes.
inline constexpr Bytes kDefaultStaging{std::int64_t{256} << 20};
// The least staging: one chunk of the smallest (kAlign bytes) and its half-staging rule.
inline constexpr Bytes kMinStaging{2 * kAlign};

// A forwarding chunk may go once the first `chunks` chunks of `transfer` have landed at its sender.
struct ChunkWait {
  std::int32_t transfer = 0;
  std::int64_t chunks = 0;
  bool operator==(const ChunkWait&) const = default;
};

class LoweredPlan {
 public:
  // Staging per rank in bytes; every rank of a refit must use the same, since it sets the chunks.
  // The one gate a plan passes before an executor or the simulator cuts it into chunks: refuses a
  // plan that breaks validate_structure (naming the rule and the transfer), staging below
  // kMinStaging, and more chunks than limits::kMaxChunks. (The delta executor, which moves pieces
  // rather than chunks, checks validate_structure itself.) Precondition: `plan` outlives the result.
  [[nodiscard]] static Result<LoweredPlan> make(const Plan& plan, Bytes staging);
  // make() for a plan known to pass validate_structure (the simulator checks a plan before a call
  // schedule indexes it by its transfers, and the part of it the calls move passes with it): the
  // other refusals only, without walking every segment again.
  [[nodiscard]] static Result<LoweredPlan> make_validated(const Plan& plan, Bytes staging);
  // What chunks() of make(plan, staging) would be, counted without materialising them (a
  // description-sized plan may have more chunks than make() accepts). Preconditions as make's,
  // and staging >= kMinStaging.
  static std::int64_t count_chunks(const Plan& plan, Bytes staging);

  const Plan& plan() const { return *plan_; }
  Bytes staging() const { return staging_; }
  const MessageLayout& layout(std::int32_t transfer) const {
    return layouts_[static_cast<std::size_t>(transfer)];
  }
  const RelayIndex& relays() const { return relays_; }
  // Chunks of all transfers: the point-to-point messages an executor posts.
  std::int64_t chunks() const;

  // What chunk k of transfer t must wait for, one entry per upstream transfer: the chunk holding
  // the last element of each part it forwards (that chunk and those before it). Empty when the
  // chunk carries only its sender's own data. Every chunk of a quantize step waits for all of
  // every transfer it quantizes (Transfer::quantizes). Refuses a forwarded range the upstream transfer
  // does not deliver, naming it.
  [[nodiscard]] Result<std::vector<ChunkWait>> waits(std::int32_t t, std::int64_t k) const;
  // Per upstream transfer of t (t forwards what it delivered), the most of it any chunk of t
  // waits for (`chunks`), and the first chunk of t that waits for that much (`at`): a pair sends
  // its chunks in order, so every chunk of t from `at` on goes after that wait. Found per segment
  // of t and part of one (a binary search each), not chunk by chunk. Refuses what waits() refuses.
  struct UpstreamNeed {
    std::int32_t transfer = 0;
    std::int64_t chunks = 0;
    std::int64_t at = 0;
    bool operator==(const UpstreamNeed&) const = default;
  };
  [[nodiscard]] Result<std::vector<UpstreamNeed>> upstream_needs(std::int32_t t) const;

 private:
  LoweredPlan(const Plan& plan, Bytes staging);
  // The chunk of transfer `via` that holds element `index` of its segment `segment`.
  std::int64_t chunk_holding(std::int32_t via, std::int32_t segment, std::int64_t index) const;
  // Of the elements of `part`, a box inside segment `segment` of transfer `via`: the most chunks
  // of `via` one of them needs, and the first (row-major in `part`) that needs as many. The
  // part's row-major order agrees with the segment's, so the chunks needed rise along it.
  std::pair<std::int64_t, std::int64_t> most_needed(std::int32_t via, std::int32_t segment,
                                                    const Box& part) const;

  const Plan* plan_;
  Bytes staging_;
  std::vector<MessageLayout> layouts_;
  RelayIndex relays_;
};

}  // namespace refit::lowering
