#pragma once
// FP8 in flight: the block-quantized formats FP8 inference engines keep weights in, their block
// geometry, and how a tensor of a reshard problem says that it is (part of) such a weight.
//
// A quantized weight is two tensors of the problem: its fp8 values (the weight's name and shape)
// and its scales (one per block, a tensor of its own whose layouts follow the weight's). Where
// the quantization happens decides what the plan moves:
//  - at the sender: the source ranks hold the weight in `from` (bf16) and quantize the blocks
//    they send, so the plan moves fp8 values and scales (half the bytes);
//  - at the receiver: the plan moves the weight in `from`, and every destination rank quantizes
//    its own box once it has landed (the engines' practice today); the scales never travel;
//  - in training: the training ranks already hold the weight in fp8 with its scales (FP8 training
//    with fp8 parameters, e.g. Transformer Engine's blockwise recipe); both move as they are;
//  - at the landing ranks: the training layout cuts blocks, so no sender holds one whole. The
//    plan moves the weight in `from` to one replica of the inference layout (its landing ranks,
//    which hold whole blocks), each landing rank quantizes its box once, and the plan moves fp8
//    values and scales from there to every other replica. The weight's source layout is then its
//    landing layout: what the landing ranks hold once they have quantized.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "refit/core/box.h"
#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/core/layout.h"
#include "refit/core/quant_scheme.h"

namespace refit {

std::string_view quant_scheme_name(QuantScheme s);   // "fp8-block128", "mxfp8"
std::string_view quant_scale_suffix(QuantScheme s);  // "_scale_inv", "_scale": see quant_scale_name
[[nodiscard]] Result<QuantScheme> parse_quant_scheme(std::string_view name);
std::span<const QuantScheme> all_quant_schemes();
DType quant_value_dtype(QuantScheme s);
DType quant_scale_dtype(QuantScheme s);

// Elements per block along each dim of a weight of `dims` dims (>= 2): leading dims (stacked
// experts) have blocks of 1.
Shape quant_block(QuantScheme s, std::size_t dims);
// One scale per block: ceil(weight / block) per dim.
Shape quant_scale_shape(QuantScheme s, const Shape& weight);
// The blocks a box of the weight touches, in scale coordinates.
Box quant_scale_box(QuantScheme s, const Box& weight_box);
// The weight's elements a box of its scales scales: whole blocks, the last ones to the weight's
// edge (an extent <= 0 where the scales box lies past the weight's blocks).
Box quant_blocks_of(QuantScheme s, const Box& scale_box, const Shape& weight);
// Every face of the box lies on a block boundary or on the weight's edge: whoever holds the box
// holds each of its blocks whole.
bool quant_block_aligned(QuantScheme s, const Box& box, const Shape& weight);

enum class QuantSite : std::uint8_t { kSender, kReceiver, kTraining, kLanding };
std::string_view quant_site_name(QuantSite s);  // "sender", "receiver", "training", "landing"
[[nodiscard]] Result<QuantSite> parse_quant_site(std::string_view name);

// What a tensor of a reshard problem is of a quantized weight. TensorSpec::dtype stays what the
// plan moves: fp8 (or the scale dtype) at the sender and in training, `from` at the receiver.
struct Quantization {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  QuantSite site = QuantSite::kSender;
  DType from = DType::kBF16;  // what the source ranks hold of the weight (fp8 when trained in it)
  std::string scales_of;      // empty: this tensor is the weight; else the weight these are the scales of
  // kLanding only: non-empty on the weight's landing copy, the tensor that carries the weight in
  // `from` from the training ranks to its landing ranks (named landing_copy_name(weight)).
  std::string landing_of;
  bool is_scales() const { return !scales_of.empty(); }
  bool is_landing_copy() const { return !landing_of.empty(); }
  // The fp8 values or scales of a weight that its landing ranks make (sources hold none of it).
  bool made_at_landing() const { return site == QuantSite::kLanding && !is_landing_copy(); }
  bool operator==(const Quantization&) const = default;
};

// The name of a weight's landing copy: "<weight>@landing".
std::string landing_copy_name(std::string_view weight);

// How many replicas `destination` has along its first replicated mesh axis of more than one rank
// (vLLM's engines); 1 when no axis replicates.
std::int64_t landing_replicas(const Layout& destination);
// Replica `replica` (< landing_replicas) of `destination`: the ranks at that index of the axis,
// each holding the box it holds in `destination`.
Layout landing_layout(const Layout& destination, std::int64_t replica);

// The scale tensor's layout on the same mesh as the weight's: each split of the weight cut at
// the block multiples its chunk names. Refuses (naming the mesh position and dim) a weight layout
// that cuts some block between two ranks.
[[nodiscard]] Result<Layout> quant_scale_layout(QuantScheme s, const Layout& weight);

}  // namespace refit
