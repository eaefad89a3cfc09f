#include "refit/core/fingerprint.h"

namespace refit {
namespace {
constexpr std::uint64_t kFnvPrime = 1099511628211ull;
}  // namespace

void Fingerprint::add(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h_ ^= (v >> (8 * i)) & 0xff;
    h_ *= kFnvPrime;
  }
}

void Fingerprint::add(std::string_view s) {
  add(s.size());
  for (unsigned char c : s) {
    h_ ^= c;
    h_ *= kFnvPrime;
  }
}

void Fingerprint::add(std::span<const std::int64_t> s) {
  add(s.size());
  for (auto v : s) add(static_cast<std::uint64_t>(v));
}

void Fingerprint::add(const TensorSpec& t) {
  add(t.name);
  add(t.shape);
  add(dtype_name(t.dtype));
  add(std::uint64_t{t.quantization.has_value()});
  if (!t.quantization) return;
  const auto& q = *t.quantization;
  add(quant_scheme_name(q.scheme));
  add(quant_site_name(q.site));
  add(dtype_name(q.from));
  add(q.scales_of);
  add(q.landing_of);
}

}  // namespace refit
