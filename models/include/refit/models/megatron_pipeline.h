#pragma once
// Which Megatron pipeline stage and model chunk holds each part of a model: the decoder cut into
// pp*vp model chunks (virtual pipeline stages), chunk c on stage c % pp as its virtual stage
// c / pp, each chunk numbering its layers from 0 (docs/frameworks.md, "Pipeline placement").
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/models/parallel_config.h"

namespace refit::models {

struct PipelineChunk {
  std::int64_t stage = 0;          // pipeline rank
  std::int64_t virtual_stage = 0;  // its index among the stage's chunks (Megatron's model[i])
  std::int64_t first_layer = 0;    // first decoder layer, numbered over the whole model
  std::int64_t layers = 0;         // decoder layers
  std::int64_t mtp_layers = 0;     // MTP layers (all in one chunk)
};

struct MegatronPipeline {
  std::int64_t pp = 1;
  std::int64_t vp = 1;
  std::vector<PipelineChunk> chunks;  // in layer order: chunk virtual_stage*pp + stage
  // The embedding is on chunk 0 and the output layer on the last (GPTModel's pre_process and
  // post_process as Megatron's get_model sets them; docs/frameworks.md, "Pipeline placement");
  // these hold the MTP layers and the final norm.
  std::int64_t mtp_chunk = 0;
  std::int64_t norm_chunk = 0;

  std::int64_t chunk_of_layer(std::int64_t layer) const;  // precondition: a decoder layer
  // The chunk of `stage` that holds a copy of the word embedding, or -1: chunk 0, the MTP chunk
  // (mtp_process), and the last chunk with tied embeddings (setup_embeddings_and_output_layer).
  std::int64_t embedding_chunk(std::int64_t stage, bool tied) const;
};

// The pipeline of a model of `num_layers` decoder layers and `mtp_layers` MTP layers:
//  * without a layout, layers split evenly over the stages (when pp does not divide them and
//    vp = 1, every stage but the last takes ceil(layers/pp)), or pp_first/pp_last on the ends and
//    the rest evenly over the middle; each stage's layers split evenly over its vp chunks
//    (transformer_block.get_num_layers_to_build, transformer_layer.get_transformer_layer_offset);
//    MTP layers on the last chunk;
//  * with a layout string, as Megatron's PipelineParallelLayerLayout places them, checked as its
//    validate_layer_layout does (errors name the string and the offending part).
[[nodiscard]] Result<MegatronPipeline> megatron_pipeline(std::int64_t num_layers, std::int64_t mtp_layers,
                                                         const MegatronConfig& config);

}  // namespace refit::models
