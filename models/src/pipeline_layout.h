#pragma once
// Megatron's pipeline layout strings (--pipeline-model-parallel-layout), e.g. "Et|(tt|)*30mL":
// one string of layer characters per virtual pipeline stage, in layer order.
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"

namespace refit::models {

// The virtual stages of a layout string, each as its layer characters (E embedding, t decoder
// layer, m MTP layer, L loss), parsed as Megatron's PipelineParallelLayerLayout.parse_str_to_list
// does (docs/frameworks.md, "Pipeline placement"): commas dropped, one left-to-right pass
// unrolling "(..)*N" (the group ends at the first ')'), one pass unrolling "x*N", then split at
// '|'. Errors name the string and the offending character or repeat.
[[nodiscard]] Result<std::vector<std::string>> parse_pipeline_layout(std::string_view layout);

}  // namespace refit::models
