#include "inside_domain.h"

#include <algorithm>
#include <cmath>

#include "refit/core/index.h"

namespace refit::planner_detail {

InsideDomainSends::InsideDomainSends(const PlanContext& c, PlanBuilder& b, Moved moved)
    : c_(c),
      b_(b),
      moved_(std::move(moved)),
      load_s_(c.cluster.cluster().gpus().size(), 0.0),
      in_s_(load_s_.size(), 0.0) {}

InsideDomainSends::Split InsideDomainSends::split(std::uint32_t t, const Piece& piece,
                                                  const DomainGroup& group) const {
  Split s;
  for (Rank h : c_.overlaps[t].holders(piece))
    if (c_.cluster.domain_of(h) == group.domain) s.near.push_back(h);
  if (s.near.empty()) return s;
  for (const Rank r : group.replicas) {
    const auto local =
        std::ranges::find_if(s.near, [&](Rank h) { return c_.cluster.gpu_of(h) == c_.cluster.gpu_of(r); });
    if (local != s.near.end())
      s.local.emplace_back(*local, r);
    else
      s.apart.push_back(r);
  }
  return s;
}

double InsideDomainSends::seconds(Rank r, double bytes) const {
  const auto bandwidth = c_.cluster.cluster().gpus()[at(c_.cluster.gpu_of(r).value)].nvlink_bandwidth.value;
  return bytes / std::max(bandwidth, 1.0);
}

double& InsideDomainSends::load(Rank r) { return load_s_[at(c_.cluster.gpu_of(r).value)]; }
double InsideDomainSends::load(Rank r) const { return load_s_[at(c_.cluster.gpu_of(r).value)]; }

std::size_t InsideDomainSends::wanted_slabs(std::uint32_t t, const Box& box, std::size_t replicas) const {
  const auto bytes = box.volume() * dtype_size(c_.problem.tensors()[t].tensor.dtype);
  return std::min(replicas, static_cast<std::size_t>(static_cast<double>(bytes) / kMinSplitBytes));
}

bool InsideDomainSends::scatters(std::uint32_t t, const Box& box, const Split& s) const {
  return s.apart.size() > s.near.size() && wanted_slabs(t, box, s.apart.size()) >= 2;
}

void InsideDomainSends::expect(std::uint32_t t, const Box& box, const Split& s, double sign) {
  const double bytes = sign * moved_(t, box);
  const auto near = static_cast<double>(s.near.size());
  const auto apart = static_cast<double>(s.apart.size());
  if (!scatters(t, box, s)) {
    for (const Rank h : s.near) load(h) += seconds(h, bytes * apart / near);
    return;
  }
  for (const Rank h : s.near) load(h) += seconds(h, bytes / near);
  for (const Rank r : s.apart) load(r) += seconds(r, bytes * (apart - 1) / apart);
}

void InsideDomainSends::reserve(std::uint32_t t, const Piece& piece, const DomainGroup& group) {
  const auto s = split(t, piece, group);
  if (s.apart.empty()) return;
  expect(t, piece.box, s, 1.0);
  const double bytes = moved_(t, piece.box);
  for (const Rank r : s.apart) {
    double& in = in_s_[at(c_.cluster.gpu_of(r).value)];
    in += seconds(r, bytes);
    floor_s_ = std::max(floor_s_, in);
  }
}

std::size_t InsideDomainSends::least_loaded(const std::vector<Rank>& ranks, double bytes,
                                            std::size_t relays_from) const {
  // A relay adds a hop: a message's latency, and a chunk stored before it goes on. Pieces from one
  // holder to one relay travel in one message, so the chunk is the plan's whole chunk, not this
  // piece: a relay pays off only where a GPU's sending takes longer than a chunk does.
  const auto hop = [&](std::size_t i) {
    return i < relays_from ? 0.0
                           : c_.cluster.cluster().nvlink_latency().value +
                                 seconds(ranks[i], static_cast<double>(c_.options.chunk.value));
  };
  const auto cost = [&](std::size_t i) {
    return std::max(load(ranks[i]) + seconds(ranks[i], bytes), floor_s_) + hop(i);
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < ranks.size(); ++i)
    if (cost(i) < cost(best)) best = i;
  return best;
}

bool InsideDomainSends::holders_done_by_floor(std::uint32_t t, const Box& box, const Split& s) const {
  const double each =
      moved_(t, box) * static_cast<double>(s.apart.size()) / static_cast<double>(s.near.size());
  return std::ranges::all_of(s.near, [&](Rank h) { return load(h) + seconds(h, each) <= floor_s_; });
}

bool InsideDomainSends::send(std::uint32_t t, const Piece& piece, const DomainGroup& group) {
  auto s = split(t, piece, group);
  if (s.near.empty()) return false;
  for (const auto& [holder, replica] : s.local) b_.add(0, 0, holder, replica, t, piece.box);
  if (s.apart.empty()) return true;
  expect(t, piece.box, s, -1.0);
  auto slabs = scatters(t, piece.box, s) && !holders_done_by_floor(t, piece.box, s)
                   ? slabs_of(t, piece.box, s.apart.size())
                   : std::vector<Box>{};
  if (slabs.size() <= 1)
    send_whole(t, piece.box, std::move(s));
  else
    scatter(t, std::move(slabs), s);
  return true;
}

void InsideDomainSends::send_whole(std::uint32_t t, const Box& box, Split s) {
  const double bytes = moved_(t, box);
  std::ranges::stable_sort(s.apart, [&](Rank a, Rank b) { return load(a) < load(b); });
  // Senders: the holders, then each replica a holder sent the piece to, with that message.
  std::vector<Rank> senders = s.near;
  std::vector<Handle> brought(s.near.size(), kFromSourceShard);
  for (const Rank r : s.apart) {
    const auto k = least_loaded(senders, bytes, s.near.size());
    const Rank from = senders[k];
    load(from) += seconds(from, bytes);
    if (brought[k] != kFromSourceShard) {
      b_.add(1, static_cast<std::uint64_t>(brought[k]), from, r, t, box, brought[k]);
      continue;
    }
    senders.push_back(r);
    brought.push_back(b_.add(0, 0, from, r, t, box));
  }
}

// The slabs a replica passes on travel in a message of their own (key 1), which the builder puts
// before the rest of what the holder sends that replica: the replica can pass them on while the
// rest lands, instead of after.
void InsideDomainSends::scatter(std::uint32_t t, std::vector<Box> slabs, const Split& s) {
  const std::size_t first = scatter_turn_ % s.apart.size();
  scatter_turn_ += slabs.size();
  for (std::size_t i = 0; i < slabs.size(); ++i) {
    const double bytes = moved_(t, slabs[i]);
    const Rank landing = s.apart[(first + i) % s.apart.size()];
    const Rank from = s.near[least_loaded(s.near, bytes, s.near.size())];
    load(from) += seconds(from, bytes);
    load(landing) += seconds(landing, bytes * static_cast<double>(s.apart.size() - 1));
    const Handle landed = b_.add(0, 1, from, landing, t, slabs[i]);
    for (const Rank r : s.apart)
      if (r != landing) b_.add(1, static_cast<std::uint64_t>(landed), landing, r, t, slabs[i], landed);
  }
}

// `box` of tensor t in row slabs of about equal bytes, one per replica, none under
// kMinSplitBytes (fewer slabs, or the box whole, when it is too small or has too few rows).
std::vector<Box> InsideDomainSends::slabs_of(std::uint32_t t, const Box& box, std::size_t replicas) const {
  const auto element = dtype_size(c_.problem.tensors()[t].tensor.dtype);
  const auto bytes = [&](const Box& b) { return static_cast<double>(b.volume() * element); };
  std::vector<Box> out;
  Box rest = box;
  for (std::size_t left = wanted_slabs(t, box, replicas); left > 1; --left) {
    auto cut = split_rows(rest, Bytes{std::llround(bytes(rest) / static_cast<double>(left))}, element);
    if (!cut) break;
    out.push_back(std::move(cut->first));
    rest = std::move(cut->second);
  }
  out.push_back(std::move(rest));
  return out;
}

}  // namespace refit::planner_detail
