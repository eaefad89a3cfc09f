#include "refit/models/megatron_pipeline.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "layout_rules.h"
#include "pipeline_layout.h"
#include "refit/core/try.h"

namespace refit::models {
namespace {

[[nodiscard]] Result<std::vector<std::int64_t>> split_evenly(std::int64_t layers, std::int64_t pp) {
  std::vector<std::int64_t> counts;
  for (std::int64_t s = 0; s < pp; ++s) {
    counts.push_back(chunk_interval(layers, pp, s).extent);
    if (counts.back() == 0)
      return mismatch(
          fmt::format("pp={}: {} decoder layers leave stage {} empty (each stage but "
                      "the last takes ceil(layers/pp) = {}; set pp_first/pp_last)",
                      pp, layers, s, counts.front()));
  }
  return counts;
}

// Megatron's --decoder-first/last-pipeline-num-layers: the middle stages share the rest evenly.
[[nodiscard]] Result<std::vector<std::int64_t>> split_with_ends(std::int64_t layers,
                                                                const MegatronConfig& c) {
  const auto first = c.pp_first.value_or(0);
  const auto last = c.pp_last.value_or(0);
  const auto middle = c.pp - (c.pp_first ? 1 : 0) - (c.pp_last ? 1 : 0);
  const auto rest = layers - first - last;
  const bool fits = rest >= 0 && (middle == 0 ? rest == 0 : rest >= middle && rest % middle == 0);
  if (!fits)
    return mismatch(
        fmt::format("pp_first/pp_last: {} decoder layers minus {} on the first and {} "
                    "on the last stage do not split evenly over the {} other stages",
                    layers, first, last, middle));
  std::vector<std::int64_t> counts(static_cast<std::size_t>(c.pp), middle ? rest / middle : 0);
  if (c.pp_first) counts.front() = first;
  if (c.pp_last) counts.back() = last;
  return counts;
}

// Each stage's layers split evenly over its vp chunks (get_num_layers_to_build: "Stage 0: [0, 1]
// [4, 5]; Stage 1: [2, 3] [6, 7]" for 8 layers, pp=2, vp=2), numbered in chunk order
// (get_transformer_layer_offset: vp_stage * layers per virtual round + the stages before).
[[nodiscard]] Result<MegatronPipeline> from_counts(std::int64_t num_layers, std::int64_t mtp_layers,
                                                   const MegatronConfig& c) {
  if (c.vp > 1 && !c.pp_first && !c.pp_last && num_layers % c.pp != 0)
    return mismatch(
        fmt::format("vp={}: {} decoder layers do not split evenly over pp={}", c.vp, num_layers, c.pp));
  const auto counts =
      REFIT_TRY(c.pp_first || c.pp_last ? split_with_ends(num_layers, c) : split_evenly(num_layers, c.pp));
  MegatronPipeline out{.pp = c.pp, .vp = c.vp, .chunks = {}, .mtp_chunk = 0, .norm_chunk = 0};
  for (std::int64_t s = 0; s < c.pp; ++s)
    if (counts[static_cast<std::size_t>(s)] % c.vp != 0)
      return mismatch(
          fmt::format("vp={}: stage {} gets {} decoder layers, which do not split over its {} "
                      "virtual stages",
                      c.vp, s, counts[static_cast<std::size_t>(s)], c.vp));
  std::int64_t first = 0;
  for (std::int64_t v = 0; v < c.vp; ++v)
    for (std::int64_t s = 0; s < c.pp; ++s) {
      const auto n = counts[static_cast<std::size_t>(s)] / c.vp;
      out.chunks.push_back(
          PipelineChunk{.stage = s, .virtual_stage = v, .first_layer = first, .layers = n, .mtp_layers = 0});
      first += n;
    }
  out.chunks.back().mtp_layers = mtp_layers;  // mtp_on_this_rank: the last stage
  out.mtp_chunk = static_cast<std::int64_t>(out.chunks.size()) - 1;
  return out;
}

// validate_layer_layout's checks, in its order, on the virtual stages in layer order.
[[nodiscard]] Result<void> check_layout(const std::vector<std::string>& stages, std::int64_t num_layers,
                                        std::int64_t mtp_layers, const MegatronConfig& c) {
  std::string flat;
  for (const auto& s : stages) flat += s;
  const auto bad = [&](const std::string& what) {
    return mismatch(fmt::format("layout={}: {}", c.layout, what));
  };
  if (flat.empty() || flat.front() != 'E')
    return bad(fmt::format("the first layer must be the embedding E, not '{}'", flat.substr(0, 1)));
  if (flat.back() != 'L') return bad(fmt::format("the last layer must be the loss L, not '{}'", flat.back()));
  if (std::ranges::count(flat, 'E') != 1) return bad("the embedding E must appear exactly once");
  if (std::ranges::count(flat, 'L') != 1) return bad("the loss L must appear exactly once");
  if (const auto t = std::ranges::count(flat, 't'); t != num_layers)
    return bad(fmt::format("{} decoder layers (t), the model has {}", t, num_layers));
  if (const auto m = std::ranges::count(flat, 'm'); m != mtp_layers)
    return bad(fmt::format("{} MTP layers (m), the model has {} (--mtp includes them)", m, mtp_layers));
  if (flat.find('m') != std::string::npos && flat.find('t', flat.find('m')) != std::string::npos)
    return bad("decoder layers (t) must come before MTP layers (m)");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto m = std::ranges::count(stages[i], 'm');
    if (m > 0 && static_cast<std::int64_t>(i) / c.pp != c.vp - 1)
      return bad(
          fmt::format("stage '{}' (virtual stage {} of stage {}) has MTP layers, which must be in a "
                      "stage's last virtual stage",
                      stages[i], static_cast<std::int64_t>(i) / c.pp, static_cast<std::int64_t>(i) % c.pp));
    if (m > 0 && m != mtp_layers)
      return bad(fmt::format("stage '{}': all MTP layers must be in one stage", stages[i]));
  }
  return {};
}

// PipelineParallelLayerLayout: virtual stage i of the string is chunk i (stage i % pp), and a
// chunk's first layer counts the decoder layers before it (get_layer_offset).
[[nodiscard]] Result<MegatronPipeline> from_layout(std::int64_t num_layers, std::int64_t mtp_layers,
                                                   const MegatronConfig& c) {
  const auto stages = REFIT_TRY(parse_pipeline_layout(c.layout));
  REFIT_TRY(check_layout(stages, num_layers, mtp_layers, c));
  MegatronPipeline out{.pp = c.pp, .vp = c.vp, .chunks = {}, .mtp_chunk = 0, .norm_chunk = 0};
  std::int64_t first = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto index = static_cast<std::int64_t>(i);
    out.chunks.push_back(PipelineChunk{.stage = index % c.pp,
                                       .virtual_stage = index / c.pp,
                                       .first_layer = first,
                                       .layers = std::ranges::count(stages[i], 't'),
                                       .mtp_layers = std::ranges::count(stages[i], 'm')});
    first += out.chunks.back().layers;
    if (out.chunks.back().mtp_layers > 0) out.mtp_chunk = index;
  }
  if (mtp_layers == 0) out.mtp_chunk = static_cast<std::int64_t>(out.chunks.size()) - 1;
  return out;
}

}  // namespace

std::int64_t MegatronPipeline::chunk_of_layer(std::int64_t layer) const {
  const auto it = std::ranges::find_if(chunks, [&](const PipelineChunk& c) {
    return layer >= c.first_layer && layer < c.first_layer + c.layers;
  });
  return it - chunks.begin();
}

std::int64_t MegatronPipeline::embedding_chunk(std::int64_t stage, bool tied) const {
  const auto last = static_cast<std::int64_t>(chunks.size()) - 1;
  if (stage == 0) return 0;
  if (chunks[static_cast<std::size_t>(mtp_chunk)].mtp_layers > 0 &&
      chunks[static_cast<std::size_t>(mtp_chunk)].stage == stage)
    return mtp_chunk;
  return tied && stage == pp - 1 ? last : -1;
}

Result<MegatronPipeline> megatron_pipeline(std::int64_t num_layers, std::int64_t mtp_layers,
                                           const MegatronConfig& config) {
  auto out = REFIT_TRY(config.layout.empty() ? from_counts(num_layers, mtp_layers, config)
                                             : from_layout(num_layers, mtp_layers, config));
  // has_final_layernorm_in_this_stage: with MTP, the chunk of the last decoder layer; else the last.
  out.norm_chunk =
      mtp_layers > 0 ? out.chunk_of_layer(num_layers - 1) : static_cast<std::int64_t>(out.chunks.size()) - 1;
  const auto& mtp = out.chunks[static_cast<std::size_t>(out.mtp_chunk)];
  if (mtp.mtp_layers > 0 && mtp.stage == 0 && out.mtp_chunk != 0)
    return unsupported(
        fmt::format("layout={}: MTP layers on stage 0's virtual stage {} give its ranks a second "
                    "copy of the word embedding (not modelled)",
                    config.layout, mtp.virtual_stage));
  return out;
}

}  // namespace refit::models
