#include "refit/core/quantized_problem.h"

#include <unordered_map>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {
namespace {

bool is_float(DType t) { return t == DType::kBF16 || t == DType::kFP16 || t == DType::kFP32; }

// Both layouts give every rank the same box.
bool same_boxes(const Layout& a, const Layout& b) {
  if (a.mesh().ranks() != b.mesh().ranks()) return false;
  for (std::int64_t p = 0; p < a.mesh().size(); ++p)
    if (a.box_at_position(p) != b.box_at_position(p)) return false;
  return true;
}

[[nodiscard]] Result<void> check_weight(const TensorReshard& t) {
  const auto& q = *t.tensor.quantization;
  if (!is_float(q.from))
    return invalid(fmt::format("quantises from {}, not a floating dtype", dtype_name(q.from)));
  const DType moves = q.site == QuantSite::kSender ? quant_value_dtype(q.scheme) : q.from;
  if (t.tensor.dtype != moves)
    return mismatch(fmt::format("is quantised at the {} but its dtype is {}, not {}", quant_site_name(q.site),
                                dtype_name(t.tensor.dtype), dtype_name(moves)));
  REFIT_TRY_IN(quant_scale_layout(q.scheme, t.destination), "the inference layout");
  if (q.site == QuantSite::kSender)
    REFIT_TRY_IN(quant_scale_layout(q.scheme, t.source), "the training layout (quantised at the sender)");
  return {};
}

[[nodiscard]] Result<void> check_scales(const TensorReshard& t, const TensorReshard* weight) {
  const auto& q = *t.tensor.quantization;
  if (weight == nullptr || !weight->tensor.quantization || weight->tensor.quantization->is_scales())
    return not_found(
        fmt::format("scales_of names '{}', which is no quantised weight of the problem", q.scales_of));
  const auto& wq = *weight->tensor.quantization;
  if (wq.scheme != q.scheme || wq.site != QuantSite::kSender || q.site != QuantSite::kSender ||
      wq.from != q.from)
    return mismatch(
        fmt::format("the scheme, site or source dtype differs from its weight '{}' (scales travel only "
                    "when quantised at the sender)",
                    q.scales_of));
  if (t.tensor.dtype != quant_scale_dtype(q.scheme))
    return mismatch(fmt::format("scales of {} are {}, not {}", quant_scheme_name(q.scheme),
                                dtype_name(quant_scale_dtype(q.scheme)), dtype_name(t.tensor.dtype)));
  if (t.tensor.shape != quant_scale_shape(q.scheme, weight->tensor.shape))
    return mismatch(
        fmt::format("shape {} is not the block grid {} of '{}'", Box::whole(t.tensor.shape).to_string(),
                    Box::whole(quant_scale_shape(q.scheme, weight->tensor.shape)).to_string(), q.scales_of));
  const auto src = REFIT_TRY(quant_scale_layout(q.scheme, weight->source));
  const auto dst = REFIT_TRY(quant_scale_layout(q.scheme, weight->destination));
  if (!same_boxes(src, t.source) || !same_boxes(dst, t.destination))
    return mismatch(fmt::format("its layouts do not follow the blocks of '{}' rank by rank", q.scales_of));
  return {};
}

}  // namespace

std::string quant_scale_name(QuantScheme s, std::string_view weight) {
  return fmt::format("{}{}", weight, s == QuantScheme::kFp8Block128 ? "_scale_inv" : "_scale");
}

Result<void> check_quantized(const std::vector<TensorReshard>& tensors) {
  std::unordered_map<std::string_view, const TensorReshard*> by_name;
  for (const auto& t : tensors) by_name.emplace(t.tensor.name, &t);
  std::unordered_map<std::string_view, int> scales_per_weight;
  for (const auto& t : tensors) {
    if (!t.tensor.quantization) continue;
    const auto where = fmt::format("tensor '{}'", t.tensor.name);
    if (t.tensor.shape.size() < 2) return invalid(where + ": only weights of 2 or more dims are quantised");
    if (!t.tensor.quantization->is_scales()) {
      REFIT_TRY_IN(check_weight(t), where);
      continue;
    }
    const auto it = by_name.find(t.tensor.quantization->scales_of);
    REFIT_TRY_IN(check_scales(t, it == by_name.end() ? nullptr : it->second), where);
    ++scales_per_weight[t.tensor.quantization->scales_of];
  }
  for (const auto& t : tensors) {
    const auto& q = t.tensor.quantization;
    if (!q || q->is_scales() || q->site != QuantSite::kSender) continue;
    if (const int n = scales_per_weight[t.tensor.name]; n != 1)
      return invalid(fmt::format(
          "tensor '{}': a weight quantised at the sender needs one scales tensor, has {}", t.tensor.name, n));
  }
  return {};
}

Result<ReshardProblem> quantize_problem(const ReshardProblem& problem, const QuantizeOptions& options,
                                        const std::function<bool(const TensorSpec&)>& select) {
  std::vector<TensorReshard> out;
  out.reserve(problem.tensors().size());
  for (const auto& t : problem.tensors()) {
    if (t.tensor.quantization || t.tensor.shape.size() < 2 || !is_float(t.tensor.dtype) ||
        !select(t.tensor)) {
      out.push_back(t);
      continue;
    }
    const auto where = fmt::format("tensor '{}' ({})", t.tensor.name, quant_scheme_name(options.scheme));
    const auto dst_scales = REFIT_TRY_IN(quant_scale_layout(options.scheme, t.destination),
                                         where +
                                             ": the inference layout (an FP8 engine needs whole blocks on "
                                             "every rank; vLLM refuses it too)");
    const auto src_scales = quant_scale_layout(options.scheme, t.source);
    const bool at_sender = options.site == QuantSite::kSender && src_scales.has_value();
    const Quantization q{.scheme = options.scheme,
                         .site = at_sender ? QuantSite::kSender : QuantSite::kReceiver,
                         .from = t.tensor.dtype};
    TensorReshard weight = t;
    weight.tensor.quantization = q;
    if (!at_sender) {
      out.push_back(std::move(weight));
      continue;
    }
    weight.tensor.dtype = quant_value_dtype(options.scheme);
    Quantization sq = q;
    sq.scales_of = t.tensor.name;
    TensorReshard scales{.tensor = TensorSpec{.name = quant_scale_name(options.scheme, t.tensor.name),
                                              .shape = quant_scale_shape(options.scheme, t.tensor.shape),
                                              .dtype = quant_scale_dtype(options.scheme),
                                              .quantization = std::move(sq)},
                         .source = *src_scales,
                         .destination = dst_scales};
    out.push_back(std::move(weight));
    out.push_back(std::move(scales));
  }
  return ReshardProblem::make(std::move(out), problem.source_ranks(), problem.destination_ranks());
}

}  // namespace refit
