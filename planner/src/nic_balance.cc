#include "nic_balance.h"

#include <algorithm>
#include <cmath>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

namespace refit::planner_detail {
namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using Graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, std::int64_t,
                    boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
using Edge = Traits::edge_descriptor;

// Capacities are integers for push-relabel: bytes in units of kUnit.
constexpr double kUnit = 4096.0;

class FlowNetwork {
 public:
  explicit FlowNetwork(const BalanceProblem& p) : p_(p) {
    const auto nics = p.tx_bandwidth.size();
    const auto classes = p.classes.size();
    graph_ = Graph(2 + 2 * nics + 2 * classes);
    for (std::size_t n = 0; n < nics; ++n) {
      tx_edges_.push_back(add_edge(kSource, tx_node(n), 0));
      rx_edges_.push_back(add_edge(rx_node(n), kSink, 0));
    }
    for (std::size_t c = 0; c < classes; ++c) {
      const auto& cl = p.classes[c];
      const auto units = static_cast<std::int64_t>(std::ceil(cl.bytes / kUnit));
      demand_ += units;
      add_edge(in_node(c), out_node(c), units);
    }
    const std::int64_t inf = demand_ + 1;
    for (std::size_t c = 0; c < classes; ++c) {
      auto& in = class_tx_edges_.emplace_back();
      auto& out = class_rx_edges_.emplace_back();
      for (auto n : p.classes[c].tx)
        in.push_back(add_edge(tx_node(static_cast<std::size_t>(n)), in_node(c), inf));
      for (auto n : p.classes[c].rx)
        out.push_back(add_edge(out_node(c), rx_node(static_cast<std::size_t>(n)), inf));
      if (p.classes[c].tx.empty()) add_edge(kSource, in_node(c), inf);
      if (p.classes[c].rx.empty()) add_edge(out_node(c), kSink, inf);
    }
  }

  // Whether every class fits when no NIC may send longer than `t_tx` seconds or receive longer
  // than `t_rx` seconds.
  bool feasible(double t_tx, double t_rx) {
    auto cap = boost::get(boost::edge_capacity, graph_);
    for (std::size_t n = 0; n < tx_edges_.size(); ++n) {
      const double tx = t_tx * p_.tx_bandwidth[n] - p_.tx_fixed[n];
      const double rx = t_rx * p_.rx_bandwidth[n] - p_.rx_fixed[n];
      if (tx < -kUnit || rx < -kUnit) return false;
      cap[tx_edges_[n]] = static_cast<std::int64_t>(std::max(0.0, tx) / kUnit);
      cap[rx_edges_[n]] = static_cast<std::int64_t>(std::max(0.0, rx) / kUnit);
    }
    return boost::push_relabel_max_flow(graph_, kSource, kSink) >= demand_;
  }

  // Per class, the bytes the last feasible() routed through each NIC.
  std::vector<ClassShares> shares() const {
    auto cap = boost::get(boost::edge_capacity, graph_);
    auto res = boost::get(boost::edge_residual_capacity, graph_);
    std::vector<ClassShares> out(p_.classes.size());
    for (std::size_t c = 0; c < out.size(); ++c) {
      collect(out[c].tx, p_.classes[c].tx, class_tx_edges_[c], cap, res);
      collect(out[c].rx, p_.classes[c].rx, class_rx_edges_[c], cap, res);
    }
    return out;
  }

 private:
  static constexpr std::size_t kSource = 0;
  static constexpr std::size_t kSink = 1;
  std::size_t tx_node(std::size_t n) const { return 2 + n; }
  std::size_t rx_node(std::size_t n) const { return 2 + p_.tx_bandwidth.size() + n; }
  std::size_t in_node(std::size_t c) const { return 2 + 2 * p_.tx_bandwidth.size() + 2 * c; }
  std::size_t out_node(std::size_t c) const { return in_node(c) + 1; }

  Edge add_edge(std::size_t from, std::size_t to, std::int64_t capacity) {
    auto cap = boost::get(boost::edge_capacity, graph_);
    auto rev = boost::get(boost::edge_reverse, graph_);
    const Edge e = boost::add_edge(from, to, graph_).first;
    const Edge r = boost::add_edge(to, from, graph_).first;
    cap[e] = capacity;
    cap[r] = 0;
    rev[e] = r;
    rev[r] = e;
    return e;
  }

  template <class Cap, class Res>
  static void collect(std::vector<std::pair<std::int32_t, double>>& out,
                      const std::vector<std::int32_t>& nics, const std::vector<Edge>& edges, const Cap& cap,
                      const Res& res) {
    for (std::size_t k = 0; k < nics.size(); ++k) {
      const auto flow = cap[edges[k]] - res[edges[k]];
      if (flow > 0) out.emplace_back(nics[k], static_cast<double>(flow) * kUnit);
    }
  }

  const BalanceProblem& p_;
  Graph graph_;
  std::int64_t demand_ = 0;
  std::vector<Edge> tx_edges_, rx_edges_;
  std::vector<std::vector<Edge>> class_tx_edges_, class_rx_edges_;
};

// Every class on its least loaded candidates, whole: feasible, so an upper bound on the optimum.
double greedy_makespan(const BalanceProblem& p) {
  auto tx = p.tx_fixed;
  auto rx = p.rx_fixed;
  auto pick = [](std::vector<double>& load, const std::vector<double>& bw,
                 const std::vector<std::int32_t>& cands, double bytes) {
    if (cands.empty()) return;
    auto best = cands.front();
    for (auto n : cands)
      if ((load[static_cast<std::size_t>(n)] + bytes) / bw[static_cast<std::size_t>(n)] <
          (load[static_cast<std::size_t>(best)] + bytes) / bw[static_cast<std::size_t>(best)])
        best = n;
    load[static_cast<std::size_t>(best)] += bytes;
  };
  for (const auto& c : p.classes) {
    pick(tx, p.tx_bandwidth, c.tx, c.bytes);
    pick(rx, p.rx_bandwidth, c.rx, c.bytes);
  }
  double t = 0;
  for (std::size_t n = 0; n < tx.size(); ++n)
    t = std::max({t, tx[n] / p.tx_bandwidth[n], rx[n] / p.rx_bandwidth[n]});
  return t;
}

double fixed_makespan(const BalanceProblem& p) {
  double t = 0;
  for (std::size_t n = 0; n < p.tx_fixed.size(); ++n)
    t = std::max({t, p.tx_fixed[n] / p.tx_bandwidth[n], p.rx_fixed[n] / p.rx_bandwidth[n]});
  return t;
}

// Smallest t in [lo, hi] (to kBalanceTolerance) with fits(t); fits(hi) must hold.
template <class Fits>
double bisect(double lo, double hi, Fits fits) {
  // Fitting grows with t. From lo = 0, a side that fits in no time at all (a part whose tx side
  // has no choice and no load) would halve hi through the whole range of doubles down to 0,
  // about a thousand max-flows, to end where this one does.
  if (lo == 0 && fits(0.0)) return 0.0;
  while (hi - lo > kBalanceTolerance * hi) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

// Minimises the most loaded NIC first; then, keeping that bound, the most loaded sender, then
// the most loaded receiver, so that a side that does not bind is spread as well.
BalanceResult balance_nic_load(const BalanceProblem& p) {
  BalanceResult result;
  // Nothing to spread (a delta refit whose choosable pieces do not change): every class stays on
  // its first candidates, without searching a makespan that any t > 0 meets.
  if (std::ranges::all_of(p.classes, [](const FlowClass& c) { return c.bytes <= 0; })) {
    result.makespan_s = fixed_makespan(p);
    result.shares.resize(p.classes.size());
    return result;
  }
  FlowNetwork net(p);
  const double lo = fixed_makespan(p);
  // Integer rounding of capacities can make the greedy bound itself just infeasible: widen it.
  double hi = greedy_makespan(p) * (1 + kBalanceTolerance) + 1e-9;
  while (!net.feasible(hi, hi)) hi *= 1.01;
  const double t = bisect(lo, hi, [&](double x) { return net.feasible(x, x); });
  const double t_tx = bisect(0, t, [&](double x) { return net.feasible(x, t); });
  const double t_rx = bisect(0, t, [&](double x) { return net.feasible(t_tx, x); });
  net.feasible(t_tx, t_rx);
  result.makespan_s = t;
  result.shares = net.shares();
  return result;
}

}  // namespace refit::planner_detail
