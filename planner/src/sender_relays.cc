#include "sender_relays.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "refit/core/index.h"

namespace refit::planner_detail {
namespace {

class SenderRelays {
 public:
  SenderRelays(std::vector<Assignment>& a, std::vector<std::int64_t>& bytes, std::deque<Box>& boxes,
               const PlacedCluster& c, const RelayCuts& cuts)
      : a_(a),
        bytes_(bytes),
        boxes_(boxes),
        c_(c),
        cuts_(cuts),
        launch_(c.cluster().nics().size(), Rank{-1}),
        sent_by_(c.cluster().nics().size()),
        feeds_(a.size(), false),
        hop_out_(c.cluster().gpus().size(), 0.0),
        hop_in_(c.cluster().gpus().size(), 0.0) {
    auto loads = nic_loads(a, bytes, c);
    tx_ = std::move(loads.tx);
    receiving_ = loads.receiving_s;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].relay_from >= 0) feeds_[at(a[i].relay_from)] = true;
      if (const auto n = c.nic_of(a[i].sender); n && a[i].relay_from < 0) sent_by_[at(*n)].push_back(i);
    }
  }

  // Levels every domain; `part_of` (the parts, by rank) is asked for only where some NIC sends for
  // longer than the busiest receiver takes in, without which no domain's level is exceeded.
  void run(const std::function<std::vector<std::int32_t>()>& part_of) {
    bool busy = false;
    for (std::size_t n = 0; n < tx_.size(); ++n)
      busy = busy || tx_[n] > receiving_ * bw(n) * (1 + kSenderRelayMargin);
    if (!busy) return;
    part_of_ = part_of();
    for (std::size_t r = 0; r < part_of_.size(); ++r)
      if (part_of_[r] >= 0) add_launch(Rank{static_cast<std::int32_t>(r)});
    for (std::size_t d = 0; d < c_.cluster().domains().size(); ++d)
      level_domain(static_cast<std::int32_t>(d));
  }

 private:
  double bw(std::size_t nic) const { return c_.cluster().nics()[nic].bandwidth.value; }
  std::size_t gpu(Rank r) const { return at(c_.gpu_of(r).value); }
  double nvlink(Rank r) const { return c_.cluster().gpus()[gpu(r)].nvlink_bandwidth.value; }

  // What NIC n's relay may still take on by `level`: room on the NIC, and on its GPU's NVLink
  // ingress for the hops that bring it there.
  double room(std::size_t n, double level) const {
    const Rank relay = launch_[n];
    return std::min(level * bw(n) - tx_[n], level * nvlink(relay) - hop_in_[gpu(relay)]);
  }
  // What `sender` may still hop away by `level`, on its GPU's NVLink egress: a hop slower than the
  // NIC it relieves must not take longer than the level it levels to.
  double hop_room(Rank sender, double level) const { return level * nvlink(sender) - hop_out_[gpu(sender)]; }

  // The rank that sends for NIC n: the first of a part's ranks behind it (a NIC's ranks are of one
  // part: sharing it joins them).
  void add_launch(Rank r) {
    const auto n = c_.nic_of(r);
    if (n && launch_[at(*n)].value < 0) launch_[at(*n)] = r;
  }

  // The NICs of the part's ranks in `domain` level their sending at the larger of their mean time
  // and the busiest receiver's.
  void level_domain(std::int32_t domain) {
    std::vector<std::size_t> nics;
    for (std::size_t n = 0; n < launch_.size(); ++n)
      if (launch_[n].value >= 0 && c_.domain_of(launch_[n]) == domain) nics.push_back(n);
    if (nics.size() < 2) return;
    double bytes = 0, bandwidth = 0;
    for (const auto n : nics) {
      bytes += tx_[n];
      bandwidth += bw(n);
    }
    const double level = std::max(bytes / bandwidth, receiving_);
    for (const auto n : nics)
      if (tx_[n] > level * bw(n) * (1 + kSenderRelayMargin)) relieve(n, domain, nics, level);
  }

  // Hands what NIC n sends beyond `level` to the NICs of `nics` with room, assignment by
  // assignment: whole where it fits and lightens n by more than it overshoots, else its head rows
  // (at least min_split) where it may be cut; what other domains forward from moves whole or not
  // at all, as they forward its whole box.
  void relieve(std::size_t n, std::int32_t domain, const std::vector<std::size_t>& nics, double level) {
    for (const std::size_t i : sent_by_[n]) {
      const double excess = tx_[n] - level * bw(n);
      if (excess <= 0) return;
      if (c_.domain_of(a_[i].sender) != domain) continue;
      const auto to = roomiest(nics, level, a_[i]);
      if (!to) continue;
      const double space = std::min(room(*to, level), hop_room(a_[i].sender, level));
      const double whole = static_cast<double>(bytes_[i]);
      const bool fits = whole <= space && whole <= 2 * excess;
      const double cut = std::min(excess, space);
      if (!fits && (feeds_[i] || cut < cuts_.min_split)) continue;
      const Rank relay = launch_[*to];
      const auto [moved, hopped] = hand_over(i, fits ? whole : cut, relay);
      const auto moved_bytes = static_cast<double>(bytes_[moved]);
      tx_[n] -= moved_bytes;
      tx_[*to] += moved_bytes;
      if (!hopped) continue;
      hop_out_[gpu(a_[moved].sender)] += moved_bytes;
      hop_in_[gpu(relay)] += moved_bytes;
    }
  }

  // The NIC of `nics` with the most room below `level` whose rank may relay `a`'s box.
  std::optional<std::size_t> roomiest(const std::vector<std::size_t>& nics, double level,
                                      const Assignment& a) const {
    std::optional<std::size_t> best;
    double most = 0;
    for (const auto n : nics)
      if (const double space = room(n, level);
          space > most && part_of_[at(launch_[n].value)] == part_of_[at(a.sender.value)] &&
          !cuts_.touches(a.item.tensor, launch_[n], *a.box) && hop_fits(a, launch_[n])) {
        most = space;
        best = n;
      }
    return best;
  }

  // Assignment i, or its head rows of about `wanted` moved bytes, goes first to `relay` over
  // NVLink, which sends it on; returns the assignment that now crosses from the relay, and whether
  // a new hop brings it there. A box that the sender sends to several domains hops to a relay
  // once: the relay sends each of them on (or their head rows) from the one hop.
  struct HandedOver {
    std::size_t crossing;
    bool hopped;
  };
  HandedOver hand_over(std::size_t i, double wanted, Rank relay) {
    const double whole = static_cast<double>(bytes_[i]);
    std::size_t crossing = i;
    if (wanted < whole - cuts_.min_split) {
      const auto element = cuts_.element_size[a_[i].item.tensor];
      const double dense = static_cast<double>(a_[i].box->volume() * element);
      if (auto cut = split_rows(*a_[i].box, Bytes{std::llround(wanted * dense / whole)}, element)) {
        const Box& head = boxes_.emplace_back(std::move(cut->first));
        const Box& rest = boxes_.emplace_back(std::move(cut->second));
        const auto head_bytes = std::llround(whole * static_cast<double>(head.volume() * element) / dense);
        a_[i].box = &rest;
        bytes_[i] -= head_bytes;
        a_.push_back(
            Assignment{.item = a_[i].item, .sender = a_[i].sender, .landing = a_[i].landing, .box = &head});
        bytes_.push_back(head_bytes);
        feeds_.push_back(false);
        crossing = a_.size() - 1;
      }
    }
    auto& hops = hops_[{a_[crossing].sender.value, relay.value, a_[crossing].item.tensor}];
    for (const auto h : hops)
      if (a_[h].box->contains(*a_[crossing].box)) {
        a_[crossing].relay_from = static_cast<std::int32_t>(h);
        return {crossing, false};
      }
    hops.push_back(a_.size());
    a_.push_back(Assignment{.item = a_[crossing].item,
                            .sender = a_[crossing].sender,
                            .landing = relay,
                            .box = a_[crossing].box,
                            .relay_from = -1,
                            .hop = true});
    bytes_.push_back(bytes_[crossing]);
    feeds_.push_back(true);
    a_[crossing].relay_from = static_cast<std::int32_t>(a_.size() - 1);
    return {crossing, true};
  }

  // Whether `relay` may send a's box (or its head rows) on: no hop from a's sender brings it
  // only part of that box. The pair's hops travel as one message, which would land those rows
  // twice (the whole box for one domain and its head rows for another).
  bool hop_fits(const Assignment& a, Rank relay) const {
    const auto it = hops_.find({a.sender.value, relay.value, a.item.tensor});
    if (it == hops_.end()) return true;
    bool part = false;
    for (const auto h : it->second) {
      if (a_[h].box->contains(*a.box)) return true;
      part = part || overlap(*a_[h].box, *a.box);
    }
    return !part;
  }

  // A (sender, relay) pair and a tensor: the hops that carry its boxes.
  using HopKey = std::tuple<std::int32_t, std::int32_t, std::uint32_t>;

  std::vector<Assignment>& a_;
  std::vector<std::int64_t>& bytes_;
  std::deque<Box>& boxes_;
  const PlacedCluster& c_;
  const RelayCuts& cuts_;
  std::vector<std::int32_t> part_of_;  // by rank: its part (-1: in none)
  std::vector<double> tx_;             // bytes each NIC sends
  std::vector<Rank> launch_;           // per NIC, the part's rank that sends through it (-1: none)
  std::vector<std::vector<std::size_t>> sent_by_;  // per NIC, the assignments its holders send
  std::vector<bool> feeds_;
  std::vector<double> hop_out_;                      // per GPU, the bytes it hops over NVLink to relays
  std::vector<double> hop_in_;                       // per GPU, the bytes hops bring it to send on
  std::map<HopKey, std::vector<std::size_t>> hops_;  // their hop assignments
  double receiving_ = 0;                             // the busiest receiving NIC's time, in seconds
};

}  // namespace

void relay_at_senders(std::vector<Assignment>& assignments, std::vector<std::int64_t>& bytes,
                      std::deque<Box>& boxes, const std::function<std::vector<std::int32_t>()>& part_of,
                      const PlacedCluster& cluster, const RelayCuts& cuts) {
  SenderRelays(assignments, bytes, boxes, cluster, cuts).run(part_of);
}

}  // namespace refit::planner_detail
