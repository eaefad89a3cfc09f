#include "balance_parts.h"

#include <algorithm>

#include "refit/core/disjoint_sets.h"
#include "refit/core/index.h"

namespace refit::planner_detail {
namespace {

// Class indices by part, parts in order of their first class.
std::vector<std::vector<std::size_t>> parts_of(const BalanceProblem& p) {
  DisjointSets sets(p.classes.size());
  // Per NIC side, the first class that names it: later ones join it.
  std::vector<std::size_t> tx_owner(p.tx_bandwidth.size(), p.classes.size()), rx_owner = tx_owner;
  auto join = [&](std::vector<std::size_t>& owner, std::int32_t nic, std::size_t c) {
    auto& o = owner[at(nic)];
    if (o == p.classes.size())
      o = c;
    else
      sets.join(c, o);
  };
  for (std::size_t c = 0; c < p.classes.size(); ++c) {
    for (const auto n : p.classes[c].tx) join(tx_owner, n, c);
    for (const auto n : p.classes[c].rx) join(rx_owner, n, c);
  }
  std::vector<std::size_t> part_of_root(p.classes.size(), p.classes.size());
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t c = 0; c < p.classes.size(); ++c) {
    auto& part = part_of_root[sets.find(c)];
    if (part == p.classes.size()) {
      part = out.size();
      out.emplace_back();
    }
    out[part].push_back(c);
  }
  return out;
}

// One part as a problem of its own: its NICs renumbered in order of first appearance (`nics`
// maps new numbers to old).
BalanceProblem sub_problem(const BalanceProblem& p, const std::vector<std::size_t>& classes,
                           std::vector<std::int32_t>& nics) {
  std::vector<std::int32_t> number(p.tx_bandwidth.size(), -1);
  BalanceProblem out;
  auto renumber = [&](std::int32_t n) {
    auto& k = number[at(n)];
    if (k < 0) {
      k = static_cast<std::int32_t>(nics.size());
      nics.push_back(n);
      out.tx_bandwidth.push_back(p.tx_bandwidth[at(n)]);
      out.rx_bandwidth.push_back(p.rx_bandwidth[at(n)]);
      out.tx_fixed.push_back(p.tx_fixed[at(n)]);
      out.rx_fixed.push_back(p.rx_fixed[at(n)]);
    }
    return k;
  };
  for (const auto c : classes) {
    auto& cl = out.classes.emplace_back(p.classes[c]);
    for (auto& n : cl.tx) n = renumber(n);
    for (auto& n : cl.rx) n = renumber(n);
  }
  return out;
}

}  // namespace

BalanceResult balance_nic_load_by_parts(const BalanceProblem& p) {
  BalanceResult out;
  out.shares.resize(p.classes.size());
  for (std::size_t n = 0; n < p.tx_fixed.size(); ++n)  // NICs with fixed load only count too
    out.makespan_s =
        std::max({out.makespan_s, p.tx_fixed[n] / p.tx_bandwidth[n], p.rx_fixed[n] / p.rx_bandwidth[n]});
  for (const auto& classes : parts_of(p)) {
    std::vector<std::int32_t> nics;
    const auto part = balance_nic_load(sub_problem(p, classes, nics));
    out.makespan_s = std::max(out.makespan_s, part.makespan_s);
    for (std::size_t k = 0; k < classes.size(); ++k) {
      auto& shares = out.shares[classes[k]] = part.shares[k];
      for (auto& [nic, bytes] : shares.tx) nic = nics[at(nic)];
      for (auto& [nic, bytes] : shares.rx) nic = nics[at(nic)];
    }
  }
  return out;
}

}  // namespace refit::planner_detail
