#include <algorithm>

#include "refit/planner/plan_stats.h"

namespace refit {
namespace {

Bytes max_of(const std::vector<Bytes>& v) { return v.empty() ? Bytes{0} : *std::ranges::max_element(v); }

double mean_of_busy(const std::vector<Bytes>& v) {
  double sum = 0;
  std::int64_t busy = 0;
  for (auto b : v)
    if (b.value > 0) {
      sum += static_cast<double>(b.value);
      ++busy;
    }
  return busy ? sum / static_cast<double>(busy) : 0.0;
}

// Quantized before the engines: at the senders, or once at the landing ranks.
bool quantized_in_flight(const std::optional<Quantization>& q) {
  return q && (q->site == QuantSite::kSender || q->made_at_landing());
}

// A segment's bytes had the plan moved its tensor as the source holds it, unquantized.
Bytes unquantized_bytes(const Plan& plan, const Segment& segment) {
  const auto& q = plan.tensors[segment.tensor].quantization;
  if (!quantized_in_flight(q)) return plan.segment_bytes(segment);
  return q->is_scales() ? Bytes{0} : Bytes{segment.box.volume() * dtype_size(q->from)};
}

bool quantizes_at_senders(const Plan& plan) {
  return std::ranges::any_of(plan.tensors,
                             [](const TensorSpec& t) { return quantized_in_flight(t.quantization); });
}

void count_network(PlanStats& s, const Plan& plan, bool quantized, const Transfer& t,
                   const PlacedCluster& c) {
  s.network_bytes += t.bytes;
  if (!quantized) {
    s.network_bytes_unquantized += t.bytes;
  } else {
    for (const auto& segment : t.segments) s.network_bytes_unquantized += unquantized_bytes(plan, segment);
  }
  if (auto n = c.nic_of(t.sender)) s.nic_tx[static_cast<std::size_t>(*n)] += t.bytes;
  if (auto n = c.nic_of(t.receiver)) s.nic_rx[static_cast<std::size_t>(*n)] += t.bytes;
  s.domain_ingress[static_cast<std::size_t>(c.domain_of(t.receiver))] += t.bytes;
}

}  // namespace

PlanStats compute_stats(const Plan& plan, const PlacedCluster& c) {
  PlanStats s;
  s.nic_tx.assign(c.cluster().nics().size(), Bytes{0});
  s.nic_rx.assign(c.cluster().nics().size(), Bytes{0});
  s.nvlink_egress.assign(c.cluster().gpus().size(), Bytes{0});
  s.nvlink_ingress.assign(c.cluster().gpus().size(), Bytes{0});
  s.domain_ingress.assign(c.cluster().domains().size(), Bytes{0});
  const bool quantized = quantizes_at_senders(plan);
  for (const auto& t : plan.transfers) {
    ++s.transfers;
    s.segments += static_cast<std::int64_t>(t.segments.size());
    s.total_bytes += t.bytes;
    switch (t.link) {
      case LinkKind::kNetwork:
        count_network(s, plan, quantized, t, c);
        break;
      case LinkKind::kNvlink:
        s.nvlink_bytes += t.bytes;
        s.nvlink_egress[static_cast<std::size_t>(c.gpu_of(t.sender).value)] += t.bytes;
        s.nvlink_ingress[static_cast<std::size_t>(c.gpu_of(t.receiver).value)] += t.bytes;
        break;
      case LinkKind::kLocal:
        s.local_bytes += t.bytes;
        break;
    }
  }
  s.max_nic_tx = max_of(s.nic_tx);
  s.max_nic_rx = max_of(s.nic_rx);
  s.mean_nic_tx_bytes = mean_of_busy(s.nic_tx);
  s.mean_nic_rx_bytes = mean_of_busy(s.nic_rx);
  return s;
}

}  // namespace refit
