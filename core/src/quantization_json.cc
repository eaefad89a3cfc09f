#include "refit/core/quantization_json.h"

#include "refit/core/json_fields.h"
#include "refit/core/try.h"

namespace refit {

using json_fields::Json;

Json quantization_json(const Quantization& q) {
  Json j{{"scheme", quant_scheme_name(q.scheme)},
         {"site", quant_site_name(q.site)},
         {"from", dtype_name(q.from)}};
  if (q.is_scales()) j["scales_of"] = q.scales_of;
  if (q.is_landing_copy()) j["landing_of"] = q.landing_of;
  return j;
}

Result<std::optional<Quantization>> read_quantization(const Json& tensor, const std::string& path) {
  if (!json_fields::has(tensor, "quantization")) return std::nullopt;
  const Json* q = REFIT_TRY(json_fields::require_object(tensor, "quantization", path));
  const auto at = json_fields::child(path, "quantization");
  REFIT_TRY(json_fields::require_known_keys(*q, at, {"scheme", "site", "from", "scales_of", "landing_of"}));
  json_fields::FieldReader f(*q, at);
  const auto scheme = f.string("scheme");
  const auto site = f.string_or("site", "sender");
  const auto from = f.string_or("from", "bf16");
  auto scales_of = f.string_or("scales_of", "");
  auto landing_of = f.string_or("landing_of", "");
  REFIT_TRY(f.status());
  return Quantization{.scheme = REFIT_TRY_IN(parse_quant_scheme(scheme), f.path("scheme")),
                      .site = REFIT_TRY_IN(parse_quant_site(site), f.path("site")),
                      .from = REFIT_TRY_IN(parse_dtype(from), f.path("from")),
                      .scales_of = std::move(scales_of),
                      .landing_of = std::move(landing_of)};
}

}  // namespace refit
