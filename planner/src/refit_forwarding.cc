#include "refit_forwarding.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>
#include <ranges>
#include <span>
#include <tuple>
#include <unordered_set>

#include "first_seen_ids.h"

namespace refit::planner_detail {
namespace {

// A piece as one sending NIC sends it (across senders: as every NIC does, sender_nic -1). First
// only the domains that NIC feeds forward it to each other: each domain takes its pieces from its
// own share of the holders (holder_share), so domains fed by different source replicas stay
// apart, and the plan's parts that share no NIC stay independent (planned once and copied,
// simulated once). Only a NIC still far over joins them (run()).
struct PieceKey {
  std::uint32_t tensor, dest, piece;
  std::int32_t sender_nic;
  bool operator==(const PieceKey&) const = default;
};
struct PieceKeyHash {
  std::uint64_t operator()(const PieceKey& k) const {
    return (static_cast<std::uint64_t>(k.tensor) * 0x9e3779b97f4a7c15ull) ^
           (static_cast<std::uint64_t>(k.dest) * 0xbf58476d1ce4e5b9ull) ^
           (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.sender_nic)) * 0x94d049bb133111ebull) ^
           k.piece;
  }
};

class Forwarder {
 public:
  Forwarder(std::vector<Assignment>& a, const PlacedCluster& c, const std::vector<std::int64_t>& bytes)
      : a_(a), c_(c), bytes_(bytes), feeds_(a.size(), false) {
    auto loads = nic_loads(a, bytes, c);
    tx_ = std::move(loads.tx);
    target_ = loads.receiving_s;
  }

  // Whether some sending NIC was still busier than the busiest receiver once the domains each
  // NIC feeds forwarded to each other, so that domains fed by other NICs forwarded too.
  bool run() {
    relieve_all(false);
    const auto far_over = [&](std::size_t n) {
      const double excess = tx_[n] / bw(n) - target_;
      return excess > kAcrossSlack * target_ &&
             excess > kAcrossLatencies * c_.cluster().nics()[n].latency.value;
    };
    if (std::ranges::none_of(std::views::iota(std::size_t{0}, tx_.size()), far_over)) return false;
    relieve_all(true);
    return true;
  }

 private:
  // Assignments grouped by piece, groups in order of their first member, members ascending.
  struct Groups {
    std::vector<std::size_t> members;
    std::vector<std::size_t> first;        // group g's members: [first[g], first[g + 1])
    std::vector<std::size_t> sender_nic;   // by group
    std::vector<std::size_t> landing_nic;  // by group: its first member's
    std::span<const std::size_t> members_of(std::size_t g) const {
      return std::span(members).subspan(first[g], first[g + 1] - first[g]);
    }
  };

  // First the domains one NIC feeds forward a piece to each other; where a NIC is still over,
  // the domains other NICs feed forward to its domains too: a source replica that serves its own
  // engines sends each byte once, and when its NICs cannot send all of them in the time the
  // receivers take, the engines of other replicas pass on what they received instead.
  void relieve_all(bool across_senders) {
    const auto groups = pieces_sent_over(across_senders);
    // Members of a group share their sender's NIC (but across senders), and only moving one of
    // them lightens it: a group whose sender has room by its turn is passed over without reading
    // its members.
    for (const auto g : interleave_by_landing(groups.landing_nic)) {
      if (across_senders)
        relieve_across(groups.members_of(g));
      else if (over(groups.sender_nic[g], 0))
        relieve(groups.members_of(g));
    }
  }

  // Only pieces sent by an overloaded NIC can gain: their assignments, grouped (across senders:
  // with those of every other NIC that sends the piece).
  Groups pieces_sent_over(bool across_senders) const {
    Groups out;
    FirstSeenIds<PieceKey, PieceKeyHash> ids;
    std::vector<bool> wanted(a_.size(), false);
    if (across_senders) {  // every member of a piece some overloaded NIC sends
      std::unordered_set<PieceKey, PieceKeyHash> over_pieces;
      for (std::size_t i = 0; i < a_.size(); ++i)
        if (a_[i].relay_from < 0 && over(nic(a_[i].sender), 0)) over_pieces.insert(key_of(a_[i], true));
      for (std::size_t i = 0; i < a_.size(); ++i) wanted[i] = over_pieces.contains(key_of(a_[i], true));
    } else {
      for (std::size_t i = 0; i < a_.size(); ++i) wanted[i] = over(nic(a_[i].sender), 0);
    }
    std::vector<std::uint32_t> group_of(a_.size(), kNoGroup);
    for (std::size_t i = 0; i < a_.size(); ++i) {
      if (!wanted[i]) continue;
      const auto [g, fresh] = ids.insert(key_of(a_[i], across_senders));
      if (fresh) {
        out.sender_nic.push_back(nic(a_[i].sender));
        out.landing_nic.push_back(nic(a_[i].landing));
      }
      group_of[i] = g;
    }
    out.first.assign(ids.size() + 1, 0);
    for (const auto g : group_of)
      if (g != kNoGroup) ++out.first[g + 1];
    std::partial_sum(out.first.begin(), out.first.end(), out.first.begin());
    out.members.resize(out.first.back());
    auto next = out.first;
    for (std::size_t i = 0; i < a_.size(); ++i)
      if (group_of[i] != kNoGroup) out.members[next[group_of[i]]++] = i;
    return out;
  }

  // Relief stops once a sender has room, so the pieces met first are the ones forwarded. Taking
  // the k-th piece of every landing NIC before the (k+1)-th of any spreads the forwarding over
  // all landing NICs: a forwarder can only send what has reached it, so one that forwards
  // nearly as much as the busiest NIC carries cannot finish with the others.
  std::vector<std::size_t> interleave_by_landing(const std::vector<std::size_t>& landing_nic) const {
    std::vector<std::size_t> seen(c_.cluster().nics().size(), 0);
    std::vector<std::pair<std::size_t, std::size_t>> key(landing_nic.size());  // (k-th of its NIC, NIC)
    for (std::size_t g = 0; g < key.size(); ++g) key[g] = {seen[landing_nic[g]]++, landing_nic[g]};
    std::vector<std::size_t> order(key.size());
    std::iota(order.begin(), order.end(), 0);
    std::ranges::stable_sort(order, {}, [&](std::size_t g) { return key[g]; });
    return order;
  }

  std::size_t nic(Rank r) const { return static_cast<std::size_t>(*c_.nic_of(r)); }
  PieceKey key_of(const Assignment& a, bool across_senders) const {
    return {.tensor = a.item.tensor,
            .dest = a.item.dest,
            .piece = a.item.piece,
            .sender_nic = across_senders ? -1 : *c_.nic_of(a.sender)};
  }
  double bw(std::size_t n) const { return c_.cluster().nics()[n].bandwidth.value; }
  bool over(std::size_t n, double extra) const { return (tx_[n] + extra) / bw(n) > target_; }

  // Moves members whose sender is overloaded onto the landing NIC of a sibling that carries the
  // same box (feeder()), preferring siblings that will not themselves be moved (already
  // forwarded, or sent by a NIC with room). Every hop waits for its upstream, and a (sender,
  // receiver) pair sends its messages in plan order, so each hop can hold back the pair's later
  // messages: a wide, shallow tree of relays keeps data moving where a chain of the same width
  // makes the last domain wait for all hops. A moved member may still feed later ones where the
  // shallow siblings have no room. A member that feeds others is not moved, so depths stay.
  void relieve(std::span<const std::size_t> members) {
    std::vector<Placed> siblings;
    for (const auto k : members) {
      if (feeds_[k] || !over(nic(a_[k].sender), 0)) continue;
      siblings.clear();
      for (const auto j : members)
        if (j != k && *a_[j].box == *a_[k].box) siblings.push_back({.member = j, .depth = depth_of(j)});
      const auto may_move = [&](std::size_t j) {
        return a_[j].relay_from < 0 && over(nic(a_[j].sender), 0) && !feeds_[j];
      };
      const auto deepest = static_cast<std::uint32_t>(std::bit_width(siblings.size() + 1));
      if (const auto at = feeder(siblings, static_cast<double>(bytes_[k]), deepest, may_move))
        forward(k, siblings[*at].member);
    }
  }

  // Across senders, a piece's members are every domain that takes it, whichever NIC's share of
  // the holders feeds it. What the domains each NIC feeds forwarded to each other is undone and
  // each box's tree grown afresh (grow_tree): a member moved under another with the sibling it
  // forwards to lands that sibling a hop deeper, and where only deep members have room, such
  // moves chain the domains one behind the other (8 domains taking a piece formed a chain of 8,
  // each waiting on the one before).
  void relieve_across(std::span<const std::size_t> members) {
    for (const auto k : members) unforward(k);
    std::vector<bool> grown(members.size(), false);
    std::vector<std::size_t> same_box;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (grown[i]) continue;
      same_box.clear();
      for (std::size_t m = i; m < members.size(); ++m)
        if (!grown[m] && *a_[members[m]].box == *a_[members[i]].box) {
          same_box.push_back(members[m]);
          grown[m] = true;
        }
      grow_tree(same_box);
    }
  }

  // One root keeps sending the box: the one whose sender has sent least, of those the one whose
  // landing NIC sends least (it forwards the most). Every other member whose sender is over then
  // takes the box from a member already placed (feeder()): the tree fills level by level, as
  // wide as the landing NICs allow. Members are placed most room first, so that those that can
  // pass the box on have it early and the ones whose NICs are full hang below them as leaves.
  void grow_tree(std::span<const std::size_t> members) {
    const auto room_order = [&](std::size_t j) { return tx_[nic(a_[j].landing)]; };
    const auto keeps = [&](std::size_t j) { return std::pair(tx_[nic(a_[j].sender)], room_order(j)); };
    const auto kept = *std::ranges::min_element(members, {}, keeps);
    std::vector<std::size_t> order;
    for (const auto k : members)
      if (k != kept) order.push_back(k);
    std::ranges::stable_sort(order, {}, room_order);
    const auto deepest = static_cast<std::uint32_t>(std::bit_width(members.size()));
    std::vector<Placed> placed{{.member = kept, .depth = 0}};
    for (const auto k : order) {
      std::uint32_t depth = 0;
      if (over(nic(a_[k].sender), 0))
        if (const auto at =
                feeder(placed, static_cast<double>(bytes_[k]), deepest, [](std::size_t) { return false; })) {
          forward(k, placed[*at].member);
          depth = placed[*at].depth + 1;
        }
      placed.push_back({.member = k, .depth = depth});
    }
  }

  // A member of a tree being grown, and its forwarding hops from a source.
  struct Placed {
    std::size_t member;
    std::uint32_t depth;
  };

  // Which of `candidates` passes a box of `bytes` on: those `later` holds back last, then the
  // shallowest with room on its landing NIC, then the least loaded, no deeper than `deepest` (a
  // binary tree over the box's members). Where every landing NIC has room to pass a large box on
  // once, the tree would be a chain as long as the members, the last waiting on every hop before
  // it (a 1 GB embedding to 256 domains went down 249 hops), and the plan builder's passes grow
  // with the depth. Where only deeper members have room, the shallow one it overloads least;
  // where none has room, none (the member stays with its sender).
  template <class Later>
  std::optional<std::size_t> feeder(std::span<const Placed> candidates, double bytes, std::uint32_t deepest,
                                    Later later) const {
    std::optional<std::size_t> best, least;
    bool deeper_room = false;
    const auto landing = [&](std::size_t i) { return nic(a_[candidates[i].member].landing); };
    const auto rank = [&](std::size_t i) {
      return std::tuple(later(candidates[i].member), candidates[i].depth, tx_[landing(i)]);
    };
    const auto load = [&](std::size_t i) { return tx_[landing(i)] / bw(landing(i)); };
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const bool room = !over(landing(i), bytes);
      if (candidates[i].depth >= deepest) {
        deeper_room = deeper_room || room;
        continue;
      }
      if (room && (!best || rank(i) < rank(*best))) best = i;
      if (!least || load(i) < load(*least)) least = i;
    }
    return best ? best : deeper_room ? least : std::nullopt;
  }

  // Member k takes its box from its sender again.
  void unforward(std::size_t k) {
    feeds_[k] = false;
    if (a_[k].relay_from < 0) return;
    const auto b = static_cast<double>(bytes_[k]);
    tx_[nic(a_[static_cast<std::size_t>(a_[k].relay_from)].landing)] -= b;
    tx_[nic(a_[k].sender)] += b;
    a_[k].relay_from = -1;
  }

  // Member k takes its box from member j's landing rank instead of from its sender.
  void forward(std::size_t k, std::size_t j) {
    const auto b = static_cast<double>(bytes_[k]);
    tx_[nic(a_[k].sender)] -= b;
    tx_[nic(a_[j].landing)] += b;
    a_[k].relay_from = static_cast<std::int32_t>(j);
    feeds_[j] = true;
  }

  // Forwarding hops between a source and member j, walked up its feeders.
  std::uint32_t depth_of(std::size_t j) const {
    std::uint32_t hops = 0;
    for (auto i = a_[j].relay_from; i >= 0; i = a_[static_cast<std::size_t>(i)].relay_from) ++hops;
    return hops;
  }

  static constexpr std::uint32_t kNoGroup = UINT32_MAX;
  // Forwarding across senders joins parts that the planner would otherwise plan once and copy
  // (refit_parts.h), and the simulator simulate once, and each forwarded byte takes a hop more:
  // it is taken only where a NIC sends longer than the busiest receiver takes in by more than
  // this fraction of that time, and by more than this many of its message latencies (tiny models
  // on GB200, whose NICs send for a microsecond, went 1.45x slower with it).
  static constexpr double kAcrossSlack = 0.05;
  static constexpr double kAcrossLatencies = 4;
  std::vector<Assignment>& a_;
  const PlacedCluster& c_;
  const std::vector<std::int64_t>& bytes_;
  std::vector<double> tx_;  // bytes each NIC sends
  std::vector<bool> feeds_;
  double target_ = 0;
};

}  // namespace

bool forward_between_domains(std::vector<Assignment>& a, const PlacedCluster& c,
                             const std::vector<std::int64_t>& bytes) {
  return Forwarder(a, c, bytes).run();
}

}  // namespace refit::planner_detail
