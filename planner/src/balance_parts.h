#pragma once
// The NIC balance (nic_balance.h) solved part by part: classes that share no candidate NIC,
// directly or through other classes, cannot move each other's load, so each part is balanced
// alone, with its NICs numbered in order of first appearance. The optimum is the same (the most
// loaded NIC of the whole is the most loaded of some part); parts that are the same up to that
// numbering, as source replicas that each serve their own engines are, get the same shares, and
// the plans of such parts stay alike (the simulator then simulates them once). Each search is
// also on a graph of one part's size.
#include "nic_balance.h"

namespace refit::planner_detail {

BalanceResult balance_nic_load_by_parts(const BalanceProblem& problem);

}  // namespace refit::planner_detail
