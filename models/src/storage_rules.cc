#include "storage_rules.h"

#include <charconv>
#include <map>

#include <fmt/format.h>

#include "quantized_storage.h"
#include "refit/core/try.h"

namespace refit::models::detail {
namespace {

// Row-major strides of a box's extents, with dim 0 advancing `row` elements.
Shape strides_with_row(const Box& box, std::int64_t row) {
  Shape s = row_major_strides(box.extent);
  s[0] = row;
  return s;
}

std::int64_t inner_elements(const Box& box) {
  std::int64_t inner = 1;
  for (std::size_t d = 1; d < box.rank(); ++d) inner *= box.extent[d];
  return inner;
}

// Adds one tensor's regions to a rank, merging its parameters into the rank's by name.
[[nodiscard]] Result<void> merge(RankStorage& rank, std::map<std::string, std::int32_t>& by_name,
                                 Stored stored) {
  std::vector<std::int32_t> index;
  for (auto& p : stored.parameters) {
    const auto [it, fresh] = by_name.try_emplace(p.name, static_cast<std::int32_t>(rank.parameters.size()));
    if (fresh) {
      rank.parameters.push_back(std::move(p));
    } else {
      const auto& known = rank.parameters[static_cast<std::size_t>(it->second)];
      if (known.shape != p.shape || known.dtype != p.dtype)
        return mismatch(fmt::format("parameter '{}' is declared as [{}] and as [{}]", p.name,
                                    fmt::join(known.shape, ", "), fmt::join(p.shape, ", ")));
    }
    index.push_back(it->second);
  }
  for (auto& r : stored.regions) {
    r.parameter = index[static_cast<std::size_t>(r.parameter)];
    rank.regions.push_back(std::move(r));
  }
  return {};
}

}  // namespace

Result<Box> TensorOnRank::sibling(const std::string& name) const {
  const auto it = names->find(name);
  if (it == names->end())
    return not_found(fmt::format("tensor '{}' (next to '{}') is not in the model", name, tensor->spec.name));
  const auto& t = problem->tensors()[it->second];
  const Layout& layout = source ? t.source : t.destination;
  if (!layout.mesh().position_of_rank(rank))
    return Box{.offset = Shape(t.tensor.shape.size(), 0), .extent = Shape(t.tensor.shape.size(), 0)};
  return layout.local_box(rank);
}

Result<StorageMap> build_storage(std::string framework, const ModelSpec& model, const ReshardProblem& problem,
                                 bool source, const StorageRule& rule, const ScaleParameterRule& scales) {
  std::unordered_map<std::string, std::uint32_t> names;  // the problem's: a quantized weight adds scales
  for (std::uint32_t i = 0; i < problem.tensors().size(); ++i)
    names.emplace(problem.tensors()[i].tensor.name, i);
  std::unordered_map<std::string_view, const WeightTensor*> weights;
  for (const auto& w : model.tensors) weights.emplace(w.spec.name, &w);
  const auto first = source ? 0 : problem.source_ranks();
  const auto count = source ? problem.source_ranks() : problem.destination_ranks();
  StorageMap out{.framework = std::move(framework), .first_rank = first, .ranks = {}};
  for (std::int32_t r = first; r < first + count; ++r) {
    RankStorage& rank = out.ranks.emplace_back();
    std::map<std::string, std::int32_t> by_name;
    for (std::uint32_t i = 0; i < problem.tensors().size(); ++i) {
      const auto& t = problem.tensors()[i];
      const Layout& layout = source ? t.source : t.destination;
      if (!layout.mesh().position_of_rank(Rank{r}) || (source && !held_at_source(t.tensor))) continue;
      auto box = REFIT_TRY(layout.local_box(Rank{r}));
      const auto& q = t.tensor.quantization;
      const auto weight = weights.find(q && q->is_scales() ? std::string_view(q->scales_of) : t.tensor.name);
      // An empty box is none of the tensor on the rank, save a padded vocab's: a rank whose
      // partition lies wholly past the real rows still holds that partition, all padding.
      if (box.empty() && (weight == weights.end() || weight->second->kind != TensorKind::kVocab)) continue;
      const auto at = fmt::format("{} rank {}, tensor '{}'", out.framework, r, t.tensor.name);
      if (weight == weights.end()) return unsupported(at + ": no weight of the model");
      const TensorOnRank on{.index = i,
                            .tensor = weight->second,
                            .box = std::move(box),
                            .rank = Rank{r},
                            .model = &model,
                            .problem = &problem,
                            .source = source,
                            .names = &names};
      REFIT_TRY_IN(merge(rank, by_name, REFIT_TRY_IN(placed(on, t.tensor, rule, scales), at)), at);
    }
  }
  return out;
}

Shape rows_shape(const Box& box, std::int64_t rows) {
  Shape s = box.extent;
  s[0] = rows;
  return s;
}

StoredRegion rows_at(const TensorOnRank& t, std::int64_t begin, std::int64_t end, std::int64_t at,
                     std::int32_t parameter) {
  Box box = t.box;
  box.offset[0] = begin;
  box.extent[0] = end - begin;
  const auto inner = inner_elements(t.box);
  return StoredRegion{.tensor = t.index,
                      .box = std::move(box),
                      .parameter = parameter,
                      .offset = at * inner,
                      .strides = strides_with_row(t.box, inner)};
}

Stored whole(const TensorOnRank& t, std::string name, std::int64_t rows) {
  return Stored{
      .parameters = {FrameworkParameter{
          .name = std::move(name), .shape = rows_shape(t.box, rows), .dtype = t.tensor->spec.dtype}},
      .regions = {rows_at(t, t.box.offset[0], t.box.offset[0] + t.box.extent[0], 0, 0)}};
}

Result<Stored> concatenated(const TensorOnRank& t, std::string name,
                            const std::vector<std::string>& members) {
  std::int64_t rows = 0;
  std::int64_t at = -1;
  for (const auto& m : members) {
    const Box box = m == t.tensor->spec.name ? t.box : REFIT_TRY(t.sibling(m));
    if (m == t.tensor->spec.name) at = rows;
    rows += box.extent[0];
  }
  return Stored{
      .parameters = {FrameworkParameter{
          .name = std::move(name), .shape = rows_shape(t.box, rows), .dtype = t.tensor->spec.dtype}},
      .regions = {rows_at(t, t.box.offset[0], t.box.offset[0] + t.box.extent[0], at, 0)}};
}

Result<Stored> padded_vocab(const TensorOnRank& t, std::string name, std::int64_t partition) {
  if (t.box.empty())  // a partition of padding alone: the parameter, no region
    return Stored{
        .parameters = {FrameworkParameter{
            .name = std::move(name), .shape = rows_shape(t.box, partition), .dtype = t.tensor->spec.dtype}},
        .regions = {}};
  const auto vocab = t.tensor->spec.shape[0];
  const auto begin = t.box.offset[0];
  const auto real_end = std::min(vocab, (begin / partition + 1) * partition);
  if (begin % partition != 0 || real_end != begin + t.box.extent[0])
    return unsupported(fmt::format(
        "the vocab of {} rows in partitions of {} puts rows [{}, {}) on this rank, "
        "its logical box is rows [{}, {})",
        vocab, partition, begin / partition * partition, real_end, begin, begin + t.box.extent[0]));
  return whole(t, std::move(name), partition);
}

StoredRegion expert_rows(const TensorOnRank& t, std::int64_t begin, std::int64_t end, std::int64_t rows,
                         std::int64_t at, std::int32_t parameter) {
  Box box = t.box;
  box.offset[0] = begin;
  box.extent[0] = end - begin;
  const auto inner = box.rank() > 2 ? row_major_strides(box.extent)[1] : 1;  // elements of one row of dim 1
  auto strides = strides_with_row(box, rows * inner);
  return StoredRegion{.tensor = t.index,
                      .box = std::move(box),
                      .parameter = parameter,
                      .offset = at * inner,
                      .strides = std::move(strides)};
}

std::optional<LayerName> layer_name(std::string_view hf_name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!hf_name.starts_with(kPrefix)) return std::nullopt;
  hf_name.remove_prefix(kPrefix.size());
  LayerName out;
  const auto [end, ec] = std::from_chars(hf_name.data(), hf_name.data() + hf_name.size(), out.layer);
  if (ec != std::errc{} || end == hf_name.data() + hf_name.size() || *end != '.') return std::nullopt;
  out.rest = std::string(end + 1, hf_name.data() + hf_name.size());
  return out;
}

std::unexpected<Error> no_rule(std::string_view framework, const TensorOnRank& t) {
  return unsupported(
      fmt::format("the {} storage rules have no rule for tensor '{}'", framework, t.tensor->spec.name));
}

}  // namespace refit::models::detail
