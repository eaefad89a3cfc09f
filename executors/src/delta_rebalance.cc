#include "delta_rebalance.h"

#include <algorithm>
#include <cmath>

namespace refit::delta_rebalance {
namespace {

double total(std::span<const Bytes> bytes) {
  double sum = 0;
  for (const Bytes b : bytes) sum += static_cast<double>(b.value);
  return sum;
}

// By tensor of the plan: whether some piece of it leaves a rank (not only a landing rank's
// quantize step, which sends nothing).
std::vector<bool> travelling(const Plan& plan) {
  std::vector<bool> out(plan.tensors.size(), false);
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments) out[s.tensor] = out[s.tensor] || !t.quantizes();
  return out;
}

}  // namespace

std::vector<Bytes> dense_bytes(const Plan& plan) {
  const auto travels = travelling(plan);
  std::vector<Bytes> out;
  for (std::size_t t = 0; t < plan.tensors.size(); ++t)
    out.push_back(travels[t] ? plan.tensors[t].bytes() : Bytes{0});
  return out;
}

std::vector<Bytes> measured_moved_bytes(const Plan& plan, std::span<const std::int64_t> payloads,
                                        const std::vector<bool>& dense, std::span<const Bytes> planned) {
  std::vector<double> moved(plan.tensors.size(), 0.0), weighed(plan.tensors.size(), 0.0);
  std::size_t piece = 0;
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments) {
      if (piece < payloads.size() && !dense[piece]) {
        moved[s.tensor] += static_cast<double>(payloads[piece]);
        weighed[s.tensor] += static_cast<double>(plan.segment_bytes(s).value);
      }
      ++piece;
    }
  const auto travels = travelling(plan);
  std::vector<Bytes> out(planned.begin(), planned.end());
  for (std::size_t t = 0; t < out.size(); ++t)
    if (!travels[t])
      out[t] = Bytes{0};
    else if (weighed[t] > 0)
      out[t] =
          Bytes{std::llround(moved[t] / weighed[t] * static_cast<double>(plan.tensors[t].bytes().value))};
  return out;
}

double share_drift(std::span<const Bytes> planned, std::span<const Bytes> measured) {
  const double m = total(measured);
  const double p = total(planned);
  if (m <= 0) return 0.0;
  if (p <= 0) return 1.0;
  double sum = 0;
  for (std::size_t t = 0; t < measured.size() && t < planned.size(); ++t)
    sum += std::fabs(static_cast<double>(measured[t].value) / m - static_cast<double>(planned[t].value) / p);
  return 0.5 * sum;
}

Bytes busiest_sender(const Plan& plan, std::span<const Bytes> moved) {
  std::vector<double> sent(static_cast<std::size_t>(plan.world_size()), 0.0);
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments) {
      if (t.quantizes()) continue;  // a landing rank's quantize step sends nothing
      const auto dense = plan.tensors[s.tensor].bytes().value;
      if (dense > 0)
        sent[static_cast<std::size_t>(t.sender.value)] += static_cast<double>(plan.segment_bytes(s).value) /
                                                          static_cast<double>(dense) *
                                                          static_cast<double>(moved[s.tensor].value);
    }
  double most = 0;
  for (const double b : sent) most = std::max(most, b);
  return Bytes{std::llround(most)};
}

}  // namespace refit::delta_rebalance
