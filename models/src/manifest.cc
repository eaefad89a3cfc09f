#include "refit/models/manifest.h"

#include <fstream>
#include <ostream>
#include <sstream>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/json_fields.h"
#include "refit/core/quantization_json.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/models/storage_json.h"

namespace refit::models {
namespace {

using json_fields::child;
using json_fields::element;
using json_fields::Json;

constexpr std::string_view kFormat = "refit-manifest";
constexpr std::int64_t kVersion = 1;         // without storage maps
constexpr std::int64_t kStorageVersion = 2;  // with them
[[nodiscard]] Result<Shape> read_shape(const Json& array, const std::string& path) {
  auto shape = REFIT_TRY(json_fields::int_array(array, path, 0, limits::kMaxElements));
  REFIT_TRY_IN(checked_product(shape, limits::kMaxElements, "elements"), path);
  return shape;
}

[[nodiscard]] Result<std::vector<std::int64_t>> read_mesh_shape(const Json& side, const std::string& path) {
  const Json* array = REFIT_TRY(json_fields::require_array(side, "mesh", path));
  auto shape = REFIT_TRY(json_fields::int_array(*array, child(path, "mesh"), 1, limits::kMaxRanks));
  REFIT_TRY_IN(checked_product(shape, limits::kMaxRanks, "positions"), child(path, "mesh"));
  return shape;
}

// Explicit ranks, or first..first+size-1 when the side leaves them out.
[[nodiscard]] Result<std::vector<Rank>> read_ranks(const Json& side, const std::string& path,
                                                   std::int64_t mesh_size, std::int32_t first) {
  std::vector<Rank> ranks;
  if (!json_fields::has(side, "ranks")) {
    for (std::int64_t i = 0; i < mesh_size; ++i) ranks.emplace_back(first + static_cast<std::int32_t>(i));
    return ranks;
  }
  // Source plus destination ranks: the problem checks each side's range.
  const auto list =
      REFIT_TRY(json_fields::int_array(side["ranks"], child(path, "ranks"), 0, limits::kMaxJobRanks - 1));
  // Mesh::make reads no ranks as the side's own in order, which an explicit [] does not say; a
  // list of another length it refuses itself.
  if (list.empty() && mesh_size > 0)
    return mismatch(
        fmt::format("{}: 0 ranks given for a mesh of {} positions", child(path, "ranks"), mesh_size));
  for (const auto r : list) ranks.emplace_back(static_cast<std::int32_t>(r));
  return ranks;
}

[[nodiscard]] Result<std::vector<Placement>> read_placements(const Json& side, const std::string& path) {
  const Json* array = REFIT_TRY(json_fields::require_array(side, "placements", path));
  std::vector<Placement> placements;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto at = element(child(path, "placements"), i);
    const Json& p = (*array)[i];
    if (!p.is_string()) return invalid(fmt::format("{}: expected \"R\" or \"S<dim>\"", at));
    placements.push_back(REFIT_TRY_IN(parse_placement(p.get<std::string>()), at));
  }
  return placements;
}

// `positions` counts the mesh positions of the layouts read so far, which are refused past
// limits::kMaxLayoutPositions before they are made.
[[nodiscard]] Result<Layout> read_side(const Json& tensor, std::string_view key, const std::string& path,
                                       const Shape& shape, std::int32_t first, std::int64_t& positions) {
  const Json* side = REFIT_TRY(json_fields::require_object(tensor, key, path));
  const auto at = child(path, key);
  REFIT_TRY(json_fields::require_known_keys(*side, at, {"mesh", "ranks", "placements"}));
  auto mesh_shape = REFIT_TRY(read_mesh_shape(*side, at));
  positions += element_count(mesh_shape);
  if (positions > limits::kMaxLayoutPositions)
    return out_of_range(fmt::format("{}: the layouts so far hold {} mesh positions, more than {}",
                                    child(at, "mesh"), positions, limits::kMaxLayoutPositions));
  auto ranks = REFIT_TRY(read_ranks(*side, at, element_count(mesh_shape), first));
  auto placements = REFIT_TRY(read_placements(*side, at));
  auto mesh = REFIT_TRY_IN(Mesh::make(std::move(mesh_shape), std::move(ranks)), at);
  return REFIT_TRY_IN(Layout::make(shape, std::move(mesh), std::move(placements)), at);
}

[[nodiscard]] Result<TensorReshard> read_tensor(const Json& t, const std::string& path, std::int32_t sources,
                                                std::int64_t& positions) {
  REFIT_TRY(json_fields::require_known_keys(
      t, path, {"name", "shape", "dtype", "quantization", "source", "destination"}));
  json_fields::FieldReader r(t, path);
  auto name = r.string("name");
  auto dtype_name = r.string("dtype");
  REFIT_TRY(r.status());
  const auto dtype = REFIT_TRY_IN(parse_dtype(dtype_name), child(path, "dtype"));
  const Json* shape_json = REFIT_TRY(json_fields::require_array(t, "shape", path));
  auto shape = REFIT_TRY(read_shape(*shape_json, child(path, "shape")));
  auto spec = REFIT_TRY_IN(make_tensor_spec(std::move(name), std::move(shape), dtype), path);
  spec.quantization = REFIT_TRY(read_quantization(t, path));
  auto source = REFIT_TRY(read_side(t, "source", path, spec.shape, 0, positions));
  auto destination = REFIT_TRY(read_side(t, "destination", path, spec.shape, sources, positions));
  return TensorReshard{
      .tensor = std::move(spec), .source = std::move(source), .destination = std::move(destination)};
}

[[nodiscard]] Result<void> check_header(json_fields::FieldReader& r, const Json& j) {
  if (r.has("format") && (!j["format"].is_string() || j["format"] != kFormat))
    r.fail("format", fmt::format("expected \"{}\"", kFormat));
  if (r.has("version")) {
    const auto v = r.integer("version", 1);
    if (v != kVersion && v != kStorageVersion)
      r.fail("version", fmt::format("only versions {} and {} are known", kVersion, kStorageVersion),
             ErrorCode::kUnsupported);
  }
  return r.status();
}

nlohmann::ordered_json side_json(const Layout& layout) {
  std::vector<std::int32_t> ranks;
  for (const Rank r : layout.mesh().ranks()) ranks.push_back(r.value);
  std::vector<std::string> placements;
  for (const auto& p : layout.placements()) placements.push_back(p.to_string());
  return {{"mesh", layout.mesh().shape()}, {"ranks", ranks}, {"placements", placements}};
}

// Version 2's storage maps, when the manifest has them.
[[nodiscard]] Result<std::optional<StorageMaps>> read_storage(const Json& j, const ReshardProblem& problem) {
  if (!json_fields::has(j, "storage")) return std::optional<StorageMaps>{};
  const Json* storage = REFIT_TRY(json_fields::require_object(j, "storage", ""));
  REFIT_TRY(json_fields::require_known_keys(*storage, "storage", {"source", "destination"}));
  const Json* source = REFIT_TRY(json_fields::require_object(*storage, "source", "storage"));
  const Json* destination = REFIT_TRY(json_fields::require_object(*storage, "destination", "storage"));
  return StorageMaps{
      .source = REFIT_TRY(parse_storage(*source, "storage.source", problem, true)),
      .destination = REFIT_TRY(parse_storage(*destination, "storage.destination", problem, false))};
}

[[nodiscard]] Result<ReshardProblem> read_problem(const Json& j) {
  REFIT_TRY(json_fields::require_known_keys(
      j, "", {"format", "version", "source_ranks", "destination_ranks", "tensors", "storage"},
      "the manifest"));
  json_fields::FieldReader r(j, "", limits::kMaxRanks);
  REFIT_TRY(check_header(r, j));
  const auto sources = r.integer("source_ranks", 1);
  const auto destinations = r.integer("destination_ranks", 1);
  REFIT_TRY(r.status());
  const Json* array = REFIT_TRY(json_fields::require_array(j, "tensors", ""));
  if (std::ssize(*array) > limits::kMaxTensors)
    return out_of_range(fmt::format("tensors: {} tensors, more than the {} refit plans in one problem",
                                    array->size(), limits::kMaxTensors));
  std::vector<TensorReshard> tensors;
  std::int64_t positions = 0;
  for (std::size_t i = 0; i < array->size(); ++i)
    tensors.push_back(REFIT_TRY(
        read_tensor((*array)[i], element("tensors", i), static_cast<std::int32_t>(sources), positions)));
  return ReshardProblem::make(std::move(tensors), static_cast<std::int32_t>(sources),
                              static_cast<std::int32_t>(destinations));
}

}  // namespace

Result<Manifest> parse_manifest_with_storage(std::string_view json_text) {
  const auto j = REFIT_TRY(json_fields::parse_object(json_text, "manifest"));
  auto problem = REFIT_TRY(read_problem(j));
  auto storage = REFIT_TRY(read_storage(j, problem));
  return Manifest{.problem = std::move(problem), .storage = std::move(storage)};
}

Result<ReshardProblem> parse_manifest(std::string_view json_text) {
  return REFIT_TRY(parse_manifest_with_storage(json_text)).problem;
}

Result<Manifest> load_manifest_with_storage(const std::filesystem::path& path) {
  const auto text = REFIT_TRY(read_text_file(path));
  return REFIT_TRY_IN(parse_manifest_with_storage(text), path.string());
}

Result<ReshardProblem> load_manifest(const std::filesystem::path& path) {
  return REFIT_TRY(load_manifest_with_storage(path)).problem;
}

// One tensor (and one rank's storage) per line, so manifests diff and grep well; written as it
// goes, so that a version 2 manifest of a model with one tensor per expert (Kimi-K2: 9M regions)
// is never held whole in memory.
void write_manifest(const ReshardProblem& problem, const StorageMaps* storage, std::ostream& out) {
  out << fmt::format(
      "{{\"format\":\"{}\",\"version\":{},\"source_ranks\":{},\"destination_ranks\":{},"
      "\"tensors\":[\n",
      kFormat, storage != nullptr ? kStorageVersion : kVersion, problem.source_ranks(),
      problem.destination_ranks());
  const auto& tensors = problem.tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    nlohmann::ordered_json tensor{{"name", t.tensor.name},
                                  {"shape", t.tensor.shape},
                                  {"dtype", std::string(dtype_name(t.tensor.dtype))}};
    if (t.tensor.quantization) tensor["quantization"] = quantization_json(*t.tensor.quantization);
    tensor["source"] = side_json(t.source);
    tensor["destination"] = side_json(t.destination);
    out << tensor.dump() << (i + 1 < tensors.size() ? ",\n" : "\n");
  }
  if (storage == nullptr) {
    out << "]}\n";
    return;
  }
  out << "],\n\"storage\":{";
  for (const auto* side : {&storage->source, &storage->destination}) {
    out << fmt::format("{}\"{}\":{{\"framework\":{},\"ranks\":[\n", side == &storage->source ? "" : ",\n",
                       side == &storage->source ? "source" : "destination",
                       nlohmann::ordered_json(side->framework).dump());
    for (std::size_t i = 0; i < side->ranks.size(); ++i)
      out << rank_storage_json(*side, i, problem).dump() << (i + 1 < side->ranks.size() ? ",\n" : "\n");
    out << "]}";
  }
  out << "}}\n";
}

std::string write_manifest(const ReshardProblem& problem, const StorageMaps* storage) {
  std::ostringstream out;
  write_manifest(problem, storage, out);
  return std::move(out).str();
}

Result<void> save_manifest(const ReshardProblem& problem, const std::filesystem::path& path,
                           const StorageMaps* storage) {
  return write_file(path, [&](std::ostream& out) { write_manifest(problem, storage, out); });
}

}  // namespace refit::models
