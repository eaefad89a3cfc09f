#include "refit/core/quantized_problem.h"

#include <algorithm>
#include <map>
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

// Whoever holds the weight in fp8 holds its scales: the senders after quantizing, or the training
// ranks all along.
bool scales_travel(QuantSite s) { return s != QuantSite::kReceiver; }

// A landing weight's source layout is its landing ranks: inference ranks each holding the box
// they hold in the inference layout, where a rank quantizes what it holds.
[[nodiscard]] Result<void> check_landing_layout(const TensorReshard& t) {
  const Layout& landing = t.source;
  for (std::int64_t p = 0; p < landing.mesh().size(); ++p) {
    const Rank r = landing.mesh().rank_at(p);
    const auto mine = t.destination.local_box(r);
    if (!mine || *mine != landing.box_at_position(p))
      return mismatch(
          fmt::format("landing rank {} holds {} of the weight, which is not its box in the inference layout",
                      r.value, landing.box_at_position(p).to_string()));
  }
  return {};
}

[[nodiscard]] Result<void> check_weight(const TensorReshard& t) {
  const auto& q = *t.tensor.quantization;
  const bool trained = q.site == QuantSite::kTraining;
  if (trained ? q.from != quant_value_dtype(q.scheme) : !is_float(q.from))
    return invalid(fmt::format("quantizes from {}, not {}", dtype_name(q.from),
                               trained ? dtype_name(quant_value_dtype(q.scheme)) : "a floating dtype"));
  const DType moves = scales_travel(q.site) ? quant_value_dtype(q.scheme) : q.from;
  if (t.tensor.dtype != moves)
    return mismatch(fmt::format("is quantized at the {} but its dtype is {}, not {}", quant_site_name(q.site),
                                dtype_name(t.tensor.dtype), dtype_name(moves)));
  REFIT_TRY_IN(quant_scale_layout(q.scheme, t.destination), "the inference layout");
  if (q.site == QuantSite::kLanding) return check_landing_layout(t);
  if (scales_travel(q.site))
    REFIT_TRY_IN(quant_scale_layout(q.scheme, t.source),
                 fmt::format("the training layout (quantized at the {})", quant_site_name(q.site)));
  return {};
}

// A landing copy carries its weight, as the training ranks hold it, to the weight's landing ranks.
[[nodiscard]] Result<void> check_landing_copy(const TensorReshard& t, const TensorReshard* weight) {
  const auto& q = *t.tensor.quantization;
  const auto* wq = weight != nullptr && weight->tensor.quantization ? &*weight->tensor.quantization : nullptr;
  if (wq == nullptr || !wq->made_at_landing() || wq->is_scales())
    return not_found(fmt::format("landing_of names '{}', which is no weight quantized at its landing ranks",
                                 q.landing_of));
  if (wq->scheme != q.scheme || wq->from != q.from || q.site != QuantSite::kLanding || q.is_scales())
    return mismatch(
        fmt::format("the scheme, site or source dtype differs from its weight '{}'", q.landing_of));
  if (t.tensor.dtype != q.from || t.tensor.shape != weight->tensor.shape)
    return mismatch(fmt::format("a landing copy of '{}' has its shape and moves its source dtype {}",
                                q.landing_of, dtype_name(q.from)));
  if (!same_boxes(t.destination, weight->source))
    return mismatch(fmt::format("its inference layout is not the landing layout of '{}'", q.landing_of));
  return {};
}

[[nodiscard]] Result<void> check_scales(const TensorReshard& t, const TensorReshard* weight) {
  const auto& q = *t.tensor.quantization;
  if (weight == nullptr || !weight->tensor.quantization || weight->tensor.quantization->is_scales())
    return not_found(
        fmt::format("scales_of names '{}', which is no quantized weight of the problem", q.scales_of));
  const auto& wq = *weight->tensor.quantization;
  if (wq.scheme != q.scheme || wq.site != q.site || !scales_travel(q.site) || wq.from != q.from ||
      wq.is_landing_copy())
    return mismatch(
        fmt::format("the scheme, site or source dtype differs from its weight '{}' (scales travel only "
                    "when quantized at the sender or in training)",
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
  return fmt::format("{}{}", weight, quant_scale_suffix(s));
}

Result<void> check_quantized(const std::vector<TensorReshard>& tensors) {
  std::unordered_map<std::string_view, const TensorReshard*> by_name;
  for (const auto& t : tensors) by_name.emplace(t.tensor.name, &t);
  const auto named = [&](const std::string& name) {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  std::unordered_map<std::string_view, int> scales_per_weight, copies_per_weight;
  for (const auto& t : tensors) {
    if (!t.tensor.quantization) continue;
    const auto& q = *t.tensor.quantization;
    const auto where = fmt::format("tensor '{}'", t.tensor.name);
    if (t.tensor.shape.size() < 2) return invalid(where + ": only weights of 2 or more dims are quantized");
    if (q.is_scales() && q.is_landing_copy())
      return invalid(where + ": a tensor is a weight's scales or its landing copy, not both");
    if (q.is_landing_copy()) {
      REFIT_TRY_IN(check_landing_copy(t, named(q.landing_of)), where);
      ++copies_per_weight[q.landing_of];
    } else if (q.is_scales()) {
      REFIT_TRY_IN(check_scales(t, named(q.scales_of)), where);
      ++scales_per_weight[q.scales_of];
    } else {
      REFIT_TRY_IN(check_weight(t), where);
    }
  }
  for (const auto& t : tensors) {
    const auto& q = t.tensor.quantization;
    if (!q || q->is_scales() || q->is_landing_copy() || !scales_travel(q->site)) continue;
    if (const int n = scales_per_weight[t.tensor.name]; n != 1)
      return invalid(fmt::format("tensor '{}': a weight quantized at the {} needs one scales tensor, has {}",
                                 t.tensor.name, quant_site_name(q->site), n));
    if (const int n = copies_per_weight[t.tensor.name]; q->site == QuantSite::kLanding && n != 1)
      return invalid(
          fmt::format("tensor '{}': a weight quantized at its landing ranks needs one landing "
                      "copy, has {}",
                      t.tensor.name, n));
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

// The weight `t` and its scales, both with quantization `q`, the weight moving `dtype`.
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

// Bytes landed so far on each replica, per replica count: each weight lands on the least loaded
// replica, so that the landing work, and the fp8 sent on from there, spread over the replicas.
using LandingLoad = std::map<std::int64_t, std::vector<std::int64_t>>;

Layout least_loaded_replica(const TensorReshard& t, LandingLoad& load) {
  auto& bytes = load[landing_replicas(t.destination)];
  bytes.resize(static_cast<std::size_t>(landing_replicas(t.destination)), 0);
  const auto replica = std::ranges::min_element(bytes) - bytes.begin();
  bytes[static_cast<std::size_t>(replica)] += t.tensor.bytes().value;
  return landing_layout(t.destination, replica);
}

// Weight `t` quantized once at its landing ranks: its values and scales, which the landing ranks
// hold once they have quantized, and its landing copy, which brings them the weight.
void add_landing(const TensorReshard& t, Quantization q, Layout scales, LandingLoad& load,
                 std::vector<TensorReshard>& out) {
  Layout landing = least_loaded_replica(t, load);
  auto landing_scales = quant_scale_layout(q.scheme, landing);  // the inference layout's, so whole blocks
  Quantization copy = q;
  copy.landing_of = t.tensor.name;
  TensorReshard carried{.tensor = TensorSpec{.name = landing_copy_name(t.tensor.name),
                                             .shape = t.tensor.shape,
                                             .dtype = t.tensor.dtype,
                                             .quantization = std::move(copy)},
                        .source = t.source,
                        .destination = landing};
  TensorReshard weight = t;
  weight.source = std::move(landing);
  add_with_scales(weight, q, quant_value_dtype(q.scheme), std::move(*landing_scales), std::move(scales), out);
  out.push_back(std::move(carried));
}

// A bf16 (or other floating) weight made a quantized weight, at the sender where the training
// layout holds whole blocks, else at its landing ranks (kLanding) or at the receiver.
[[nodiscard]] Result<void> add_quantized(const TensorReshard& t, const QuantizeOptions& options,
                                         LandingLoad& load, std::vector<TensorReshard>& out) {
  auto destination = REFIT_TRY(inference_scales(t, options.scheme));
  auto source = quant_scale_layout(options.scheme, t.source);
  const bool senders_may = options.site == QuantSite::kSender || options.site == QuantSite::kLanding;
  const bool at_sender = senders_may && source.has_value();
  const QuantSite otherwise =
      options.site == QuantSite::kLanding ? QuantSite::kLanding : QuantSite::kReceiver;
  const Quantization q{
      .scheme = options.scheme, .site = at_sender ? QuantSite::kSender : otherwise, .from = t.tensor.dtype};
  if (q.site == QuantSite::kLanding) {
    add_landing(t, q, std::move(destination), load, out);
    return {};
  }
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
  LandingLoad load;
  for (const auto& t : problem.tensors()) {
    const bool weight = !t.tensor.quantization && t.tensor.shape.size() >= 2 && select(t.tensor);
    const bool trained = t.tensor.dtype == quant_value_dtype(options.scheme) ||
                         (options.site == QuantSite::kTraining && is_float(t.tensor.dtype));
    if (weight && trained) {
      REFIT_TRY(add_trained(t, options.scheme, out));
    } else if (weight && is_float(t.tensor.dtype)) {
      REFIT_TRY(add_quantized(t, options, load, out));
    } else {
      out.push_back(t);
    }
  }
  return ReshardProblem::make(std::move(out), problem.source_ranks(), problem.destination_ranks());
}

}  // namespace refit
