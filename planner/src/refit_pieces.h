#pragma once
// Small pieces of the refit strategy that stand on their own: destination replicas grouped by
// NVLink domain, interned NIC sets, cutting boxes by rows, and walking balanced shares.
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/units.h"
#include "strategies.h"

namespace refit::planner_detail {

// A network item: piece `piece` of destination shard `dest` of tensor `tensor`, for the
// replicas of that shard in domain group `group`.
struct NetItem {
  std::uint32_t tensor;
  std::uint32_t dest;
  std::uint32_t group;
  std::uint32_t piece;
};

// A decided network crossing: `*box` (the item's piece or a row block of it) goes from `sender`
// to `landing`, or, when relay_from >= 0, from the landing rank of assignment relay_from, a
// destination domain that already receives the same box (forwarding between domains) or a rank
// beside the sender that a hop brought it to (sender_relays.h).
struct Assignment {
  NetItem item;
  Rank sender;
  Rank landing;
  const Box* box;  // the piece's own box, or a row block of it kept by the strategy
  std::int32_t relay_from = -1;
  // An NVLink hop from `sender` to a rank of its domain that sends the box on, not a crossing:
  // `landing` keeps it outside its own boxes and passes it to no replica.
  bool hop = false;
};

// What NICs carry for `assignments` (with `bytes`, their moved bytes): bytes each sends (a forwarded
// assignment's by its feeder's landing rank) and receives, and the busiest receiving NIC's time.
// A rank without a NIC counts on none.
struct NicLoads {
  std::vector<double> tx, rx;  // bytes, by NIC
  double receiving_s = 0;      // the most any NIC takes in, over its bandwidth
};
NicLoads nic_loads(const std::vector<Assignment>& assignments, const std::vector<std::int64_t>& bytes,
                   const PlacedCluster& cluster);

// Replicas of one destination shard that live in one NVLink domain: copy `copy` of the `copies`
// the shard's domain groups make of each of its pieces (holder_share).
struct DomainGroup {
  std::int32_t domain = 0;
  std::vector<Rank> replicas;
  std::size_t copy = 0;
  std::size_t copies = 1;
};
using DomainGroups = std::vector<std::vector<std::vector<DomainGroup>>>;  // [tensor][dest] -> groups

// [tensor][destination shard] -> its replicas grouped by domain, in order of first appearance.
DomainGroups group_by_domain(const PlanContext& c);

// The holders [first, last) of a piece's h holders that may send copy g of the G copies it
// makes (one per destination domain group that takes it over the network): those whose slot
// [i, i+1) meets [g*h/G, (g+1)*h/G). An equal width of the holder list per copy leaves every
// holder able to carry the same share (G/h copies), as with all h candidates, while a domain
// meets about h/G holders (one or two when G >= h) instead of all h, so that (sender, receiver)
// pairs grow with the GPUs rather than with their square. Holders are listed by rank, so
// neighbouring slots are one source replica for every piece that a domain takes.
std::pair<std::size_t, std::size_t> holder_share(std::size_t holders, std::size_t copy, std::size_t copies);

// Sorted, distinct NIC lists with small integer ids, so classes compare as integer pairs.
class NicSets {
 public:
  std::int32_t intern(std::vector<std::int32_t> nics);
  const std::vector<std::int32_t>& get(std::int32_t id) const { return sets_[static_cast<std::size_t>(id)]; }

 private:
  std::map<std::vector<std::int32_t>, std::int32_t> ids_;
  std::vector<std::vector<std::int32_t>> sets_;
};

// Pieces are not cut finer than this: a share's rounding error is cheaper than a tiny message.
inline constexpr double kMinSplitBytes = 1 << 20;

// Cuts `box` along its outermost dim of extent > 1 into a head of about `bytes` (whole rows,
// at least one row, at most all rows but one) and the rest; nothing when no dim can be cut.
std::optional<std::pair<Box, Box>> split_rows(const Box& box, Bytes bytes, std::int64_t element_size);

// Walks a list of (NIC, bytes) shares; the last share absorbs rounding leftovers, and a share
// left with at most `min_split` bytes passes them to the next. A side the balance did not choose
// (no shares) stays on each item's only NIC, with no limit.
class ShareCursor {
 public:
  ShareCursor(const std::vector<std::pair<std::int32_t, double>>& shares, double min_split)
      : shares_(shares),
        min_split_(min_split),
        left_(shares.empty() ? std::numeric_limits<double>::infinity() : shares.front().second) {}
  void skip_spent() {
    while (left_ <= min_split_ && at_ + 1 < shares_.size()) left_ += shares_[++at_].second;
  }
  double left() const { return left_; }
  std::int32_t nic(std::int32_t only_nic) const { return shares_.empty() ? only_nic : shares_[at_].first; }
  void consume(double bytes) { left_ -= bytes; }

 private:
  const std::vector<std::pair<std::int32_t, double>>& shares_;
  double min_split_;
  std::size_t at_ = 0;
  double left_;
};

}  // namespace refit::planner_detail
