#include "refit/facade/problem_source.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "refit/core/quantized_problem.h"
#include "refit/core/try.h"
#include "refit/models/builtin_models.h"
#include "refit/models/expert_placement.h"
#include "refit/models/fp8_weights.h"
#include "refit/models/hf_config.h"
#include "refit/models/manifest.h"
#include "refit/models/problem_builder.h"
#include "refit/models/storage_check.h"
#include "refit/planner/membership.h"

namespace refit {

Result<models::ModelSpec> load_model(const std::string& name_or_path, const ModelOptions& options) {
  models::HfOptions hf;
  hf.per_expert = options.per_expert;
  hf.include_mtp = options.mtp;
  if (!options.dtype.empty()) hf.dtype = REFIT_TRY_IN(parse_dtype(options.dtype), "--dtype");
  // A name the system cannot even look up (too long, a loop of links) is taken as a path, whose
  // reading then says why.
  std::error_code unknown;
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json") ||
                       std::filesystem::exists(name_or_path, unknown) || unknown;
  return is_path ? models::load_hf_config(name_or_path, hf) : models::builtin_model(name_or_path, hf);
}

Result<ParallelLayouts> parse_layouts(const std::string& train, const std::string& infer) {
  if (train.empty()) return invalid("--train: missing (Megatron sizes, e.g. \"tp=4,pp=8,ep=16\")");
  if (infer.empty()) return invalid("--infer: missing (vLLM sizes, e.g. \"tp=8,engines=16\")");
  const auto megatron = REFIT_TRY_IN(models::parse_megatron(train), "--train");
  const auto vllm = REFIT_TRY_IN(models::parse_vllm(infer), "--infer");
  return ParallelLayouts{.train = megatron, .infer = vllm};
}

namespace {

// An elastic refit's engines come from --infer, which a manifest has none of.
Result<void> check_not_manifest(const ProblemSource& source) {
  if (source.manifest.empty()) return {};
  return unsupported(
      "--manifest: a manifest names no inference engines; an elastic refit needs --model, --train and "
      "--infer");
}

}  // namespace

Result<std::int32_t> inference_engines(const ProblemSource& source) {
  REFIT_TRY(check_not_manifest(source));
  if (source.infer.empty())
    return invalid(
        "--infer: an elastic refit needs --infer with engines=N: without it nothing says which "
        "destination ranks form an engine");
  const auto layouts = REFIT_TRY(parse_layouts(source.train, source.infer));
  return static_cast<std::int32_t>(layouts.infer.engines);
}

Result<EngineMembership> engine_membership(const ProblemSource& source, const ReshardProblem& problem,
                                           std::uint64_t epoch) {
  REFIT_TRY(check_not_manifest(source));
  REFIT_TRY_IN(check_no_landing(problem, "the repair of an engine that missed the step"), "--quantize-at");
  const auto layouts = REFIT_TRY(parse_layouts(source.train, source.infer));
  return consecutive_engines(static_cast<std::int32_t>(layouts.train.world()),
                             static_cast<std::int32_t>(layouts.infer.world()),
                             static_cast<std::int32_t>(layouts.infer.engine_size()), epoch);
}

Result<ReshardProblem> apply_quantization(const ReshardProblem& problem, const ModelOptions& options,
                                          std::string_view layouts) {
  // The site is read even without --quantize: a misspelt one is a mistake, not a default.
  const auto site = REFIT_TRY_IN(parse_quant_site(options.quantize_at), "--quantize-at");
  if (options.quantize.empty()) return problem;
  if (const auto done = std::ranges::find_if(
          problem.tensors(), [](const TensorReshard& t) { return t.tensor.quantization.has_value(); });
      done != problem.tensors().end())
    return invalid(
        fmt::format("--quantize: '{}' is quantized already ({} at the {}); the problem's weights are "
                    "as it gives them: drop --quantize and --quantize-at",
                    done->tensor.name, quant_scheme_name(done->tensor.quantization->scheme),
                    quant_site_name(done->tensor.quantization->site)));
  const QuantizeOptions q{.scheme = REFIT_TRY_IN(parse_quant_scheme(options.quantize), "--quantize"),
                          .site = site};
  auto quantized = REFIT_TRY_IN(
      quantize_problem(problem, q, [](const TensorSpec& t) { return models::fp8_engine_quantizes(t.name); }),
      layouts.empty() ? std::string("--quantize") : fmt::format("--quantize with {}", layouts));
  if (std::ranges::none_of(quantized.tensors(),
                           [](const TensorReshard& t) { return t.tensor.quantization.has_value(); }))
    return invalid(
        "--quantize: no weight is quantized: FP8 engines quantize the linear and expert weights (named as "
        "Hugging Face names them) when they are bf16, fp16 or fp32 (or already fp8)");
  return quantized;
}

namespace {

// The model and the two layouts a model source names, the inference placement resolved as vLLM
// resolves it (what it will load is what refit must lay out).
struct ModelLayouts {
  models::ModelSpec model;
  ParallelLayouts layouts;
  // A requested placement vLLM would not keep; what the config says that --quantize would act on.
  std::vector<std::string> notes;
};

[[nodiscard]] Result<ModelLayouts> model_layouts(const ProblemSource& source) {
  auto model = REFIT_TRY_IN(load_model(source.model, source.model_options), "--model");
  auto layouts = REFIT_TRY(parse_layouts(source.train, source.infer));
  auto resolved = models::resolve_expert_placement(model, layouts.infer);
  layouts.infer = resolved.infer;
  std::vector<std::string> notes;
  if (resolved.note) notes.push_back(std::move(*resolved.note));
  if (source.model_options.quantize.empty())
    notes.insert(notes.end(), model.notes.begin(), model.notes.end());
  return ModelLayouts{.model = std::move(model), .layouts = layouts, .notes = std::move(notes)};
}

}  // namespace

Result<ResolvedLayouts> resolve_layouts(const ProblemSource& source) {
  auto found = REFIT_TRY(model_layouts(source));
  return ResolvedLayouts{.layouts = found.layouts, .notes = std::move(found.notes)};
}

Result<ReshardProblem> load_problem(const ProblemSource& options) {
  if (!options.manifest.empty()) {
    if (!options.model.empty() || !options.train.empty() || !options.infer.empty())
      return invalid("--manifest: give either --manifest or --model with --train and --infer");
    const auto& m = options.model_options;
    if (!m.dtype.empty() || m.per_expert || m.mtp)
      return invalid(
          "--manifest: its tensors are as it gives them; --dtype, --per-expert and --mtp shape a "
          "--model's tensors");
    const auto problem = REFIT_TRY_IN(models::load_manifest(options.manifest), "--manifest");
    return apply_quantization(problem, options.model_options);
  }
  if (options.model.empty())
    return invalid(
        "--model: missing (a built-in name or a config.json, with --train and "
        "--infer; or --manifest FILE)");
  const auto [model, layouts, notes] = REFIT_TRY(model_layouts(options));
  const auto problem = REFIT_TRY(models::build_problem(model, layouts.train, layouts.infer));
  return apply_quantization(problem, options.model_options,
                            fmt::format("--train {} --infer {}", options.train, options.infer));
}

namespace {

// The manifest's map of one side over `problem`, which --quantize may have made from the manifest's
// problem by adding tensors: its regions follow their tensors by name, then it is checked again.
[[nodiscard]] Result<models::StorageMap> manifest_storage(const ProblemSource& source,
                                                          const ReshardProblem& problem, bool training) {
  auto manifest = REFIT_TRY_IN(models::load_manifest_with_storage(source.manifest), "--manifest");
  if (!manifest.storage)
    return invalid(
        fmt::format("--manifest: {} has no storage maps (write a version 2 manifest with refit models "
                    "MODEL --train .. --infer .. --storage --write-manifest)",
                    source.manifest));
  auto side = std::move(training ? manifest.storage->source : manifest.storage->destination);
  std::unordered_map<std::string_view, std::uint32_t> index;
  for (std::uint32_t t = 0; t < problem.tensors().size(); ++t)
    index.emplace(problem.tensors()[t].tensor.name, t);
  for (auto& rank : side.ranks)
    for (auto& region : rank.regions) {
      const auto found = index.find(manifest.problem.tensors()[region.tensor].tensor.name);
      if (found == index.end())
        return fail(ErrorCode::kInternal, "--quantize dropped a tensor of the manifest from the problem");
      region.tensor = found->second;
    }
  const auto where =
      fmt::format("--manifest {}: storage.{}", source.manifest, training ? "source" : "destination");
  if (problem.tensors().size() == manifest.problem.tensors().size()) return side;  // checked as read
  REFIT_TRY_IN(models::check_storage(side, problem, training, where),
               fmt::format("--quantize {}: the manifest's storage maps hold its tensors as written (no fp8 "
                           "weights, no scales); write the manifest with the same --quantize (refit models "
                           "MODEL --train .. --infer .. --quantize {} --storage --write-manifest)",
                           source.model_options.quantize, source.model_options.quantize));
  return side;
}

}  // namespace

Result<models::StorageMap> load_storage(const ProblemSource& source, const ReshardProblem& problem,
                                        bool training) {
  // vLLM's MXFP8 (Mxfp8Config) quantizes online only: its parameters load bf16 and
  // process_weights_after_loading makes fp8 weights with e8m0 scales, swizzled for FlashInfer's
  // GEMM; it has no parameters an MXFP8 checkpoint loads into, so only --quantize-at receiver fits
  // (and the MXFP8 parameters of Megatron's training, whose scales are swizzled, have no rule).
  if (std::ranges::any_of(problem.tensors(), [](const TensorReshard& t) {
        const auto& q = t.tensor.quantization;
        return q && q->scheme == QuantScheme::kMxfp8 && q->site != QuantSite::kReceiver;
      }))
    return unsupported(
        "--quantize mxfp8: vLLM keeps no MXFP8 parameters to load into (it quantizes bf16 weights itself "
        "after loading them); from bf16 training use --quantize-at receiver");
  // A landing copy lands in a bf16 buffer no engine parameter is (the engine keeps fp8 and scales).
  if (const auto copy = std::ranges::find_if(problem.tensors(),
                                             [](const TensorReshard& t) {
                                               return t.tensor.quantization &&
                                                      t.tensor.quantization->is_landing_copy();
                                             });
      copy != problem.tensors().end())
    return unsupported(fmt::format(
        "'{}' is quantized at its landing ranks, and its bf16 landing copy has no place among the "
        "frameworks' "
        "parameters (vLLM keeps fp8 values and scales); use --quantize-at sender (such weights then quantize "
        "at the receiver) or receiver",
        copy->tensor.quantization->landing_of));
  if (!source.manifest.empty()) return manifest_storage(source, problem, training);
  const auto [model, layouts, notes] = REFIT_TRY(model_layouts(source));
  return training ? models::megatron_storage(model, layouts.train, problem)
                  : models::vllm_storage(model, layouts.infer, problem);
}

}  // namespace refit
