#include "quantize_work.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/topology/measured_kernels.h"

namespace refit::sim {
namespace {

// The weight a tensor a sender or receiver quantizes belongs to (itself, or the weight its scales
// scale), or -1: weights trained in fp8 are nobody's work, and the plan's quantize steps are the
// landing ranks' (plan_model.cc charges them as steps).
std::vector<std::int32_t> weight_of_each(const Plan& plan) {
  auto out = quantization_partners(plan.tensors);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto& q = plan.tensors[i].quantization;
    if (q && !q->is_scales() && (q->site == QuantSite::kSender || q->site == QuantSite::kReceiver))
      out[i] = static_cast<std::int32_t>(i);
  }
  return out;
}

Bytes box_bytes(const Layout& layout, Rank r, DType dtype) {
  const auto box = layout.local_box(r);
  return box ? Bytes{box->volume() * dtype_size(dtype)} : Bytes{0};
}

// Each sender's boxes, in the order it quantizes them.
std::vector<std::vector<QuantizeBytes>> sender_boxes(const lowering::SenderQuantizeOrder& order,
                                                     const ReshardProblem& problem) {
  std::vector<std::vector<QuantizeBytes>> out(order.weights.size());
  for (std::size_t r = 0; r < out.size(); ++r)
    for (const std::uint32_t weight : order.weights[r]) {
      const auto& q = *problem.tensors()[weight].tensor.quantization;
      out[r].push_back(QuantizeBytes{
          .source = box_bytes(problem.tensors()[weight].source, Rank{static_cast<std::int32_t>(r)}, q.from),
          .scheme = q.scheme});
    }
  return out;
}

}  // namespace

QuantizeWork quantize_work(const Plan& plan, const ReshardProblem& problem,
                           lowering::SenderQuantizeOrder order) {
  QuantizeWork w{.sender_order = std::move(order),
                 .sender_boxes = {},
                 .receiver_bytes = std::vector<BytesPerScheme>(at(plan.world_size())),
                 .before_receiver = std::vector<bool>(plan.transfers.size())};
  w.sender_boxes = sender_boxes(w.sender_order, problem);
  const auto weight = weight_of_each(plan);
  if (std::ranges::all_of(weight, [](std::int32_t x) { return x < 0; })) return w;
  std::set<std::pair<std::int32_t, std::int32_t>> counted;  // (rank, weight), receiver side
  for (const auto& t : plan.transfers) {
    for (const auto& s : t.segments) {
      const std::int32_t i = weight[s.tensor];
      if (i < 0) continue;
      const auto& spec = problem.tensors()[at(i)];
      if (spec.tensor.quantization->site != QuantSite::kSender && !problem.is_source(t.receiver)) {
        const Bytes mine = box_bytes(spec.destination, t.receiver, spec.tensor.quantization->from);
        if (mine.value == 0) continue;
        w.before_receiver[at(t.id)] = true;
        if (counted.emplace(t.receiver.value, i).second)
          of_scheme(w.receiver_bytes[at(t.receiver.value)], spec.tensor.quantization->scheme) += mine;
      }
    }
  }
  return w;
}

std::string quantize_rate_assumption() {
  const MeasuredKernels& m = reference_kernels();
  const auto per_copied = [&](QuantScheme s) { return of_scheme(m.quantize, s).value / m.copy.value; };
  return fmt::format(
      "FP8 quantization on a device without a measured rate (quantize_gbps) is charged from its copy rate "
      "at the ratio of refit's GPU kernels: they read {:.2f} (fp8-block128) and {:.2f} (mxfp8) bf16 bytes "
      "per byte the copy kernel copies, as measured on the {} ({}, tests/gpu/run.sh)",
      per_copied(QuantScheme::kFp8Block128), per_copied(QuantScheme::kMxfp8), m.gpu, m.date);
}

bool quantize_rate_assumed(const Cluster& cluster, const ReshardProblem& problem) {
  PerScheme<bool> used{};
  for (const auto& t : problem.tensors())
    if (t.tensor.quantization) of_scheme(used, t.tensor.quantization->scheme) = true;
  return std::ranges::any_of(cluster.gpus(), [&](const GpuSpec& g) {
    return std::ranges::any_of(all_quant_schemes(), [&](QuantScheme s) {
      return of_scheme(used, s) && of_scheme(g.quantize_bandwidth, s).value == 0;
    });
  });
}

Seconds quantize_time(Bytes source_bytes, QuantScheme scheme, const GpuSpec& gpu) {
  const auto measured = of_scheme(gpu.quantize_bandwidth, scheme);
  return transfer_time(source_bytes,
                       measured.value > 0 ? measured : quantize_from_copy(gpu.copy_bandwidth, scheme));
}

}  // namespace refit::sim
