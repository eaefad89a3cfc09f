#include "refit/planner/plan_json.h"

#include <fstream>
#include <sstream>

#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "refit/core/json_fields.h"

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
Result<Segment> parse_segment(const Json& j, const std::string& path) {
  FieldReader f(j, path, kMaxIndex);
  Segment s{static_cast<std::uint32_t>(f.integer("tensor", 0)),
            Box{f.integers("offset", 0), f.integers("extent", 0)},
            static_cast<std::int32_t>(f.integer("via", kFromSourceShard))};
  if (auto ok = f.status(); !ok) return std::unexpected(ok.error());
  if (s.box.offset.size() != s.box.extent.size())
    return invalid(
        fmt::format("{}: offset has {} dims, extent {}", path, s.box.offset.size(), s.box.extent.size()));
  return s;
}

Result<Transfer> parse_transfer(const Json& j, const std::string& path) {
  FieldReader f(j, path);
  Transfer t{static_cast<std::int32_t>(f.integer("id", 0)),
             Rank{static_cast<std::int32_t>(f.integer("from", 0))},
             Rank{static_cast<std::int32_t>(f.integer("to", 0))},
             LinkKind{},
             {},
             Bytes{f.integer("bytes", 0)},
             Bytes{f.integer("chunk", 1)}};
  const auto link_name = f.string("link");
  const Json* segments = f.array("segments");
  if (auto ok = f.status(); !ok) return std::unexpected(ok.error());
  if (t.id > kMaxIndex || t.sender.value > kMaxIndex || t.receiver.value > kMaxIndex)
    return invalid(fmt::format("{}: id, from and to must be <= {}", path, kMaxIndex));
  auto link = parse_link_kind(link_name);
  if (!link) return std::unexpected(std::move(link.error()).in(f.path("link")));
  t.link = *link;
  for (std::size_t k = 0; k < segments->size(); ++k) {
    auto s = parse_segment((*segments)[k], json_fields::element(f.path("segments"), k));
    if (!s) return std::unexpected(s.error());
    t.segments.push_back(std::move(*s));
  }
  return t;
}

Result<TensorSpec> parse_tensor(const Json& j, const std::string& path) {
  FieldReader f(j, path);
  auto name = f.string("name");
  auto shape = f.integers("shape", 0);
  const auto dtype_text = f.string("dtype");
  if (auto ok = f.status(); !ok) return std::unexpected(ok.error());
  auto dtype = parse_dtype(dtype_text);
  if (!dtype) return std::unexpected(std::move(dtype.error()).in(f.path("dtype")));
  auto spec = make_tensor_spec(std::move(name), std::move(shape), *dtype);
  if (!spec) return std::unexpected(std::move(spec.error()).in(path));
  return spec;
}

template <class T, class Parse>
Result<void> parse_array(const Json& j, std::string_view key, std::vector<T>& out, Parse parse) {
  auto items = json_fields::require_array(j, key, "");
  if (!items) return std::unexpected(items.error());
  out.reserve((*items)->size());
  for (std::size_t i = 0; i < (*items)->size(); ++i) {
    auto item = parse((**items)[i], json_fields::element(std::string(key), i));
    if (!item) return std::unexpected(item.error());
    out.push_back(std::move(*item));
  }
  return {};
}

}  // namespace

void write_plan_json(const Plan& plan, std::ostream& out) {
  Json j{{"format", kFormat},
         {"version", kVersion},
         {"strategy", plan.strategy},
         {"source_ranks", plan.source_ranks},
         {"destination_ranks", plan.destination_ranks}};
  auto& tensors = j["tensors"] = Json::array();
  for (const auto& t : plan.tensors)
    tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", dtype_name(t.dtype)}});
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
  auto j = json_fields::parse_object(text, "the plan");
  if (!j) return std::unexpected(j.error());
  FieldReader f(*j, "", kMaxIndex);
  const auto format = f.string("format");
  const auto version = f.integer("version", 0);
  if (auto ok = f.status(); !ok) return std::unexpected(ok.error());
  if (format != kFormat || version != kVersion)
    return invalid(
        fmt::format("format: expected {} version {}, got {} version {}", kFormat, kVersion, format, version));
  Plan plan;
  plan.strategy = f.string("strategy");
  plan.source_ranks = static_cast<std::int32_t>(f.integer("source_ranks", 0));
  plan.destination_ranks = static_cast<std::int32_t>(f.integer("destination_ranks", 0));
  if (auto ok = f.status(); !ok) return std::unexpected(ok.error());
  if (auto ok = parse_array(*j, "tensors", plan.tensors, parse_tensor); !ok)
    return std::unexpected(ok.error());
  if (auto ok = parse_array(*j, "transfers", plan.transfers, parse_transfer); !ok)
    return std::unexpected(ok.error());
  return plan;
}

Result<Plan> load_plan_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(ErrorCode::kNotFound, fmt::format("cannot open plan file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  auto plan = parse_plan_json(ss.str());
  if (!plan) return std::unexpected(std::move(plan.error()).in(path));
  return plan;
}

}  // namespace refit
