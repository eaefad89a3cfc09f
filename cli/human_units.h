#pragma once
// Quantities for people: picks the unit that keeps three significant digits readable, so a
// 4-GPU toy refit and a 512-GPU one print equally well.
#include <string>
#include <string_view>

#include "refit/core/units.h"

namespace refit::cli {

std::string human(Seconds s);  // "812 us", "4.52 ms", "1.093 s"
std::string human(Bytes b);    // "633.9 KB", "42.13 GB" (decimal units, as GB/s elsewhere)
// "1.163" (and `unit` after it), or "-" where `of` is not positive (a problem with nothing to
// move has no bound).
std::string ratio(Seconds time, Seconds of, std::string_view unit = "");

}  // namespace refit::cli
