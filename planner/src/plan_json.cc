#include "refit/planner/plan_json.h"

#include <ostream>

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "refit/core/checked.h"
#include "refit/core/json_fields.h"
#include "refit/core/quantization_json.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/planner/strategy.h"

namespace refit {
namespace {

using Json = nlohmann::json;
constexpr std::string_view kFormat = "refit-plan";
constexpr int kVersion = 1;

Json segment_json(const Segment& s) {
  return Json{{"tensor", s.tensor}, {"offset", s.box.offset}, {"extent", s.box.extent}, {"via", s.via}};
}

using json_fields::FieldReader;

// Plans index tensors and ranks with int32 and count bytes with int64.
constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();

// Braced initialisers evaluate in order, so the first bad field is the one reported.
[[nodiscard]] Result<Segment> parse_segment(const Json& j, const std::string& path) {
  REFIT_TRY(json_fields::require_known_keys(j, path, {"tensor", "offset", "extent", "via"}));
  FieldReader f(j, path, kMaxIndex);
  FieldReader coordinates(j, path, limits::kMaxElements);  // a tensor's dims reach 2^48 elements
  Segment s{.tensor = static_cast<std::uint32_t>(f.integer("tensor", 0)),
            .box = Box{coordinates.integers("offset", 0), coordinates.integers("extent", 0)},
            .via = static_cast<std::int32_t>(f.integer("via", kFromSourceShard))};
  REFIT_TRY(f.status());
  REFIT_TRY(coordinates.status());
  if (s.box.offset.size() != s.box.extent.size())
    return invalid(
        fmt::format("{}: offset has {} dims, extent {}", path, s.box.offset.size(), s.box.extent.size()));
  return s;
}

[[nodiscard]] Result<Transfer> parse_transfer(const Json& j, const std::string& path) {
  REFIT_TRY(
      json_fields::require_known_keys(j, path, {"id", "from", "to", "link", "bytes", "chunk", "segments"}));
  FieldReader index(j, path, kMaxIndex);  // checked before the cast to 32 bits
  FieldReader f(j, path);
  Transfer t{.id = static_cast<std::int32_t>(index.integer("id", 0)),
             .sender = Rank{static_cast<std::int32_t>(index.integer("from", 0))},
             .receiver = Rank{static_cast<std::int32_t>(index.integer("to", 0))},
             .link = LinkKind{},
             .segments = {},
             .bytes = Bytes{f.integer("bytes", 0)},
             .chunk = Bytes{f.integer("chunk", 1)}};
  const auto link_name = f.string("link");
  const Json* segments = f.array("segments");
  REFIT_TRY(index.status());
  REFIT_TRY(f.status());
  t.link = REFIT_TRY_IN(parse_link_kind(link_name), f.path("link"));
  for (std::size_t k = 0; k < segments->size(); ++k)
    t.segments.push_back(
        REFIT_TRY(parse_segment((*segments)[k], json_fields::element(f.path("segments"), k))));
  return t;
}

[[nodiscard]] Result<TensorSpec> parse_tensor(const Json& j, const std::string& path) {
  REFIT_TRY(json_fields::require_known_keys(j, path, {"name", "shape", "dtype", "quantization"}));
  FieldReader f(j, path);
  auto name = f.string("name");
  auto shape = f.integers("shape", 0);
  const auto dtype_text = f.string("dtype");
  REFIT_TRY(f.status());
  const auto dtype = REFIT_TRY_IN(parse_dtype(dtype_text), f.path("dtype"));
  auto spec = REFIT_TRY_IN(make_tensor_spec(std::move(name), std::move(shape), dtype), path);
  spec.quantization = REFIT_TRY(read_quantization(j, path));
  return spec;
}

template <class T, class Parse>
[[nodiscard]] Result<void> parse_array(const Json& j, std::string_view key, std::vector<T>& out,
                                       Parse parse) {
  const Json* items = REFIT_TRY(json_fields::require_array(j, key, ""));
  out.reserve(items->size());
  for (std::size_t i = 0; i < items->size(); ++i)
    out.push_back(REFIT_TRY(parse((*items)[i], json_fields::element(std::string(key), i))));
  return {};
}

// A plan names its execution model; plans written before it did take their strategy's.
[[nodiscard]] Result<ExecutionModelId> execution_of(const std::string& strategy, const std::string& name) {
  if (name.empty()) {
    const auto known = find_strategy(strategy);
    return known ? (*known)->execution : ExecutionModelId::kRefitUcx;
  }
  if (const auto* model = find_execution_model(name)) return model->id;
  std::vector<std::string_view> names;
  for (const auto& m : execution_models()) names.push_back(m.name);
  return not_found(fmt::format("unknown execution model '{}' (expected {})", name, fmt::join(names, ", ")));
}

}  // namespace

void write_plan_json(const Plan& plan, std::ostream& out) {
  Json j{{"format", kFormat},
         {"version", kVersion},
         {"strategy", plan.strategy},
         {"execution_model", execution_model(plan.execution).name},
         {"source_ranks", plan.source_ranks},
         {"destination_ranks", plan.destination_ranks}};
  auto& tensors = j["tensors"] = Json::array();
  for (const auto& t : plan.tensors) {
    Json tensor{{"name", t.name}, {"shape", t.shape}, {"dtype", dtype_name(t.dtype)}};
    if (t.quantization) tensor["quantization"] = quantization_json(*t.quantization);
    tensors.push_back(std::move(tensor));
  }
  auto& transfers = j["transfers"] = Json::array();
  for (const auto& t : plan.transfers) {
    Json segments = Json::array();
    for (const auto& s : t.segments) segments.push_back(segment_json(s));
    transfers.push_back({{"id", t.id},
                         {"from", t.sender.value},
                         {"to", t.receiver.value},
                         {"link", link_kind_name(t.link)},
                         {"bytes", t.bytes.value},
                         {"chunk", t.chunk.value},
                         {"segments", std::move(segments)}});
  }
  out << j.dump() << '\n';
}

Result<Plan> parse_plan_json(std::string_view text) {
  const auto j = REFIT_TRY(json_fields::parse_object(text, "the plan"));
  FieldReader f(j, "", kMaxIndex);
  const auto format = f.string("format");
  const auto version = f.integer("version", 0);
  REFIT_TRY(f.status());
  if (format != kFormat || version != kVersion)
    // A refit plan of another version is well-formed, only beyond what this build reads.
    return fail(
        format != kFormat ? ErrorCode::kInvalidArgument : ErrorCode::kUnsupported,
        fmt::format("format: expected {} version {}, got {} version {}", kFormat, kVersion, format, version));
  REFIT_TRY(json_fields::require_known_keys(j, "",
                                            {"format", "version", "strategy", "execution_model",
                                             "source_ranks", "destination_ranks", "tensors", "transfers"},
                                            "the plan"));
  Plan plan;
  plan.strategy = f.label("strategy");
  if (f.has("strategy") && plan.strategy.empty()) f.fail("strategy", "is empty");
  if (!plan.strategy.empty() && !find_strategy(plan.strategy)) {
    std::vector<std::string_view> names;
    for (const auto& s : strategies()) names.push_back(s.name);
    f.fail("strategy",
           fmt::format(
               "'{:.40}{}' is none of refit's strategies ({}): label an edited or hand-made plan 'refit'",
               plan.strategy, plan.strategy.size() > 40 ? "..." : "", fmt::join(names, ", ")),
           ErrorCode::kNotFound);
  }
  const auto execution = f.label_or("execution_model", "");
  // Left out (plans written before it existed): the strategy's own. Given, it names one.
  if (f.has("execution_model") && execution.empty())
    f.fail("execution_model", "is empty (leave it out for the strategy's own)");
  plan.source_ranks = static_cast<std::int32_t>(f.integer("source_ranks", 0));
  plan.destination_ranks = static_cast<std::int32_t>(f.integer("destination_ranks", 0));
  REFIT_TRY(f.status());
  plan.execution = REFIT_TRY_IN(execution_of(plan.strategy, execution), "execution_model");
  REFIT_TRY(parse_array(j, "tensors", plan.tensors, parse_tensor));
  REFIT_TRY(parse_array(j, "transfers", plan.transfers, parse_transfer));
  return plan;
}

Result<Plan> load_plan_file(const std::string& path) {
  const auto text = REFIT_TRY(read_text_file(path));
  return REFIT_TRY_IN(parse_plan_json(text), path);
}

}  // namespace refit
