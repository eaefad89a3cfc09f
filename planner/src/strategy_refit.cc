// Strategy `refit`: every (piece, destination NVLink domain) enters the domain exactly once.
//  1. A piece that some holder already has inside the domain goes over NVLink, from the holder or
//     replica whose NVLink port is least loaded; where the domain's replicas that need it
//     outnumber its holders there, scattered in row slabs, one to each replica, which forwards its
//     slab to the others (inside_domain.h).
//  2. Otherwise it crosses the network: the sender is chosen among the piece's holders that
//     serve this domain (holder_share: an equal slice of them per domain that takes the piece,
//     one or two holders when more domains take it than it has holders) and the landing GPU
//     among the domain's replicas that need it, so that the most loaded NIC (tx or rx) is as
//     light as possible (nic_balance, solved part by part: max-flow + binary search), splitting
//     pieces by rows where the fractional optimum splits them.
//  3. Where a piece's only holder would have to send it to more domains than the busiest
//     receiver can take in the same time, the domains its NIC feeds forward it to each other;
//     where its NIC is still busier than that, domains other NICs feed forward it to its domains
//     (refit_forwarding.h).
//  4. Where one of a domain's NICs would still send for longer than the domain's NICs do on
//     average (and than the busiest receiver takes in), part of what it sends hops over NVLink to a
//     rank of the job behind a NIC with room, which sends it on (sender_relays.h); not in a plan
//     for a delta refit (PlanOptions::neighbour_relays).
//  5. The landing GPU completes the other replicas in its domain over NVLink, chunk by chunk.
// Steps 2 and 3 weigh each piece by the bytes it moves: dense, or a delta refit's expected payload
// (PlanOptions::moved_bytes), so that a tensor that does not change costs no sender anything.
// Network messages are coalesced per (sender, landing) pair; relays per incoming message.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <span>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "balance_parts.h"
#include "inside_domain.h"
#include "plan_builder.h"
#include "plan_copies.h"
#include "refit/core/try.h"
#include "refit_forwarding.h"
#include "refit_parts.h"
#include "refit_pieces.h"
#include "sender_relays.h"
#include "strategies.h"

namespace refit::planner_detail {
namespace {

class RefitPlanner {
 public:
  // Plans the pieces that `groups` (group_by_domain's, or a part of them) take.
  RefitPlanner(const PlanContext& c, DomainGroups groups)
      : c_(c),
        b_(c.problem, c.cluster, c.strategy, c.options.chunk),
        groups_(std::move(groups)),
        moved_per_byte_(moved_per_byte(c)),
        min_split_(min_split(c, moved_per_byte_)),
        latency_bytes_(latency_bytes(c.cluster.cluster())),
        inside_(c, b_, [this](std::uint32_t t, const Box& box) { return moved(t, box); }),
        sent_(static_cast<std::size_t>(c.problem.world_size())),
        received_(static_cast<std::size_t>(c.problem.world_size())) {
    const auto nics = c.cluster.cluster().nics().size();
    balance_.tx_bandwidth.resize(nics);
    balance_.rx_bandwidth.resize(nics);
    for (std::size_t n = 0; n < nics; ++n)
      balance_.tx_bandwidth[n] = balance_.rx_bandwidth[n] = c.cluster.cluster().nics()[n].bandwidth.value;
    balance_.tx_fixed.assign(nics, 0.0);
    balance_.rx_fixed.assign(nics, 0.0);
  }

  // The most any NIC moves in its message latency.
  static double latency_bytes(const Cluster& c) {
    double most = 0;
    for (const auto& n : c.nics()) most = std::max(most, n.latency.value * n.bandwidth.value);
    return most;
  }

  // Bytes moved per dense byte, by tensor (empty: dense).
  static std::vector<double> moved_per_byte(const PlanContext& c) {
    std::vector<double> out;
    for (std::size_t t = 0; t < c.options.moved_bytes.size(); ++t) {
      const auto dense = c.problem.tensors()[t].tensor.bytes().value;
      out.push_back(
          dense > 0 ? static_cast<double>(c.options.moved_bytes[t].value) / static_cast<double>(dense) : 0.0);
    }
    return out;
  }

  // Pieces are not cut below kMinSplitBytes of dense data: in moved bytes, that much at the
  // problem's mean ratio of moved to dense bytes.
  static double min_split(const PlanContext& c, const std::vector<double>& per_byte) {
    if (per_byte.empty()) return kMinSplitBytes;
    double moved = 0, dense = 0;
    for (std::size_t t = 0; t < per_byte.size(); ++t) {
      const auto bytes = static_cast<double>(c.problem.tensors()[t].tensor.bytes().value);
      moved += bytes * per_byte[t];
      dense += bytes;
    }
    return dense > 0 ? kMinSplitBytes * moved / dense : 0.0;
  }

  // What `dense` bytes of tensor t weigh in the balance.
  double moved(std::uint32_t t, double dense) const {
    return moved_per_byte_.empty() ? dense : dense * moved_per_byte_[t];
  }
  double moved(std::uint32_t t, const Box& box) const {
    return moved(t, static_cast<double>(box.volume() * dtype_size(c_.problem.tensors()[t].tensor.dtype)));
  }

  // With `rounds`, each transfer's place in the rotated all-to-all (PlanBuilder::finish).
  [[nodiscard]] Result<Plan> run(std::vector<std::uint64_t>* rounds = nullptr) {
    for (std::uint32_t t = 0; t < c_.overlaps.size(); ++t) reserve_inside(t);
    for (std::uint32_t t = 0; t < c_.overlaps.size(); ++t) REFIT_TRY(collect_tensor(t));
    const auto result = balance_nic_load_by_parts(balance_);
    for (std::size_t k = 0; k < class_items_.size(); ++k) place_class(k, result.shares[k]);
    across_senders_ = forward_between_domains(assignments_, c_.cluster, assignment_bytes_);
    if (c_.options.neighbour_relays)
      relay_at_senders(
          assignments_, assignment_bytes_, split_boxes_, [this] { return parts_of_ranks(c_, groups_); },
          c_.cluster, relay_cuts());
    emit();
    return std::move(b_).finish(PlanBuilder::RelayOrder::kArrival, rounds);
  }

  // Whether domains took pieces from domains fed by another sending NIC (after run()): then the
  // plan of one part alone is not its part of the whole plan.
  bool forwarded_across_senders() const { return across_senders_; }

 private:
  void reserve_inside(std::uint32_t t) {
    const auto& o = c_.overlaps[t];
    for (std::uint32_t d = 0; d < o.destinations.size(); ++d)
      for (const auto& group : groups_[t][d])
        for (const auto& piece : o.destinations[d].pieces) inside_.reserve(t, piece, group);
  }

  [[nodiscard]] Result<void> collect_tensor(std::uint32_t t) {
    const auto& o = c_.overlaps[t];
    NicSets& sets = nic_sets_;
    std::map<std::tuple<std::uint32_t, std::size_t, std::size_t>, std::int32_t> source_set;
    // The NICs of the holders that serve copy g of G of a piece from source s (holder_share);
    // all the holders' when those have no NIC.
    auto tx_set = [&](std::uint32_t s, const DomainGroup& group) {
      const auto& holders = o.sources[s].holders;
      const auto [first, last] = holder_share(holders.size(), group.copy, group.copies);
      auto [it, inserted] = source_set.try_emplace({s, first, last}, 0);
      if (inserted) {
        auto nics = nics_of(std::span(holders).subspan(first, last - first));
        it->second = sets.intern(nics.empty() ? nics_of(holders) : std::move(nics));
      }
      return it->second;
    };
    for (std::uint32_t d = 0; d < o.destinations.size(); ++d)
      for (std::uint32_t g = 0; g < groups_[t][d].size(); ++g) {
        const auto& group = groups_[t][d][g];
        const auto landing_set = sets.intern(nics_of(group.replicas));
        for (std::uint32_t p = 0; p < o.destinations[d].pieces.size(); ++p) {
          const auto& piece = o.destinations[d].pieces[p];
          if (inside_.send(t, piece, group)) continue;
          const auto tx = tx_set(piece.source, group);
          if (sets.get(tx).empty() || sets.get(landing_set).empty())
            return mismatch(fmt::format(
                "tensor '{}': piece {} must cross the network to domain {}, but none of {} has a NIC",
                c_.problem.tensors()[t].tensor.name, piece.box.to_string(), group.domain,
                sets.get(tx).empty() ? "the GPUs that hold it" : "the domain's GPUs that need it"));
          add_network_item(NetItem{.tensor = t, .dest = d, .group = g, .piece = p}, tx, landing_set);
        }
      }
    return {};
  }

  std::vector<std::int32_t> nics_of(std::span<const Rank> ranks) const {
    std::vector<std::int32_t> out;
    for (Rank r : ranks)
      if (auto n = c_.cluster.nic_of(r)) out.push_back(*n);
    return out;
  }

  double bytes_of(const NetItem& it) const {
    const auto& box = c_.overlaps[it.tensor].destinations[it.dest].pieces[it.piece].box;
    return moved(it.tensor, box);
  }

  void add_network_item(const NetItem& item, std::int32_t tx_set, std::int32_t rx_set) {
    const auto& tx = nic_sets_.get(tx_set);
    const auto& rx = nic_sets_.get(rx_set);
    const double bytes = bytes_of(item);
    if (tx.size() == 1) balance_.tx_fixed[static_cast<std::size_t>(tx[0])] += bytes;
    if (rx.size() == 1) balance_.rx_fixed[static_cast<std::size_t>(rx[0])] += bytes;
    if (tx.size() == 1 && rx.size() == 1) {  // nothing to choose: commit now
      place(item, tx[0], rx[0], piece_box(item));
      return;
    }
    // A side with one candidate is fixed: classes that differ only there balance together.
    const std::int32_t tx_key = tx.size() == 1 ? -1 : tx_set;
    const std::int32_t rx_key = rx.size() == 1 ? -1 : rx_set;
    const auto key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tx_key)) << 32) |
                     static_cast<std::uint32_t>(rx_key);
    auto [it, inserted] = class_of_.try_emplace(key, class_items_.size());
    if (inserted) {
      balance_.classes.push_back(FlowClass{.tx = tx_key < 0 ? std::vector<std::int32_t>{} : tx,
                                           .rx = rx_key < 0 ? std::vector<std::int32_t>{} : rx,
                                           .bytes = 0.0});
      class_items_.emplace_back();
    }
    balance_.classes[it->second].bytes += bytes;
    class_items_[it->second].push_back(ClassItem{.item = item, .only_tx = tx[0], .only_rx = rx[0]});
  }

  const Box& piece_box(const NetItem& it) const {
    return c_.overlaps[it.tensor].destinations[it.dest].pieces[it.piece].box;
  }

  // Walks the class's items against its tx and rx shares, cutting items where a share ends. No cut
  // is finer than min_split_, nor than an eighth of the class's mean share: where every share is
  // smaller than min_split_ (a small model on slow NICs), passing each share's bytes on to the
  // next would land the whole class on its last NIC. Nor is one finer than a NIC moves in a
  // message's latency, which the message it adds would cost.
  void place_class(std::size_t k, const ClassShares& shares) {
    const auto ways = static_cast<double>(std::max({shares.tx.size(), shares.rx.size(), std::size_t{1}}));
    const double split =
        std::min(min_split_, std::max(balance_.classes[k].bytes / (8 * ways), latency_bytes_));
    ShareCursor tx(shares.tx, split), rx(shares.rx, split);
    for (const auto& [item, only_tx, only_rx] : class_items_[k]) {
      const auto elem = dtype_size(c_.problem.tensors()[item.tensor].tensor.dtype);
      const double per_byte = moved(item.tensor, 1.0);
      const Box& piece = piece_box(item);
      Box rest = piece;
      for (bool first = true;; first = false) {
        tx.skip_spent();
        rx.skip_spent();
        const double take = std::min(tx.left(), rx.left());
        const double whole = moved(item.tensor, rest);
        auto cut = take >= whole - split || take < split
                       ? std::nullopt
                       : split_rows(rest, Bytes{static_cast<std::int64_t>(take / per_byte)}, elem);
        const Box& head = cut ? cut->first : first ? piece : rest;
        const double bytes = moved(item.tensor, head);
        place(item, tx.nic(only_tx), rx.nic(only_rx), head);
        tx.consume(bytes);
        rx.consume(bytes);
        if (!cut) break;
        rest = std::move(cut->second);
      }
    }
  }

  static Rank least_loaded(const std::vector<Rank>& ranks, std::int32_t nic, const PlacedCluster& c,
                           const std::vector<std::int64_t>& load) {
    Rank best{-1};
    for (Rank r : ranks)
      if (c.nic_of(r) == nic && (best.value < 0 || load[static_cast<std::size_t>(r.value)] <
                                                       load[static_cast<std::size_t>(best.value)]))
        best = r;
    return best;
  }

  void place(const NetItem& item, std::int32_t tx_nic, std::int32_t rx_nic, const Box& box) {
    const auto& piece = c_.overlaps[item.tensor].destinations[item.dest].pieces[item.piece];
    const auto& group = groups_[item.tensor][item.dest][item.group];
    const Rank sender = least_loaded(c_.overlaps[item.tensor].holders(piece), tx_nic, c_.cluster, sent_);
    const Rank landing = least_loaded(group.replicas, rx_nic, c_.cluster, received_);
    const auto bytes = std::llround(moved(item.tensor, box));
    sent_[static_cast<std::size_t>(sender.value)] += bytes;
    received_[static_cast<std::size_t>(landing.value)] += bytes;
    const Box* kept = &box == &piece.box ? &piece.box : &split_boxes_.emplace_back(box);
    assignments_.push_back(Assignment{.item = item, .sender = sender, .landing = landing, .box = kept});
    assignment_bytes_.push_back(bytes);
  }

  RelayCuts relay_cuts() const {
    RelayCuts out{.element_size = {},
                  .min_split = min_split_,
                  .touches = [this](std::uint32_t t, Rank r, const Box& box) { return touches(t, r, box); }};
    for (const auto& t : c_.problem.tensors()) out.element_size.push_back(dtype_size(t.tensor.dtype));
    return out;
  }

  // Whether rank r holds (as a source) or needs (as a destination) part of `box` of tensor t.
  bool touches(std::uint32_t t, Rank r, const Box& box) const {
    const auto& o = c_.overlaps[t];
    const auto meets = [&](const Shard& s) {
      return std::ranges::find(s.holders, r) != s.holders.end() && overlap(s.box, box);
    };
    return std::ranges::any_of(o.sources, meets) ||
           std::ranges::any_of(o.destinations, [&](const DestinationShard& d) { return meets(d.shard); });
  }

  // Forwarding depth: 0 for a piece straight from a source, 1 + its feeder's otherwise.
  std::vector<std::uint32_t> depths() const {
    std::vector<std::uint32_t> depth(assignments_.size(), 0);
    for (std::size_t i = 0; i < assignments_.size(); ++i) {
      std::uint32_t d = 0;
      for (auto j = assignments_[i].relay_from; j >= 0;
           j = assignments_[static_cast<std::size_t>(j)].relay_from)
        ++d;
      depth[i] = d;
    }
    return depth;
  }

  // Plan order: the network messages depth by depth (phase = depth), then every NVLink fan-out
  // in one phase after them. A pair's stream stops at a relay whose data has not landed, and the
  // builder orders a phase's relays of a pair by when their data lands: relays of forwarded
  // messages that land early must not wait behind relays of a shallower depth landing last.
  // Boxes that other domains forward travel in a message of their own (key 1), created first so
  // that it leads its (sender, landing) pair's stream: pairs send in plan order, and a relay
  // cannot finish before the message it forwards from, so the forwarded bytes must not wait
  // behind the rest of what the pair carries.
  void emit() {
    std::vector<Handle> handle(assignments_.size());
    std::vector<bool> feeds(assignments_.size(), false);
    for (const auto& a : assignments_)
      if (a.relay_from >= 0) feeds[static_cast<std::size_t>(a.relay_from)] = true;
    const auto depth = depths();
    const auto max_depth = depth.empty() ? 0 : *std::ranges::max_element(depth);
    for (std::uint32_t level = 0; level <= max_depth; ++level)
      for (const bool feeding : {true, false})
        for (std::size_t i = 0; i < assignments_.size(); ++i)
          if (depth[i] == level && feeds[i] == feeding)
            handle[i] = emit_one(i, level, max_depth + 1, feeding, handle);
  }

  Handle emit_one(std::size_t i, std::uint32_t level, std::uint32_t fan_out, bool feeding,
                  const std::vector<Handle>& handle) {
    const auto& a = assignments_[i];
    const bool forwarded = a.relay_from >= 0;
    const auto feeder = static_cast<std::size_t>(a.relay_from);
    const auto from = forwarded ? handle[feeder] : kFromSourceShard;
    const Rank sender = forwarded ? assignments_[feeder].landing : a.sender;
    // Forwarded messages are keyed by their feeder; the others by whether they feed relays.
    const std::uint64_t key = forwarded ? static_cast<std::uint64_t>(from) + 2 : feeding ? 1 : 0;
    const Handle h = b_.add(level, key, sender, a.landing, a.item.tensor, *a.box, from);
    if (a.hop) return h;
    for (Rank r : groups_[a.item.tensor][a.item.dest][a.item.group].replicas)
      if (r != a.landing)
        b_.add(fan_out, static_cast<std::uint64_t>(h), a.landing, r, a.item.tensor, *a.box, h);
    return h;
  }

  const PlanContext& c_;
  PlanBuilder b_;
  DomainGroups groups_;
  std::vector<double> moved_per_byte_;
  double min_split_;
  double latency_bytes_;
  InsideDomainSends inside_;
  NicSets nic_sets_;
  BalanceProblem balance_;
  std::unordered_map<std::uint64_t, std::size_t> class_of_;
  // An item of a balance class, with its NIC on each side that has only one candidate.
  struct ClassItem {
    NetItem item;
    std::int32_t only_tx;
    std::int32_t only_rx;
  };
  std::vector<std::vector<ClassItem>> class_items_;
  std::vector<Assignment> assignments_;
  std::deque<Box> split_boxes_;                 // row blocks of split pieces; a deque keeps their addresses
  std::vector<std::int64_t> assignment_bytes_;  // moved bytes, as every load below
  std::vector<std::int64_t> sent_;              // per rank, to spread ranks sharing a NIC
  std::vector<std::int64_t> received_;
  bool across_senders_ = false;
};

}  // namespace

Result<Plan> plan_refit_whole(const PlanContext& c) { return RefitPlanner(c, group_by_domain(c)).run(); }

Result<Plan> plan_refit(const PlanContext& c) {
  auto groups = group_by_domain(c);
  if (auto copies = copies_of_first_part(c, groups)) {
    std::vector<std::uint64_t> rounds;
    // A part that cannot be planned is planned whole, so that the error names what the whole
    // plan's would; so is one whose senders cannot send all it needs in time, since the other
    // parts' domains then pass on part of it.
    RefitPlanner planner(c, std::move(copies->first));
    if (auto part = planner.run(&rounds); part && !planner.forwarded_across_senders())
      return expand_copies(std::move(*part), rounds, copies->shifts);
  }
  return RefitPlanner(c, std::move(groups)).run();
}

}  // namespace refit::planner_detail
