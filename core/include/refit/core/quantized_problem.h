#pragma once
// FP8 in flight at the problem level: which tensors become quantized weights, and the rules a
// problem with quantized weights must keep (core/quantization.h says what the parts mean).
#include <functional>
#include <string>
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/quantization.h"

namespace refit {

struct QuantizeOptions {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  // kLanding (the default): at a sender that holds whole blocks, for every weight whose training
  // layout cuts on block boundaries; otherwise once at the weight's landing ranks (one replica of
  // the inference layout), which the plan then sends fp8 values and scales from. kSender: as
  // kLanding, but at the receiver where training cuts blocks. kReceiver: every weight at the
  // receiver.
  // kTraining: the training ranks hold every such weight in fp8 with its scales already (FP8
  // training); their layout must cut on block boundaries.
  QuantSite site = QuantSite::kLanding;
};

// The name an engine gives a weight's scales: vLLM's block FP8 keeps "<weight>_scale_inv" (the
// DeepSeek-V3 checkpoint's name), its MXFP8 "<weight>_scale".
std::string quant_scale_name(QuantScheme s, std::string_view weight);

// `problem` with every tensor `select` picks (of 2 or more dims, in a floating dtype) made a
// quantized weight: its values (fp8 when quantized at the sender) and, at the sender, a scales
// tensor right after it whose layouts follow the weight's. A picked weight already in fp8, and
// with kTraining every picked weight, is trained in fp8 (QuantSite::kTraining): it moves as fp8
// with the scales tensor its training ranks hold beside it. A weight quantized at its landing
// ranks is followed by its scales and its landing copy (core/quantization.h).
// Refuses, naming the tensor, a destination layout that cuts a block: an FP8 engine needs each
// rank's part to be whole blocks (and FP8 training, its training ranks').
[[nodiscard]] Result<ReshardProblem> quantize_problem(const ReshardProblem& problem,
                                                      const QuantizeOptions& options,
                                                      const std::function<bool(const TensorSpec&)>& select);

// The rules ReshardProblem::make checks of quantized tensors: the dtype each part moves, layouts
// on block boundaries, every weight quantized at the sender with exactly one scales tensor whose
// shape and boxes follow the weight's (also of every weight trained in fp8). Errors name the tensor.
[[nodiscard]] Result<void> check_quantized(const std::vector<TensorReshard>& tensors);

}  // namespace refit
