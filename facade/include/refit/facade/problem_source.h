#pragma once
// Where a reshard problem comes from: a model (a built-in name, or a Hugging Face config.json or
// the directory holding one) with Megatron training sizes and vLLM inference sizes, or a manifest
// of tensors with their two layouts (any framework). The refit command's PROBLEM options and the
// Python package both load problems through this.
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/executors/membership.h"
#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"
#include "refit/models/storage_map.h"

namespace refit {

// How to read a model.
struct ModelOptions {
  std::string dtype;        // overrides the config's torch_dtype when not empty
  bool per_expert = false;  // one tensor per routed expert instead of stacked [E, out, in]
  bool mtp = false;         // include DeepSeek-V3's MTP layer
  // FP8 in flight: the inference engine's quantization (fp8-block128, mxfp8; empty: none) and
  // where it happens (sender: wherever the training layout holds whole blocks; receiver: always;
  // training: the training ranks hold those weights in fp8 with their scales already).
  std::string quantize;
  // landing, sender, receiver or training (--quantize-at).
  std::string quantize_at = "landing";
};

// Where a reshard problem comes from: a model with its two layouts, or a manifest.
struct ProblemSource {
  std::string model;  // built-in name, config.json, or a directory holding one
  std::string train;  // Megatron sizes, e.g. "tp=4,pp=8,ep=16"
  std::string infer;  // vLLM sizes, e.g. "tp=8,dp=16"
  // How to read the model.
  ModelOptions model_options;
  std::string manifest;  // a manifest instead of model + layouts
};

// A built-in name, or a path to an HF config.json (or its directory).
[[nodiscard]] Result<models::ModelSpec> load_model(const std::string& name_or_path,
                                                   const ModelOptions& options);

// The training and inference sizes of a problem from a model, parsed.
struct ParallelLayouts {
  // Megatron-Core's sizes (--train).
  models::MegatronConfig train;
  // vLLM's sizes (--infer).
  models::VllmConfig infer;
};
// Parses the training and inference sizes; errors name the option (--train, --infer; both are
// required).
[[nodiscard]] Result<ParallelLayouts> parse_layouts(const std::string& train, const std::string& infer);

// `problem` with the weights an FP8 vLLM engine quantizes (models/fp8_weights.h) quantized as
// `options` says, or unchanged when options.quantize is empty; errors name --quantize-at or
// --quantize, and for a layout that cuts blocks, `layouts` (how the problem's layouts were given,
// e.g. "--train tp=2 --infer tp=4"; empty for a manifest's).
[[nodiscard]] Result<ReshardProblem> apply_quantization(const ReshardProblem& problem,
                                                        const ModelOptions& options,
                                                        std::string_view layouts = {});

// The problem the source describes; errors name the offending option (--model, --train, --infer,
// --dtype, --manifest), as the command line spells it.
[[nodiscard]] Result<ReshardProblem> load_problem(const ProblemSource& source);

// The engine count of the source's --infer (engines=N): what an elastic refit (--members, --join,
// --fail, --elastic) needs to know which destination ranks form an engine. Errors name --infer.
[[nodiscard]] Result<std::int32_t> inference_engines(const ProblemSource& source);

// Elastic refit: the inference engines of a model source (--infer's engines, tp*dp ranks each,
// after the training ranks), every one a member, at membership `epoch`. A manifest names no
// engines, so it is refused (kUnsupported, naming --manifest); so are weights quantized at landing
// ranks (naming --quantize-at): no repair could re-feed an engine whose fp8 another engine made.
[[nodiscard]] Result<EngineMembership> engine_membership(const ProblemSource& source,
                                                         const ReshardProblem& problem,
                                                         std::uint64_t epoch = 1);

// The layouts a model source names as its problem is built from them.
struct ResolvedLayouts {
  // The training and inference layouts, the inference placement resolved as vLLM resolves it
  // (models/expert_placement.h).
  ParallelLayouts layouts;
  // What was decided that the user did not ask for, a sentence each: a requested
  // placement=round_robin that vLLM would not keep, laid out linearly as vLLM will load it.
  std::vector<std::string> notes;
};
// The resolved layouts of a model source (--model, --train, --infer); errors as load_problem's.
[[nodiscard]] Result<ResolvedLayouts> resolve_layouts(const ProblemSource& source);

// How one side of the problem the source describes (`problem`, which load_problem(source) made)
// stores its shards in a framework's parameters: Megatron's on the training side (`training`),
// vLLM's on the inference side, by the models' rules; or the storage maps of a version 2
// manifest. Errors name the option (--model, --train, --infer, --manifest: one without maps), or
// the tensor and rank that the framework's rules cannot place.
[[nodiscard]] Result<models::StorageMap> load_storage(const ProblemSource& source,
                                                      const ReshardProblem& problem, bool training);

}  // namespace refit
