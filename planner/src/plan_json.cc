#include "refit/planner/plan_json.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace refit {
namespace {

using Json = nlohmann::json;
constexpr std::string_view kFormat = "refit-plan";
constexpr int kVersion = 1;

Json segment_json(const Segment& s) {
  return Json{{"tensor", s.tensor}, {"offset", s.box.offset}, {"extent", s.box.extent}, {"via", s.via}};
}

// Typed field access that reports the JSON path of whatever is missing or mistyped.
template <class T>
Result<T> field(const Json& j, std::string_view key, const std::string& path) {
  const auto at = fmt::format("{}.{}", path, key);
  if (!j.is_object() || !j.contains(key)) return invalid(fmt::format("{}: missing", at));
  try {
    return j.at(key).get<T>();
  } catch (const Json::exception&) {
    return invalid(fmt::format("{}: wrong type ({})", at, j.at(key).type_name()));
  }
}

#define REFIT_TRY_ASSIGN(var, expr)                         \
  auto var##_result = (expr);                               \
  if (!var##_result) return std::unexpected(var##_result.error()); \
  auto var = std::move(*var##_result)

Result<Segment> parse_segment(const Json& j, const std::string& path) {
  REFIT_TRY_ASSIGN(tensor, field<std::uint32_t>(j, "tensor", path));
  REFIT_TRY_ASSIGN(offset, field<Shape>(j, "offset", path));
  REFIT_TRY_ASSIGN(extent, field<Shape>(j, "extent", path));
  REFIT_TRY_ASSIGN(via, field<std::int32_t>(j, "via", path));
  if (offset.size() != extent.size())
    return invalid(fmt::format("{}: offset has {} dims, extent {}", path, offset.size(), extent.size()));
  return Segment{tensor, Box{std::move(offset), std::move(extent)}, via};
}

Result<Transfer> parse_transfer(const Json& j, const std::string& path) {
  REFIT_TRY_ASSIGN(id, field<std::int32_t>(j, "id", path));
  REFIT_TRY_ASSIGN(from, field<std::int32_t>(j, "from", path));
  REFIT_TRY_ASSIGN(to, field<std::int32_t>(j, "to", path));
  REFIT_TRY_ASSIGN(link_name, field<std::string>(j, "link", path));
  REFIT_TRY_ASSIGN(bytes, field<std::int64_t>(j, "bytes", path));
  REFIT_TRY_ASSIGN(chunk, field<std::int64_t>(j, "chunk", path));
  REFIT_TRY_ASSIGN(segments, field<Json>(j, "segments", path));
  auto link = parse_link_kind(link_name);
  if (!link) return std::unexpected(std::move(link.error()).in(path + ".link"));
  if (!segments.is_array()) return invalid(path + ".segments: not an array");
  Transfer t{id, Rank{from}, Rank{to}, *link, {}, Bytes{bytes}, Bytes{chunk}};
  for (std::size_t k = 0; k < segments.size(); ++k) {
    auto s = parse_segment(segments[k], fmt::format("{}.segments[{}]", path, k));
    if (!s) return std::unexpected(s.error());
    t.segments.push_back(std::move(*s));
  }
  return t;
}

Result<TensorSpec> parse_tensor(const Json& j, const std::string& path) {
  REFIT_TRY_ASSIGN(name, field<std::string>(j, "name", path));
  REFIT_TRY_ASSIGN(shape, field<Shape>(j, "shape", path));
  REFIT_TRY_ASSIGN(dtype_name, field<std::string>(j, "dtype", path));
  auto dtype = parse_dtype(dtype_name);
  if (!dtype) return std::unexpected(std::move(dtype.error()).in(path + ".dtype"));
  auto spec = make_tensor_spec(std::move(name), std::move(shape), *dtype);
  if (!spec) return std::unexpected(std::move(spec.error()).in(path));
  return spec;
}

template <class T, class Parse>
Result<void> parse_array(const Json& j, std::string_view key, std::vector<T>& out, Parse parse) {
  REFIT_TRY_ASSIGN(items, field<Json>(j, key, "$"));
  if (!items.is_array()) return invalid(fmt::format("$.{}: not an array", key));
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto item = parse(items[i], fmt::format("$.{}[{}]", key, i));
    if (!item) return std::unexpected(item.error());
    out.push_back(std::move(*item));
  }
  return {};
}

}  // namespace

void write_plan_json(const Plan& plan, std::ostream& out) {
  Json j{{"format", kFormat}, {"version", kVersion}, {"strategy", plan.strategy},
         {"source_ranks", plan.source_ranks}, {"destination_ranks", plan.destination_ranks}};
  auto& tensors = j["tensors"] = Json::array();
  for (const auto& t : plan.tensors)
    tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", dtype_name(t.dtype)}});
  auto& transfers = j["transfers"] = Json::array();
  for (const auto& t : plan.transfers) {
    Json segments = Json::array();
    for (const auto& s : t.segments) segments.push_back(segment_json(s));
    transfers.push_back({{"id", t.id}, {"from", t.sender.value}, {"to", t.receiver.value},
                         {"link", link_kind_name(t.link)}, {"bytes", t.bytes.value},
                         {"chunk", t.chunk.value}, {"segments", std::move(segments)}});
  }
  out << j.dump() << '\n';
}

Result<Plan> parse_plan_json(std::string_view text) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid("plan is not valid JSON");
  REFIT_TRY_ASSIGN(format, field<std::string>(j, "format", "$"));
  REFIT_TRY_ASSIGN(version, field<int>(j, "version", "$"));
  if (format != kFormat || version != kVersion)
    return invalid(fmt::format("$.format: expected {} version {}, got {} version {}", kFormat, kVersion, format, version));
  Plan plan;
  REFIT_TRY_ASSIGN(strategy, field<std::string>(j, "strategy", "$"));
  REFIT_TRY_ASSIGN(source_ranks, field<std::int32_t>(j, "source_ranks", "$"));
  REFIT_TRY_ASSIGN(destination_ranks, field<std::int32_t>(j, "destination_ranks", "$"));
  plan.strategy = std::move(strategy);
  plan.source_ranks = source_ranks;
  plan.destination_ranks = destination_ranks;
  if (auto ok = parse_array(j, "tensors", plan.tensors, parse_tensor); !ok) return std::unexpected(ok.error());
  if (auto ok = parse_array(j, "transfers", plan.transfers, parse_transfer); !ok) return std::unexpected(ok.error());
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

#undef REFIT_TRY_ASSIGN
