// refit._refit.Problem: a reshard problem loaded through the front door (load_problem), as the
// refit command's PROBLEM options load it.
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "path_caster.h"
#include "refit/core/try.h"
#include "refit/executors/framework_buffers.h"
#include "refit/models/builtin_models.h"
#include "refit/models/manifest.h"

namespace refit::python {
namespace {

using namespace nb::literals;

// (name, dtype, shape, offset, extent) of one non-empty box a rank holds or needs.
using ShardTuple = std::tuple<std::string, std::string, Shape, Shape, Shape>;

ProblemHandle load(const FsPath& model, const std::string& train, const std::string& infer,
                   const std::string& dtype, bool per_expert, bool mtp, const FsPath& manifest,
                   const std::string& quantize, const std::string& quantize_at) {
  const ProblemSource source{.model = model.bytes,
                             .train = train,
                             .infer = infer,
                             .model_options = {.dtype = dtype,
                                               .per_expert = per_expert,
                                               .mtp = mtp,
                                               .quantize = quantize,
                                               .quantize_at = quantize_at},
                             .manifest = manifest.bytes};
  auto [problem, notes] = unwrap([&]() -> Result<std::pair<ReshardProblem, std::vector<std::string>>> {
    nb::gil_scoped_release release;
    auto loaded = REFIT_TRY(load_problem(source));
    auto resolved =
        source.manifest.empty() ? REFIT_TRY(resolve_layouts(source)).notes : std::vector<std::string>{};
    return std::pair{std::move(loaded), std::move(resolved)};
  }());
  return ProblemHandle{.problem = std::make_shared<const ReshardProblem>(std::move(problem)),
                       .source = source,
                       .notes = std::move(notes)};
}

// A problem from manifest text (what Problem.from_manifest makes of a mapping, and
// Problem.from_layouts of layouts): no file to go back to, so a version 2 manifest's storage maps
// are kept with it now.
ProblemHandle parse(const std::string& text) {
  auto manifest = unwrap([&] {
    nb::gil_scoped_release release;
    return models::parse_manifest_with_storage(text);
  }());
  ProblemHandle handle{.problem = std::make_shared<const ReshardProblem>(std::move(manifest.problem))};
  if (manifest.storage) {
    const auto side = [&](models::StorageMap map) {
      return StorageHandle{.problem = handle.problem,
                           .map = std::make_shared<const models::StorageMap>(std::move(map))};
    };
    handle.storage->sides[0] = side(std::move(manifest.storage->destination));
    handle.storage->sides[1] = side(std::move(manifest.storage->source));
  }
  return handle;
}

}  // namespace

Result<StorageHandle> side_storage(const ProblemHandle& p, bool training) {
  nb::gil_scoped_release release;  // before the lock: a thread waiting for it must not hold the GIL
  std::lock_guard lock(p.storage->mutex);
  auto& side = p.storage->sides[training ? 1 : 0];
  if (!side) {
    if (p.source.model.empty() && p.source.manifest.empty())
      return invalid(
          "the problem has no framework storage maps (it was made from layouts or from a manifest "
          "without \"storage\"): hand over the rank's boxes with storage=\"logical\"");
    auto map = REFIT_TRY(load_storage(p.source, *p.problem, training));
    side = StorageHandle{.problem = p.problem,
                         .map = std::make_shared<const models::StorageMap>(std::move(map))};
  }
  return *side;
}

namespace {

// (tensor, box offset, box extent, offset, strides) of a region; offset and strides in elements
// of its parameter.
using RegionTuple = std::tuple<std::string, Shape, Shape, std::int64_t, Shape>;
// (name, shape, dtype, regions) of a parameter.
using ParameterTuple = std::tuple<std::string, Shape, std::string, std::vector<RegionTuple>>;

std::vector<ParameterTuple> parameters(const StorageHandle& s, std::int32_t rank) {
  const auto& storage = *unwrap(rank_storage(*s.map, Rank{rank}));
  std::vector<ParameterTuple> out;
  for (const auto& p : storage.parameters)
    out.emplace_back(p.name, p.shape, std::string(dtype_name(p.dtype)), std::vector<RegionTuple>{});
  for (const auto& r : storage.regions)
    std::get<3>(out[static_cast<std::size_t>(r.parameter)])
        .emplace_back(s.problem->tensors()[r.tensor].tensor.name, r.box.offset, r.box.extent, r.offset,
                      r.strides);
  return out;
}

std::vector<std::tuple<std::string, Shape, std::string>> tensors(const ProblemHandle& p) {
  std::vector<std::tuple<std::string, Shape, std::string>> out;
  for (const auto& t : p.problem->tensors())
    out.emplace_back(t.tensor.name, t.tensor.shape, std::string(dtype_name(t.tensor.dtype)));
  return out;
}

// The boxes a training rank holds (its source shards) or an inference rank needs (destination
// shards), empty ones left out: what a caller hands an executor, in tensor order.
std::vector<ShardTuple> shards(const ProblemHandle& p, std::int32_t rank) {
  const auto& problem = *p.problem;
  if (rank < 0 || rank >= problem.world_size())
    raise_error(Error{.code = ErrorCode::kOutOfRange,
                      .message = "rank " + std::to_string(rank) + " is not in the problem's " +
                                 std::to_string(problem.world_size()) + " ranks"});
  std::vector<ShardTuple> out;
  const bool source = problem.is_source(Rank{rank});
  for (const auto& t : problem.tensors()) {
    const Layout& layout = source ? t.source : t.destination;
    if (!layout.mesh().position_of_rank(Rank{rank}) || (source && !held_at_source(t.tensor))) continue;
    const Box box = unwrap(layout.local_box(Rank{rank}));
    if (box.empty()) continue;
    out.emplace_back(t.tensor.name, std::string(dtype_name(held_dtype(t.tensor, source))), t.tensor.shape,
                     box.offset, box.extent);
  }
  return out;
}

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (const auto& m : models::builtin_models()) names.emplace_back(m.name);
  return names;
}

}  // namespace

void bind_problem(nb::module_& m) {
  nb::class_<ProblemHandle>(m, "Problem",
                            "A reshard problem: every tensor with its training (source) and inference "
                            "(destination) layout. Training ranks are 0..source_ranks-1, inference ranks "
                            "follow them.")
      .def_static("load", &load, "model"_a = FsPath{}, "train"_a = "", "infer"_a = "", "dtype"_a = "",
                  "per_expert"_a = false, "mtp"_a = false, "manifest"_a = FsPath{}, "quantize"_a = "",
                  "quantize_at"_a = "landing",
                  "The problem of a model (a built-in name, a config.json or its directory) with "
                  "Megatron training sizes and vLLM inference sizes, or of a manifest; errors name the "
                  "option as the refit command spells it (--model, --train, --infer, --dtype, "
                  "--manifest).")
      .def_static("parse", &parse, "text"_a,
                  "The problem of a manifest given as JSON text (version 2 storage maps kept with it); "
                  "errors name the JSON path.")
      .def_prop_ro(
          "source_ranks", [](const ProblemHandle& p) { return p.problem->source_ranks(); }, "Training ranks.")
      .def_prop_ro(
          "notes", [](const ProblemHandle& p) { return p.notes; },
          "What loading decided that was not asked for (a placement vLLM would not keep), a sentence each.")
      .def_prop_ro(
          "destination_ranks", [](const ProblemHandle& p) { return p.problem->destination_ranks(); },
          "Inference ranks.")
      .def_prop_ro(
          "total_bytes", [](const ProblemHandle& p) { return p.problem->total_bytes().value; },
          "Bytes of all tensors (one copy of the model).")
      .def("tensors", &tensors, "(name, shape, dtype) of every tensor, in the problem's order.")
      .def("shards", &shards, "rank"_a,
           "(tensor, dtype, tensor shape, offset, extent) of every non-empty box the rank holds (a "
           "training rank) or needs (an inference rank), in tensor order.")
      .def(
          "manifest", [](const ProblemHandle& p) { return models::write_manifest(*p.problem); },
          "The problem as a manifest (JSON text, the format refit --manifest reads).")
      .def(
          "storage", [](const ProblemHandle& p, bool training) { return unwrap(side_storage(p, training)); },
          "training"_a,
          "How the training side (Megatron) or the inference side (vLLM) stores its shards in the "
          "framework's parameters: by the models' rules, or a version 2 manifest's maps.");
  nb::class_<StorageHandle>(m, "Storage",
                            "One side's framework parameters on every rank of that side, with the regions "
                            "of the logical tensors in them (refit models --storage).")
      .def_prop_ro(
          "framework", [](const StorageHandle& s) { return s.map->framework; }, "megatron or vllm.")
      .def_prop_ro(
          "first_rank", [](const StorageHandle& s) { return s.map->first_rank; },
          "The global rank of the side's first rank.")
      .def_prop_ro(
          "ranks", [](const StorageHandle& s) { return s.map->ranks.size(); }, "The side's ranks.")
      .def("parameters", &parameters, "rank"_a,
           "(name, shape, dtype, regions) of every parameter of a rank of the side, in the framework's "
           "order; a region is (tensor, box offset, box extent, offset, strides), offset and strides in "
           "elements of the parameter.");
  m.def("builtin_models", &builtin_model_names, "Names of the models compiled into refit.");
}

}  // namespace refit::python
