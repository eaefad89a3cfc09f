#include "refit_forwarding.h"

#include <algorithm>
#include <unordered_map>

namespace refit::planner_detail {
namespace {

struct PieceKey {
  std::uint32_t tensor, dest, piece;
  bool operator==(const PieceKey&) const = default;
};
struct PieceKeyHash {
  std::size_t operator()(const PieceKey& k) const noexcept {
    return (static_cast<std::size_t>(k.tensor) * 0x9e3779b97f4a7c15ull) ^
           (static_cast<std::size_t>(k.dest) * 0xbf58476d1ce4e5b9ull) ^ k.piece;
  }
};

PieceKey key_of(const Assignment& a) { return {a.item.tensor, a.item.dest, a.item.piece}; }

class Forwarder {
 public:
  Forwarder(std::vector<Assignment>& a, const Cluster& c, const std::vector<std::int64_t>& bytes)
      : a_(a), c_(c), bytes_(bytes), tx_(c.nics().size()), rx_(c.nics().size()), feeds_(a.size(), false) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      tx_[nic(a[i].sender)] += static_cast<double>(bytes[i]);
      rx_[nic(a[i].landing)] += static_cast<double>(bytes[i]);
    }
    for (std::size_t n = 0; n < rx_.size(); ++n) target_ = std::max(target_, rx_[n] / bw(n));
  }

  void run() {
    // Only pieces sent by an overloaded NIC can gain; group their assignments by piece.
    std::unordered_map<PieceKey, std::vector<std::size_t>, PieceKeyHash> groups;
    for (std::size_t i = 0; i < a_.size(); ++i)
      if (over(nic(a_[i].sender), 0)) groups[key_of(a_[i])];
    for (std::size_t i = 0; i < a_.size(); ++i)
      if (auto it = groups.find(key_of(a_[i])); it != groups.end()) it->second.push_back(i);
    std::vector<std::vector<std::size_t>> ordered;
    for (auto& [key, members] : groups) ordered.push_back(std::move(members));
    std::ranges::sort(ordered);  // member indices are unique: a deterministic order
    for (const auto& members : ordered) relieve(members);
  }

 private:
  std::size_t nic(Rank r) const { return static_cast<std::size_t>(*c_.nic_of(r)); }
  double bw(std::size_t n) const { return c_.nics()[n].bandwidth.value; }
  bool over(std::size_t n, double extra) const { return (tx_[n] + extra) / bw(n) > target_; }

  // Moves members whose sender is overloaded onto the landing NIC of a sibling that carries the
  // same box, preferring siblings that will not themselves be moved (already forwarded, or sent
  // by a NIC with room), then the least loaded. A moved member may feed later ones: chains.
  void relieve(const std::vector<std::size_t>& members) {
    for (const auto k : members) {
      auto& moved = a_[k];
      if (feeds_[k] || !over(nic(moved.sender), 0)) continue;
      const auto b = static_cast<double>(bytes_[k]);
      auto rank = [&](std::size_t j) {
        const bool may_move = a_[j].relay_from < 0 && over(nic(a_[j].sender), 0) && !feeds_[j];
        return std::pair(may_move, tx_[nic(a_[j].landing)]);
      };
      std::size_t best = a_.size();
      for (const auto j : members)
        if (j != k && *a_[j].box == *moved.box && !over(nic(a_[j].landing), b) &&
            (best == a_.size() || rank(j) < rank(best)))
          best = j;
      if (best == a_.size()) continue;
      tx_[nic(moved.sender)] -= b;
      tx_[nic(a_[best].landing)] += b;
      moved.relay_from = static_cast<std::int32_t>(best);
      feeds_[best] = true;
    }
  }

  std::vector<Assignment>& a_;
  const Cluster& c_;
  const std::vector<std::int64_t>& bytes_;
  std::vector<double> tx_, rx_;
  std::vector<bool> feeds_;
  double target_ = 0;
};

}  // namespace

void forward_between_domains(std::vector<Assignment>& a, const Cluster& c, const std::vector<std::int64_t>& bytes) {
  Forwarder(a, c, bytes).run();
}

}  // namespace refit::planner_detail
