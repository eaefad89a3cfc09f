#pragma once
// Models compiled into the binary as their public config.json, so no file is needed at run time.
#include <span>
#include <string_view>

#include "refit/core/error.h"
#include "refit/models/hf_config.h"
#include "refit/models/model_spec.h"

namespace refit::models {

struct BuiltinModel {
  std::string_view name;         // e.g. "qwen3-235b-a22b"
  std::string_view config_json;  // the model's config.json (the fields refit reads)
  bool include_mtp = false;      // deepseek-v3-mtp: DeepSeek-V3 with its MTP layer
};

std::span<const BuiltinModel> builtin_models();

// A built-in by name; kNotFound listing the names when there is none. options.include_mtp is
// forced on for the -mtp variants.
[[nodiscard]] Result<ModelSpec> builtin_model(std::string_view name, const HfOptions& options = {});

}  // namespace refit::models
