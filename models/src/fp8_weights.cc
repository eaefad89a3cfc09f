#include "refit/models/fp8_weights.h"

namespace refit::models {

bool fp8_engine_quantizes(std::string_view name) {
  if (name.ends_with("eh_proj.weight")) return false;
  if (name.ends_with("_proj.weight")) return true;
  // Routed experts, per expert ("experts.7.w1.weight") or stacked ("experts.gate_proj").
  return name.find(".experts.") != std::string_view::npos && !name.ends_with("bias");
}

}  // namespace refit::models
