#pragma once
// Fractional optimum of the sender/landing choice: byte classes that may leave through any NIC of
// a tx set and enter through any NIC of an rx set are spread so that the most loaded NIC (time =
// bytes / bandwidth, tx and rx alike) is as light as possible. A binary search on that time T asks
// a max-flow (Boost.Graph push-relabel) whether every class fits:
//   source -> tx NIC (cap T*bw - fixed) -> class_in -(cap bytes)-> class_out -> rx NIC (cap T*bw - fixed) ->
//   sink
// (a class with no tx choice hangs off the source directly, one with no rx choice off the sink)
// T is feasible iff the max flow saturates every class.
#include <cstdint>
#include <utility>
#include <vector>

namespace refit::planner_detail {

// A side with one candidate is no choice: the caller counts those bytes in the NIC's fixed load
// and leaves the side empty, so classes differing only there merge into one.
struct FlowClass {
  std::vector<std::int32_t> tx;  // candidate NICs, sorted, distinct; empty: not chosen here
  std::vector<std::int32_t> rx;
  double bytes = 0;
};

struct BalanceProblem {
  std::vector<double> tx_bandwidth;  // per NIC, bytes per second
  std::vector<double> rx_bandwidth;
  std::vector<double> tx_fixed;  // bytes already committed per NIC
  std::vector<double> rx_fixed;
  std::vector<FlowClass> classes;
};

struct ClassShares {
  std::vector<std::pair<std::int32_t, double>> tx;  // (NIC, bytes), NICs with a share only
  std::vector<std::pair<std::int32_t, double>> rx;
};

struct BalanceResult {
  double makespan_s = 0;  // the smallest feasible most-loaded-NIC time found
  std::vector<ClassShares> shares;
};

// Relative precision of the binary search on the makespan.
inline constexpr double kBalanceTolerance = 1e-3;

BalanceResult balance_nic_load(const BalanceProblem& problem);

}  // namespace refit::planner_detail
