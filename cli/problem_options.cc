#include "problem_options.h"

#include "parse.h"

namespace refit::cli {

void add_model_options(CLI::App* cmd, ModelOptions& options) {
  cmd->add_option("--dtype", options.dtype,
                  "Weight dtype instead of the config's torch_dtype (bf16, fp16, fp32, fp8_e4m3, ...)")
      ->check(non_empty());
  cmd->add_flag("--per-expert", options.per_expert,
                "One tensor per routed expert instead of one stacked [E, out, in] per layer");
  cmd->add_flag("--mtp", options.mtp, "Include DeepSeek-V3's multi-token-prediction layer");
  auto* quantize =
      cmd->add_option("--quantize", options.quantize,
                      "FP8 inference weights: fp8-block128 (fp8_e4m3, one fp32 scale per 128x128 block, as "
                      "DeepSeek-V3 ships) or mxfp8 (one e8m0 scale per 32); the weights vLLM's FP8 quantizes "
                      "(linear and expert weights) get a scales tensor of their own")
          ->check(non_empty());
  cmd->add_option("--quantize-at", options.quantize_at,
                  "Where weights are quantized: landing (a training rank holding whole blocks quantizes "
                  "before the network, so fp8 travels; where the training layout cuts blocks, one replica "
                  "of the inference layout gets bf16, quantizes it once and sends fp8 on to the others), "
                  "sender (as landing, but every inference rank quantizes what lands where training cuts "
                  "blocks), receiver (every inference rank quantizes what lands: today's practice) or "
                  "training (FP8 training: the training ranks hold the weights in fp8 with their scales, "
                  "and both move as they are); only with --quantize")
      ->capture_default_str()
      ->check(non_empty())
      ->needs(quantize);
}

void add_problem_options(CLI::App* cmd, ProblemSource& source) {
  auto* group =
      cmd->add_option_group("PROBLEM", "The tensors to move: a model with two layouts, or a manifest");
  auto* model = group->add_option("--model", source.model, "Built-in model name or path to an HF config.json")
                    ->check(non_empty());
  group->add_option("--train", source.train, kTrainHelp);
  group->add_option("--infer", source.infer, kInferHelp);
  add_model_options(group, source.model_options);
  group->add_option("--manifest", source.manifest, "Tensor manifest JSON (any framework)")
      ->excludes(model)
      ->check(non_empty());
}

}  // namespace refit::cli
