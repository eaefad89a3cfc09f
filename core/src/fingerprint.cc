#include "refit/core/fingerprint.h"

#include <bit>

namespace refit {
namespace {

// A 64-bit finaliser (the one of splitmix64): every bit of `x` moves every bit of the result.
constexpr std::uint64_t mixed(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void Fingerprint::add(std::uint64_t v) { h_ = std::rotl(h_, 27) * 0x9e3779b97f4a7c15ull ^ mixed(v); }

void Fingerprint::add(std::string_view s) {
  add(s.size());
  for (unsigned char c : s) add(std::uint64_t{c});
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
