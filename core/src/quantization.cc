#include "refit/core/quantization.h"
#include "refit/core/named_table.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit {
namespace {

struct SchemeInfo {
  QuantScheme scheme;
  std::string_view name;
  // What follows a weight's name in its scales' (the checkpoints' own names: DeepSeek-V3's
  // weight_scale_inv, the OCP MX format's weight_scale as vLLM loads it).
  std::string_view scale_suffix;
  DType scale;
  std::int64_t rows;  // block along the second-to-last dim
  std::int64_t cols;  // block along the last dim
};

// fp8-block128: DeepSeek-V3's checkpoints and vLLM's block FP8 (weight_block_size [128, 128]);
// mxfp8: the OCP Microscaling format, blocks of 32 along the reduction (last) dim.
constexpr std::array<SchemeInfo, kQuantSchemeCount> kSchemes{{
    {QuantScheme::kFp8Block128, "fp8-block128", "_scale_inv", DType::kFP32, 128, 128},
    {QuantScheme::kMxfp8, "mxfp8", "_scale", DType::kFP8E8M0, 1, 32},
}};

const SchemeInfo& info(QuantScheme s) { return kSchemes[static_cast<std::size_t>(s)]; }

}  // namespace

std::string_view quant_scheme_name(QuantScheme s) { return info(s).name; }

std::string_view quant_scale_suffix(QuantScheme s) { return info(s).scale_suffix; }

Result<QuantScheme> parse_quant_scheme(std::string_view name) {
  if (const auto* i = find_named(kSchemes, name, &SchemeInfo::name)) return i->scheme;
  return parse_error(
      fmt::format("unknown quantization '{}' (expected {})", name, names_of(kSchemes, &SchemeInfo::name)));
}

std::span<const QuantScheme> all_quant_schemes() {
  static constexpr auto kAll = [] {
    std::array<QuantScheme, kSchemes.size()> out{};
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = kSchemes[i].scheme;
    return out;
  }();
  return kAll;
}

DType quant_value_dtype(QuantScheme) { return DType::kFP8E4M3; }
DType quant_scale_dtype(QuantScheme s) { return info(s).scale; }

Shape quant_block(QuantScheme s, std::size_t dims) {
  Shape block(dims, 1);
  if (dims >= 2) block[dims - 2] = info(s).rows;
  if (dims >= 1) block[dims - 1] = info(s).cols;
  return block;
}

Shape quant_scale_shape(QuantScheme s, const Shape& weight) {
  const Shape block = quant_block(s, weight.size());
  Shape out(weight.size());
  for (std::size_t d = 0; d < weight.size(); ++d) out[d] = ceil_div(weight[d], block[d]);
  return out;
}

Box quant_scale_box(QuantScheme s, const Box& weight_box) {
  const Shape block = quant_block(s, weight_box.rank());
  Box out{.offset = Shape(weight_box.rank()), .extent = Shape(weight_box.rank())};
  for (std::size_t d = 0; d < weight_box.rank(); ++d) {
    const std::int64_t lo = weight_box.offset[d] / block[d];
    const std::int64_t hi = ceil_div(weight_box.offset[d] + weight_box.extent[d], block[d]);
    out.offset[d] = lo;
    out.extent[d] = weight_box.extent[d] == 0 ? 0 : hi - lo;
  }
  return out;
}

Box quant_blocks_of(QuantScheme s, const Box& scale_box, const Shape& weight) {
  const Shape block = quant_block(s, scale_box.rank());
  Box out = scale_box;
  for (std::size_t d = 0; d < out.rank(); ++d) {
    out.offset[d] = scale_box.offset[d] * block[d];
    out.extent[d] =
        std::min((scale_box.offset[d] + scale_box.extent[d]) * block[d], weight[d]) - out.offset[d];
  }
  return out;
}

bool quant_block_aligned(QuantScheme s, const Box& box, const Shape& weight) {
  const Shape block = quant_block(s, box.rank());
  for (std::size_t d = 0; d < box.rank(); ++d) {
    const std::int64_t end = box.offset[d] + box.extent[d];
    if (box.offset[d] % block[d] != 0 || (end % block[d] != 0 && end != weight[d])) return false;
  }
  return true;
}

std::string_view quant_site_name(QuantSite s) {
  switch (s) {
    case QuantSite::kSender:
      return "sender";
    case QuantSite::kReceiver:
      return "receiver";
    case QuantSite::kTraining:
      return "training";
    case QuantSite::kLanding:
      return "landing";
  }
  return "?";
}

Result<QuantSite> parse_quant_site(std::string_view name) {
  for (const auto s : {QuantSite::kSender, QuantSite::kReceiver, QuantSite::kTraining, QuantSite::kLanding})
    if (name == quant_site_name(s)) return s;
  return parse_error(
      fmt::format("unknown quantization site '{}' (expected sender, receiver, training or landing)", name));
}

std::string landing_copy_name(std::string_view weight) { return fmt::format("{}@landing", weight); }

namespace {

// The first mesh axis that replicates over more than one rank, or the axis count.
std::size_t replica_axis(const Layout& destination) {
  const auto& placements = destination.placements();
  std::size_t axis = 0;
  while (axis < placements.size() && (placements[axis].is_shard() || destination.mesh().shape()[axis] < 2))
    ++axis;
  return axis;
}

}  // namespace

std::int64_t landing_replicas(const Layout& destination) {
  const std::size_t axis = replica_axis(destination);
  return axis == destination.placements().size() ? 1 : destination.mesh().shape()[axis];
}

Layout landing_layout(const Layout& destination, std::int64_t replica) {
  const Mesh& mesh = destination.mesh();
  const std::size_t axis = replica_axis(destination);
  if (axis == destination.placements().size()) return destination;
  std::vector<std::int64_t> shape = mesh.shape();
  shape[axis] = 1;
  std::vector<Rank> ranks;
  for (std::int64_t p = 0; p < mesh.size(); ++p)
    if (mesh.coord_of_position(p)[axis] == replica) ranks.push_back(mesh.rank_at(p));
  // A sub-mesh of a valid mesh with the same placements is valid, and a replicated axis takes no
  // part in any box, so every rank keeps its box.
  auto sub = Mesh::make(std::move(shape), std::move(ranks), mesh.axis_names());
  return *Layout::make(destination.tensor_shape(), std::move(*sub), destination.placements());
}

Result<Layout> quant_scale_layout(QuantScheme s, const Layout& weight) {
  const Shape& shape = weight.tensor_shape();
  if (shape.size() < 2)
    return invalid(
        fmt::format("{} quantizes weights of 2 or more dims, not {}", quant_scheme_name(s), shape.size()));
  const Shape block = quant_block(s, shape.size());
  // A weight cut on block boundaries has the same cuts, divided by the block, in scale
  // coordinates: a named chunk and start divide by the block; torch.chunk's cut is the chunk its
  // first part gets (the cuts below check that every part is whole blocks).
  std::vector<Placement> placements = weight.placements();
  Shape extent = shape;
  for (std::size_t a = 0; a < placements.size(); ++a) {
    auto& p = placements[a];
    if (!p.is_shard()) continue;
    const auto d = static_cast<std::size_t>(p.dim);
    const std::int64_t chunk =
        p.chunk > 0 ? p.chunk : part_interval(p, extent[d], weight.mesh().shape()[a], 0).extent;
    extent[d] = part_interval(p, extent[d], weight.mesh().shape()[a], 0).extent;
    p = Placement::shard(p.dim, std::max<std::int64_t>(1, ceil_div(chunk, block[d])),
                         -ceil_div(-p.start, block[d]));
  }
  auto scales = REFIT_TRY(Layout::make(quant_scale_shape(s, shape), weight.mesh(), std::move(placements)));
  for (std::int64_t p = 0; p < weight.mesh().size(); ++p) {
    const Box box = weight.box_at_position(p);
    const Box held = scales.box_at_position(p);
    const bool follows = box.empty() ? held.empty() : held == quant_scale_box(s, box);
    if (!follows || (!box.empty() && !quant_block_aligned(s, box, shape)))
      return invalid(
          fmt::format("mesh position {} holds {}, which cuts {} blocks of {} elements (every part "
                      "must be whole blocks)",
                      p, box.to_string(), quant_scheme_name(s), fmt::join(block, "x")));
  }
  return scales;
}

}  // namespace refit
