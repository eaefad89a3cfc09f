#include "vectors.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace refit::testing {
namespace {

std::vector<std::uint8_t> base64_decode(std::string_view text) {
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<std::uint8_t> out;
  std::uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    const auto at = kAlphabet.find(c);
    if (at == std::string_view::npos) continue;  // '=' padding
    bits = (bits << 6) | static_cast<std::uint32_t>(at);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<std::uint8_t>(bits >> count));
    }
  }
  return out;
}

Expected expected_of(const nlohmann::json& j) {
  const auto values = base64_decode(j.at("values").get<std::string>());
  const auto scales = base64_decode(j.at("scales").get<std::string>());
  Expected e{values, std::vector<std::byte>(scales.size())};
  for (std::size_t i = 0; i < scales.size(); ++i) e.scales[i] = static_cast<std::byte>(scales[i]);
  return e;
}

std::vector<VectorCase> load() {
  // The environment's REFIT_TEST_DATA_DIR first: the GPU tests run where they were not built.
  const char* dir = std::getenv("REFIT_TEST_DATA_DIR");
  std::ifstream in(std::string(dir ? dir : REFIT_TEST_DATA_DIR) + "/quantize/vectors.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto data = nlohmann::json::parse(text.str());
  std::vector<VectorCase> cases;
  for (const auto& c : data.at("cases")) {
    VectorCase v{.name = c.at("name"), .shape = c.at("shape").get<Shape>()};
    const auto bytes = base64_decode(c.at("input").get<std::string>());
    for (std::size_t i = 0; i + 1 < bytes.size(); i += 2)
      v.input.push_back(static_cast<std::uint16_t>(bytes[i] | (bytes[i + 1] << 8)));  // little-endian
    v.block128 = expected_of(c.at("expected").at("fp8-block128"));
    v.mxfp8 = expected_of(c.at("expected").at("mxfp8"));
    cases.push_back(std::move(v));
  }
  if (cases.empty()) throw std::runtime_error("no quantize vectors");
  return cases;
}

}  // namespace

const std::vector<VectorCase>& reference_vectors() {
  static const std::vector<VectorCase> cases = load();
  return cases;
}

double e4m3_value(std::uint8_t code) {
  // sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal: m/8 * 2^-6.
  if ((code & 0x7F) == 0x7F) return std::numeric_limits<double>::quiet_NaN();
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 7;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return code & 0x80 ? -magnitude : magnitude;
}

Expected quantize_view(QuantScheme scheme, const Bf16View& view) {
  Expected out{std::vector<std::uint8_t>(static_cast<std::size_t>(element_count(view.shape))),
               std::vector<std::byte>(static_cast<std::size_t>(scale_buffer_bytes(scheme, view.shape)))};
  quantize(scheme, view, out.values, out.scales);
  return out;
}

}  // namespace refit::testing
