#include "refit/simulator/nccl_cost_model.h"

#include <algorithm>

namespace refit {
namespace {

// tuning.cc's log2i: the floor of the base-2 logarithm.
std::int32_t log2_floor(std::int32_t n) {
  std::int32_t l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

}  // namespace

Seconds broadcast_latency(const NcclLatencies& l, RingShape s) {
  return l.base + (s.domains > 1 ? l.network_hop : l.nvlink_hop);
}

Seconds all_gather_latency(const NcclLatencies& l, RingShape s) {
  const std::int32_t steps = s.ranks - 1;
  const std::int32_t inter = s.domains - 1;
  const Seconds intra = s.domains > 1 ? std::max(l.nvlink_ring_step, l.network_overhead) : l.nvlink_ring_step;
  return l.base + intra * (steps - inter) + l.network_hop * inter;
}

Seconds barrier_latency(const NcclLatencies& l, RingShape s) {
  const std::int32_t per_domain = s.ranks / std::max(1, s.domains);
  return l.base_ll_tree +
         (l.nvlink_ll_tree * (per_domain - 1) + l.network_ll_tree * log2_floor(s.domains)) * 2;
}

}  // namespace refit
