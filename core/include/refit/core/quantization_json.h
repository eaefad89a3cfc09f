#pragma once
// A tensor's "quantization" object, as plans and manifests write it:
//   {"scheme": "fp8-block128", "site": "sender", "from": "bf16", "scales_of": "<weight>"}
// ("scales_of" only on a weight's scales, "landing_of" only on a weight's landing copy).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"
#include "refit/core/quantization.h"

namespace refit {

nlohmann::json quantization_json(const Quantization& q);
// The optional "quantization" key of a tensor object at `path`; errors name the JSON path.
[[nodiscard]] Result<std::optional<Quantization>> read_quantization(const nlohmann::json& tensor,
                                                                    const std::string& path);

}  // namespace refit
