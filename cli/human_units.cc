#include "human_units.h"

#include <cmath>

#include <fmt/format.h>

namespace refit::cli {

std::string human(Seconds s) {
  const double v = s.value;
  if (v == 0) return "0 s";
  if (std::fabs(v) < 1e-3) return fmt::format("{:.1f} us", v * 1e6);
  if (std::fabs(v) < 1) return fmt::format("{:.2f} ms", v * 1e3);
  return fmt::format("{:.3f} s", v);
}

std::string human(Bytes b) {
  const auto v = static_cast<double>(b.value);
  constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  double x = v;
  while (std::fabs(x) >= 1000 && u < 4) {
    x /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b.value) : fmt::format("{:.2f} {}", x, kUnits[u]);
}

std::string ratio(Seconds time, Seconds of, std::string_view unit) {
  return of.value > 0 ? fmt::format("{:.3f}{}", time / of, unit) : std::string("-");
}

}  // namespace refit::cli
