#pragma once
// Reads a Hugging Face config.json into a ModelSpec for the architectures refit knows:
// llama, qwen2, qwen3, qwen3_moe, mixtral and deepseek_v3 (also as kimi_k2, Kimi-K2's model_type).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/models/model_spec.h"

namespace refit::models {

struct HfOptions {
  std::optional<DType> dtype;  // overrides torch_dtype (then torch_dtype may be absent)
  bool per_expert = false;     // one tensor per routed expert instead of stacked [E, out, in]
  bool include_mtp = false;    // DeepSeek-V3's num_nextn_predict_layers MTP layers
};

// `name` becomes ModelSpec::name. Errors name the offending config field.
[[nodiscard]] Result<ModelSpec> parse_hf_config(std::string_view json_text, const HfOptions& options = {},
                                                std::string name = "config.json");
// Reads hf_config_file(path).
[[nodiscard]] Result<ModelSpec> load_hf_config(const std::filesystem::path& path,
                                               const HfOptions& options = {});
// The file a model at `path` is read from: `path`/config.json when `path` is a directory (a
// Hugging Face checkpoint's folder), `path` itself otherwise.
std::filesystem::path hf_config_file(const std::filesystem::path& path);

}  // namespace refit::models
