// refit models: list the built-in models, or show one model and, with two layouts, what every
// training and inference rank holds.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "json_text.h"
#include "output_paths.h"
#include "parse.h"
#include "problem_options.h"
#include "refit/core/try.h"
#include "refit/core/utf8.h"
#include "refit/models/builtin_models.h"
#include "refit/models/hf_config.h"
#include "refit/models/manifest.h"
#include "refit/models/problem_builder.h"
#include "refit/models/rank_bytes.h"
#include "refit/models/storage_json.h"
#include "say.h"

namespace refit::cli {
namespace {

struct ModelsOptions {
  std::string model;
  std::string train;
  std::string infer;
  ModelOptions model_options;
  std::string write_manifest;
  bool storage = false;
  bool json = false;
};

using Json = nlohmann::ordered_json;

std::string gigabytes(Bytes b) { return fmt::format("{:.1f} GB", static_cast<double>(b.value) / 1e9); }

[[nodiscard]] Result<void> list_models(const ModelsOptions& o) {
  if (!o.train.empty() || !o.infer.empty() || !o.write_manifest.empty() || o.storage)
    return invalid("--train, --infer, --storage and --write-manifest need a MODEL");
  Json list = Json::array();
  for (const auto& builtin : models::builtin_models()) {
    const auto m = REFIT_TRY(models::builtin_model(builtin.name));
    list.push_back({{"name", m.name},
                    {"architecture", m.architecture},
                    {"params", m.parameter_count()},
                    {"bf16_bytes", m.parameter_count() * dtype_size(DType::kBF16)}});
  }
  if (o.json) {
    fmt::print("{}\n", json_text(Json{{"models", list}}));
    return {};
  }
  fmt::print("{:<18} {:<13} {:>15} {:>16}\n", "name", "architecture", "params", "bf16 bytes");
  for (const auto& m : list)
    fmt::print("{:<18} {:<13} {:>15} {:>16}  ({})\n", m["name"].get<std::string>(),
               m["architecture"].get<std::string>(), m["params"].get<std::int64_t>(),
               m["bf16_bytes"].get<std::int64_t>(), gigabytes(Bytes{m["bf16_bytes"].get<std::int64_t>()}));
  return {};
}

Json model_json(const models::ModelSpec& m) {
  const double share = static_cast<double>(m.projection_bytes().value) /
                       static_cast<double>(std::max<std::int64_t>(1, m.bytes().value));
  return {{"name", m.name},
          {"architecture", m.architecture},
          {"dtype", std::string(dtype_name(m.dtype))},
          {"params", m.parameter_count()},
          {"bytes", m.bytes().value},
          {"tensors", m.tensors.size()},
          {"projection_share", share}};
}

std::vector<std::int64_t> values(const std::vector<Bytes>& bytes) {
  std::vector<std::int64_t> out;
  for (const auto b : bytes) out.push_back(b.value);
  return out;
}

// With --quantize: how many weights are quantized where, and how many scales tensors travel. The
// model's bytes and tensors are the checkpoint's; the per-rank bytes are the quantized problem's.
Json quantization_json(const ReshardProblem& p) {
  std::map<std::string, std::int64_t> weights;
  for (const auto site :
       {QuantSite::kSender, QuantSite::kReceiver, QuantSite::kTraining, QuantSite::kLanding})
    weights[std::string(quant_site_name(site))] = 0;
  std::int64_t scales = 0;
  std::string scheme;
  for (const auto& t : p.tensors()) {
    const auto& q = t.tensor.quantization;
    if (!q || q->is_landing_copy()) continue;
    scheme = quant_scheme_name(q->scheme);
    ++(q->is_scales() ? scales : weights[std::string(quant_site_name(q->site))]);
  }
  return {{"scheme", scheme}, {"weights", weights}, {"scales_tensors", scales}};
}

void add_layouts(Json& out, const ParallelLayouts& layouts, const ReshardProblem& p) {
  const auto bytes = models::rank_bytes(p);
  if (std::ranges::any_of(p.tensors(),
                          [](const TensorReshard& t) { return t.tensor.quantization.has_value(); }))
    out["quantization"] = quantization_json(p);
  out["train"] = models::to_string(layouts.train);
  out["infer"] = models::to_string(layouts.infer);
  out["source_ranks"] = p.source_ranks();
  out["destination_ranks"] = p.destination_ranks();
  out["training_rank_bytes"] = values(bytes.source);
  out["inference_rank_bytes"] = values(bytes.destination);
}

// "max 4375648256 B (4.4 GB, rank 0)  min ..."; `first` is the global rank of index 0.
std::string extremes(const std::vector<std::int64_t>& bytes, std::int64_t first) {
  const auto hi = std::ranges::max_element(bytes);  // the first rank with the most
  const auto lo = std::ranges::min_element(bytes);
  return fmt::format("max {} B ({}, rank {})  min {} B ({}, rank {})", *hi, gigabytes(Bytes{*hi}),
                     first + (hi - bytes.begin()), *lo, gigabytes(Bytes{*lo}), first + (lo - bytes.begin()));
}

void print_model(const Json& j) {
  fmt::print("model           {} ({})\n", j["name"].get<std::string>(), j["architecture"].get<std::string>());
  fmt::print("params          {}\n", j["params"].get<std::int64_t>());
  fmt::print("bytes           {} ({}, {})\n", j["bytes"].get<std::int64_t>(), j["dtype"].get<std::string>(),
             gigabytes(Bytes{j["bytes"].get<std::int64_t>()}));
  fmt::print("tensors         {}\n", j["tensors"].get<std::size_t>());
  fmt::print("gate/up/down    {:.1f} % of bytes\n", 100 * j["projection_share"].get<double>());
  if (!j.contains("train")) return;
  const auto sources = j["source_ranks"].get<std::int64_t>();
  fmt::print("training        megatron {} ({} ranks)\n", j["train"].get<std::string>(), sources);
  fmt::print("inference       vllm {} ({} ranks, global {}..{})\n", j["infer"].get<std::string>(),
             j["destination_ranks"].get<std::int64_t>(), sources,
             sources + j["destination_ranks"].get<std::int64_t>() - 1);
  if (j.contains("quantization")) {
    const auto& q = j["quantization"];
    fmt::print(
        "quantized       {}: {} weights at the sender, {} at landing ranks, {} at the receiver, {} trained "
        "in fp8; {} scales tensors (bytes and tensors above: the checkpoint's; below: as each side holds "
        "them)\n",
        q["scheme"].get<std::string>(), q["weights"]["sender"].get<std::int64_t>(),
        q["weights"]["landing"].get<std::int64_t>(), q["weights"]["receiver"].get<std::int64_t>(),
        q["weights"]["training"].get<std::int64_t>(), q["scales_tensors"].get<std::int64_t>());
  }
  fmt::print("training rank   {}\n", extremes(j["training_rank_bytes"], 0));
  fmt::print("inference rank  {}\n", extremes(j["inference_rank_bytes"], sources));
  if (!j.contains("storage_counts")) return;
  for (const auto* side : {"training", "inference"})
    fmt::print("{:<15} {} parameters on its {} ranks (--json lists them with their regions)\n",
               fmt::format("{} storage", side == std::string_view("training") ? "train" : "infer"),
               j["storage_counts"][side]["parameters"].get<std::int64_t>(),
               j["storage_counts"][side]["ranks"].get<std::int64_t>());
}

// A side's parameters and ranks, what the text output says of its storage (the regions of a
// model with one tensor per expert are millions: only --json lists them).
Json storage_counts(const models::StorageMap& map) {
  std::int64_t parameters = 0;
  for (const auto& r : map.ranks) parameters += static_cast<std::int64_t>(r.parameters.size());
  return Json{{"parameters", parameters}, {"ranks", map.ranks.size()}};
}

// Both frameworks' parameters on every rank, with the regions of the logical tensors in them.
[[nodiscard]] Result<models::StorageMaps> storage_maps(const ProblemSource& source,
                                                       const ReshardProblem& problem) {
  return models::StorageMaps{.source = REFIT_TRY(load_storage(source, problem, true)),
                             .destination = REFIT_TRY(load_storage(source, problem, false))};
}

[[nodiscard]] Result<void> show_model(const ModelsOptions& o) {
  if (!o.write_manifest.empty()) {
    const InputFile model_file[] = {{"MODEL", models::hf_config_file(o.model)}};
    REFIT_TRY(check_not_an_input("--write-manifest", o.write_manifest, model_file));
  }
  const auto model = REFIT_TRY(load_model(o.model, o.model_options));
  Json out = model_json(model);
  const bool layouts = !o.train.empty() || !o.infer.empty() || !o.write_manifest.empty() || o.storage;
  if (layouts) {
    const ProblemSource source{
        .model = o.model, .train = o.train, .infer = o.infer, .model_options = o.model_options};
    const auto resolved = REFIT_TRY(resolve_layouts(source));
    const auto problem = REFIT_TRY(load_problem(source));
    for (const auto& note : resolved.notes) say("refit models: note: {}\n", escaped_line(note));
    add_layouts(out, resolved.layouts, problem);
    std::optional<models::StorageMaps> maps;
    if (o.storage) {
      maps = REFIT_TRY_IN(storage_maps(source, problem), "--storage");
      if (o.json)
        out["storage"] = {{"training", models::storage_json(maps->source, problem)},
                          {"inference", models::storage_json(maps->destination, problem)}};
      else
        out["storage_counts"] = {{"training", storage_counts(maps->source)},
                                 {"inference", storage_counts(maps->destination)}};
    }
    if (!o.write_manifest.empty())
      REFIT_TRY_IN(models::save_manifest(problem, o.write_manifest, maps ? &*maps : nullptr),
                   "--write-manifest");
  }
  o.json ? fmt::print("{}\n", json_text(out)) : print_model(out);
  return {};
}

}  // namespace

Action add_models_command(CLI::App& app) {
  auto opts = std::make_shared<ModelsOptions>();
  auto* cmd =
      app.add_subcommand("models",
                         "List the built-in models, or show one (built-in or HF config.json) and, with "
                         "--train and --infer, the bytes every rank holds");
  cmd->add_option("model", opts->model, "Built-in model name or path to an HF config.json");
  cmd->add_option("--train", opts->train, kTrainHelp);
  cmd->add_option("--infer", opts->infer, kInferHelp);
  add_model_options(cmd, opts->model_options);
  cmd->add_option("--write-manifest", opts->write_manifest,
                  "Write every tensor with its two layouts to this manifest file (version 2 with "
                  "--storage: each side's parameters too)")
      ->check(output_file());
  cmd->add_flag("--storage", opts->storage,
                "Also give each rank's framework parameters (Megatron's, vLLM's: fused qkv and gate/up, "
                "stacked experts, padded vocab) and where each tensor's box lies in them");
  cmd->add_flag("--json", opts->json, "Print one JSON object on stdout");
  return [opts]() { return opts->model.empty() ? list_models(*opts) : show_model(*opts); };
}

}  // namespace refit::cli
