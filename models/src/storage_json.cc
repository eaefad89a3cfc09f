#include "refit/models/storage_json.h"

#include <limits>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/json_fields.h"
#include "refit/core/try.h"
#include "refit/models/storage_check.h"

namespace refit::models {
namespace {

using json_fields::child;
using json_fields::element;
using json_fields::Json;

using OrderedJson = nlohmann::ordered_json;
using Names = std::unordered_map<std::string, std::uint32_t>;

OrderedJson rank_json(const RankStorage& r, std::int32_t rank, const ReshardProblem& problem) {
  OrderedJson parameters = OrderedJson::array();
  for (const auto& p : r.parameters)
    parameters.push_back({{"name", p.name}, {"shape", p.shape}, {"dtype", std::string(dtype_name(p.dtype))}});
  OrderedJson regions = OrderedJson::array();
  for (const auto& g : r.regions)
    regions.push_back({{"tensor", problem.tensors()[g.tensor].tensor.name},
                       {"box", {{"offset", g.box.offset}, {"extent", g.box.extent}}},
                       {"parameter", g.parameter},
                       {"offset", g.offset},
                       {"strides", g.strides}});
  return {{"rank", rank}, {"parameters", parameters}, {"regions", regions}};
}

[[nodiscard]] Result<FrameworkParameter> read_parameter(const Json& j, const std::string& path) {
  REFIT_TRY(json_fields::require_known_keys(j, path, {"name", "shape", "dtype"}));
  json_fields::FieldReader r(j, path);
  auto name = r.string("name");
  auto shape = r.integers("shape", 0);
  auto dtype = r.string("dtype");
  REFIT_TRY(r.status());
  return FrameworkParameter{.name = std::move(name),
                            .shape = std::move(shape),
                            .dtype = REFIT_TRY_IN(parse_dtype(dtype), child(path, "dtype"))};
}

// The region as written; check_storage (storage_check.h) checks what it says.
[[nodiscard]] Result<StoredRegion> read_region(const Json& j, const std::string& path, const Names& names) {
  REFIT_TRY(json_fields::require_known_keys(j, path, {"tensor", "box", "parameter", "offset", "strides"}));
  json_fields::FieldReader r(j, path);
  const auto tensor = r.string("tensor");
  const Json* box = r.object("box");
  const auto parameter = r.integer("parameter", 0);
  const auto offset = r.integer("offset", 0);
  auto strides = r.integers("strides", 0);
  REFIT_TRY(r.status());
  const auto it = names.find(tensor);
  if (it == names.end())
    return invalid(fmt::format("{}: no tensor '{}' in the manifest", child(path, "tensor"), tensor));
  REFIT_TRY(json_fields::require_known_keys(*box, child(path, "box"), {"offset", "extent"}));
  json_fields::FieldReader b(*box, child(path, "box"));
  StoredRegion g{.tensor = it->second,
                 .box = Box{.offset = b.integers("offset", 0), .extent = b.integers("extent", 1)},
                 .parameter = static_cast<std::int32_t>(parameter),
                 .offset = offset,
                 .strides = std::move(strides)};
  REFIT_TRY(b.status());
  if (parameter > std::numeric_limits<std::int32_t>::max())
    return out_of_range(
        fmt::format("{}: parameter {} is past any rank's parameters", child(path, "parameter"), parameter));
  return g;
}

[[nodiscard]] Result<RankStorage> read_rank(const Json& j, const std::string& path, std::int32_t rank,
                                            const Names& names) {
  REFIT_TRY(json_fields::require_known_keys(j, path, {"rank", "parameters", "regions"}));
  json_fields::FieldReader r(j, path);
  if (r.integer("rank", 0) != rank) r.fail("rank", fmt::format("expected rank {} here", rank));
  const Json* parameters = r.array("parameters");
  const Json* regions = r.array("regions");
  REFIT_TRY(r.status());
  RankStorage out;
  for (std::size_t i = 0; i < parameters->size(); ++i)
    out.parameters.push_back(
        REFIT_TRY(read_parameter((*parameters)[i], element(child(path, "parameters"), i))));
  for (std::size_t i = 0; i < regions->size(); ++i)
    out.regions.push_back(REFIT_TRY(read_region((*regions)[i], element(child(path, "regions"), i), names)));
  return out;
}

}  // namespace

nlohmann::ordered_json rank_storage_json(const StorageMap& map, std::size_t index,
                                         const ReshardProblem& problem) {
  return rank_json(map.ranks[index], map.first_rank + static_cast<std::int32_t>(index), problem);
}

nlohmann::ordered_json storage_json(const StorageMap& map, const ReshardProblem& problem) {
  OrderedJson ranks = OrderedJson::array();
  for (std::size_t i = 0; i < map.ranks.size(); ++i)
    ranks.push_back(rank_json(map.ranks[i], map.first_rank + static_cast<std::int32_t>(i), problem));
  return {{"framework", map.framework}, {"ranks", ranks}};
}

Result<StorageMap> parse_storage(const Json& j, const std::string& path, const ReshardProblem& problem,
                                 bool source) {
  REFIT_TRY(json_fields::require_known_keys(j, path, {"framework", "ranks"}));
  json_fields::FieldReader r(j, path);
  auto framework = r.label("framework");  // any framework's name, printed in messages
  const Json* ranks = r.array("ranks");
  REFIT_TRY(r.status());
  StorageMap out{
      .framework = std::move(framework), .first_rank = source ? 0 : problem.source_ranks(), .ranks = {}};
  const auto count = source ? problem.source_ranks() : problem.destination_ranks();
  if (ranks->size() != static_cast<std::size_t>(count))
    return invalid(fmt::format("{}: {} ranks, the side has {}", child(path, "ranks"), ranks->size(), count));
  Names names;
  for (std::uint32_t i = 0; i < problem.tensors().size(); ++i)
    names.emplace(problem.tensors()[i].tensor.name, i);
  for (std::size_t i = 0; i < ranks->size(); ++i)
    out.ranks.push_back(REFIT_TRY(read_rank((*ranks)[i], element(child(path, "ranks"), i),
                                            out.first_rank + static_cast<std::int32_t>(i), names)));
  REFIT_TRY(check_storage(out, problem, source, path));
  return out;
}

}  // namespace refit::models
