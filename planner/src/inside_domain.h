#pragma once
// Pieces that some holder already has inside a destination's NVLink domain move over NVLink
// only (step 1 of the refit strategy). A replica on a holder's GPU copies the piece there; the
// others are sent to by whichever GPU's NVLink port is least loaded, counted in seconds at that
// GPU's bandwidth:
//  - while the replicas that need the piece are no more than its holders in the domain, each gets
//    it whole, from a holder or from a replica a holder already sent it to (one hop, no chains),
//    the least loaded replicas served first so that they can pass it on;
//  - where the replicas outnumber its holders, it is scattered in row slabs, one to each replica,
//    which passes its slab on to the others, unless the holders can send it whole in time (below).
// Loads start at what every GPU would send if no replica passed a whole piece on (each piece's
// holders sharing its replicas, or scattering it), so that a GPU that will be busy sending its own
// pieces later is not picked to pass on an earlier one. This matters where training and inference share GPUs:
// when a pipeline stage's holders also send their own stage to the others, the replicas on the
// GPUs that hold nothing pass the pieces on instead.
// No sending ends before the busiest GPU has received what it must (every replica receives each
// piece however it is sent), so sending is counted from that floor: a holder that is done by then
// sends on, and a relay or a scatter, whose hop is a cost with nothing to gain, is not taken.
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "plan_builder.h"
#include "refit_pieces.h"

namespace refit::planner_detail {

class InsideDomainSends {
 public:
  // `moved(t, box)`: the bytes `box` of tensor t moves (dense, or a delta refit's payload).
  using Moved = std::function<double(std::uint32_t, const Box&)>;
  InsideDomainSends(const PlanContext& c, PlanBuilder& b, Moved moved);

  // Counts what the piece would load each port with (expect()). Called for every piece before any
  // is sent.
  void reserve(std::uint32_t t, const Piece& piece, const DomainGroup& group);
  // Sends the piece to the group's replicas when a holder is in their domain; false when none is
  // (the piece crosses the network).
  bool send(std::uint32_t t, const Piece& piece, const DomainGroup& group);

 private:
  struct Split {
    std::vector<Rank> near;                    // the piece's holders in the domain
    std::vector<std::pair<Rank, Rank>> local;  // (holder, replica) on one GPU: copied there
    std::vector<Rank> apart;                   // the replicas on none of their GPUs
  };
  Split split(std::uint32_t t, const Piece& piece, const DomainGroup& group) const;
  // Row slabs a box would be cut into for `replicas`: one each, none under kMinSplitBytes.
  std::size_t wanted_slabs(std::uint32_t t, const Box& box, std::size_t replicas) const;
  // Whether the piece would be scattered in slabs rather than sent whole to each replica (what
  // reserve() counts on).
  bool scatters(std::uint32_t t, const Box& box, const Split& s) const;
  // Whether its holders, sending it whole to every replica, would still be done by floor_s_: then
  // it is not scattered, since the replicas' hops would gain nothing.
  bool holders_done_by_floor(std::uint32_t t, const Box& box, const Split& s) const;
  // Adds (sign 1) or takes back (sign -1) what the piece would load each port with if its holders
  // sent it whole in turn, or scattered it, with no replica passing a whole piece on.
  void expect(std::uint32_t t, const Box& box, const Split& s, double sign);
  void send_whole(std::uint32_t t, const Box& box, Split s);
  void scatter(std::uint32_t t, std::vector<Box> slabs, const Split& s);
  // Of `ranks`, the one whose port is left least loaded by `bytes` more (the first on a tie), those
  // from `relays_from` on charged the hop they add.
  std::size_t least_loaded(const std::vector<Rank>& ranks, double bytes, std::size_t relays_from) const;
  double seconds(Rank r, double bytes) const;
  double& load(Rank r);
  double load(Rank r) const;
  std::vector<Box> slabs_of(std::uint32_t t, const Box& box, std::size_t replicas) const;

  const PlanContext& c_;
  PlanBuilder& b_;
  Moved moved_;
  std::vector<double> load_s_;    // per GPU: NVLink send seconds taken, plus holders' reserved
  std::vector<double> in_s_;      // per GPU: NVLink receive seconds of the reserved pieces
  double floor_s_ = 0;            // the largest of in_s_
  std::size_t scatter_turn_ = 0;  // where the next scattered piece's first slab lands (mod replicas)
};

}  // namespace refit::planner_detail
