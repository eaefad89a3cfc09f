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

// Whoever holds the weight in fp8 holds its scales: the senders after quantising, or the training
// ranks all along.
bool scales_travel(QuantSite s) { return s != QuantSite::kReceiver; }

[[nodiscard]] Result<void> check_weight(const TensorReshard& t) {
  const auto& q = *t.tensor.quantization;
  const bool trained = q.site == QuantSite::kTraining;
  if (trained ? q.from != quant_value_dtype(q.scheme) : !is_float(q.from))
    return invalid(fmt::format("quantises from {}, not {}", dtype_name(q.from),
                               trained ? dtype_name(quant_value_dtype(q.scheme)) : "a floating dtype"));
  const DType moves = scales_travel(q.site) ? quant_value_dtype(q.scheme) : q.from;
  if (t.tensor.dtype != moves)
    return mismatch(fmt::format("is quantised at the {} but its dtype is {}, not {}", quant_site_name(q.site),
                                dtype_name(t.tensor.dtype), dtype_name(moves)));
  REFIT_TRY_IN(quant_scale_layout(q.scheme, t.destination), "the inference layout");
  if (scales_travel(q.site))
    REFIT_TRY_IN(quant_scale_layout(q.scheme, t.source),
                 fmt::format("the training layout (quantised at the {})", quant_site_name(q.site)));
  return {};
}

[[nodiscard]] Result<void> check_scales(const TensorReshard& t, const TensorReshard* weight) {
  const auto& q = *t.tensor.quantization;
  if (weight == nullptr || !weight->tensor.quantization || weight->tensor.quantization->is_scales())
    return not_found(
        fmt::format("scales_of names '{}', which is no quantised weight of the problem", q.scales_of));
  const auto& wq = *weight->tensor.quantization;
  if (wq.scheme != q.scheme || wq.site != q.site || !scales_travel(q.site) || wq.from != q.from)
    return mismatch(
        fmt::format("the scheme, site or source dtype differs from its weight '{}' (scales travel only "
                    "when quantised at the sender or in training)",
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
    if (!q || q->is_scales() || !scales_travel(q->site)) continue;
    if (const int n = scales_per_weight[t.tensor.name]; n != 1)
      return invalid(fmt::format("tensor '{}': a weight quantised at the {} needs one scales tensor, has {}",
                                 t.tensor.name, quant_site_name(q->site), n));
  }
  return {};
}

namespace {

std::string where_of(const TensorReshard& t, QuantScheme s) {
  return fmt::format("tensor '{}' ({})", t.tensor.name, quant_scheme_name(s));
}

[[nodiscard]] Result<Layout> inference_scales(const TensorReshard& t, QuantScheme s) {
  return REFIT_TRY_IN(quant_scale_layout(s, t.destination),
                      where_of(t, s) +
                          ": the inference layout (an FP8 engine needs whole blocks on every rank; "
                          "vLLM refuses it too)");
}

// The scales tensor of weight `t`, its layouts following the weight's.
TensorReshard scales_of(const TensorReshard& t, QuantScheme s, Layout source, Layout destination,
                        Quantization quantization) {
  return TensorReshard{.tensor = TensorSpec{.name = quant_scale_name(s, t.tensor.name),
                                            .shape = quant_scale_shape(s, t.tensor.shape),
                                            .dtype = quant_scale_dtype(s),
                                            .quantization = std::move(quantization)},
                       .source = std::move(source),
                       .destination = std::move(destination)};
}

// The weight `t` and its scales, both with quantisation `q`, the weight moving `dtype`.
void add_with_scales(const TensorReshard& t, const Quantization& q, DType dtype, Layout source,
                     Layout destination, std::vector<TensorReshard>& out) {
  TensorReshard weight = t;
  weight.tensor.dtype = dtype;
  weight.tensor.quantization = q;
  Quantization scales = q;
  scales.scales_of = t.tensor.name;
  out.push_back(std::move(weight));
  out.push_back(scales_of(t, q.scheme, std::move(source), std::move(destination), std::move(scales)));
}

// A bf16 (or other floating) weight made a quantised weight, at the sender where the training
// layout holds whole blocks, else at the receiver.
[[nodiscard]] Result<void> add_quantized(const TensorReshard& t, const QuantizeOptions& options,
                                         std::vector<TensorReshard>& out) {
  auto destination = REFIT_TRY(inference_scales(t, options.scheme));
  auto source = quant_scale_layout(options.scheme, t.source);
  const bool at_sender = options.site == QuantSite::kSender && source.has_value();
  const Quantization q{.scheme = options.scheme,
                       .site = at_sender ? QuantSite::kSender : QuantSite::kReceiver,
                       .from = t.tensor.dtype};
  if (!at_sender) {
    TensorReshard weight = t;
    weight.tensor.quantization = q;
    out.push_back(std::move(weight));
    return {};
  }
  add_with_scales(t, q, quant_value_dtype(options.scheme), std::move(*source), std::move(destination), out);
  return {};
}

// A weight the training side holds in fp8 (FP8 training, block-scaled as the engine wants it,
// whether the checkpoint says fp8 or --quantize-at training says so of a bf16 one): it moves as
// it is, and so do the scales its training ranks hold beside it.
[[nodiscard]] Result<void> add_trained(const TensorReshard& t, QuantScheme s,
                                       std::vector<TensorReshard>& out) {
  auto destination = REFIT_TRY(inference_scales(t, s));
  auto source =
      REFIT_TRY_IN(quant_scale_layout(s, t.source),
                   where_of(t, s) + ": the training layout (fp8 weights are trained in whole blocks)");
  const DType fp8 = quant_value_dtype(s);
  add_with_scales(t, Quantization{.scheme = s, .site = QuantSite::kTraining, .from = fp8}, fp8,
                  std::move(source), std::move(destination), out);
  return {};
}

}  // namespace

Result<ReshardProblem> quantize_problem(const ReshardProblem& problem, const QuantizeOptions& options,
                                        const std::function<bool(const TensorSpec&)>& select) {
  std::vector<TensorReshard> out;
  out.reserve(problem.tensors().size());
  for (const auto& t : problem.tensors()) {
    const bool weight = !t.tensor.quantization && t.tensor.shape.size() >= 2 && select(t.tensor);
    const bool trained = t.tensor.dtype == quant_value_dtype(options.scheme) ||
                         (options.site == QuantSite::kTraining && is_float(t.tensor.dtype));
    if (weight && trained) {
      REFIT_TRY(add_trained(t, options.scheme, out));
    } else if (weight && is_float(t.tensor.dtype)) {
      REFIT_TRY(add_quantized(t, options, out));
    } else {
      out.push_back(t);
    }
  }
  return ReshardProblem::make(std::move(out), problem.source_ranks(), problem.destination_ranks());
}

}  // namespace refit
