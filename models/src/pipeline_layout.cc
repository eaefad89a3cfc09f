#include "pipeline_layout.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace refit::models {
namespace {

// Far beyond any model (DeepSeek-V3 has 61 layers) and small enough to unroll in memory.
constexpr std::size_t kMaxLayoutChars = std::size_t{1} << 20;

struct Repeat {
  std::string_view group;
  std::size_t count = 0;
  std::size_t end = 0;  // just past the digits
};

// A match at `i` of `\(([^)]+)\)\*(\d+)` (parenthesised) or `(.)\*(\d+)`, as Python's re finds
// it: "[^)]+" runs to the first ')', "\d+" takes every digit. A count beyond size_t is refused
// by the caller through `overflow`.
std::optional<Repeat> repeat_at(std::string_view s, std::size_t i, bool parenthesised, bool& overflow) {
  std::size_t close = i;  // the group is (i, close) when parenthesised, [i, i+1) otherwise
  if (parenthesised) {
    if (s[i] != '(') return std::nullopt;
    close = s.find(')', i + 1);
    if (close == std::string_view::npos || close == i + 1) return std::nullopt;
  } else if (s[i] == '\n') {
    return std::nullopt;
  }
  const auto star = close + 1;
  if (star + 1 >= s.size() || s[star] != '*' || s[star + 1] < '0' || s[star + 1] > '9') return std::nullopt;
  Repeat r{
      .group = parenthesised ? s.substr(i + 1, close - i - 1) : s.substr(i, 1), .count = 0, .end = star + 1};
  while (r.end < s.size() && s[r.end] >= '0' && s[r.end] <= '9') ++r.end;
  const auto [ptr, ec] = std::from_chars(s.data() + star + 1, s.data() + r.end, r.count);
  overflow = ec != std::errc{};
  return r;
}

// One pass of re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), s).
Result<std::string> unroll(std::string_view s, bool parenthesised, std::string_view layout) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    bool overflow = false;
    const auto r = repeat_at(s, i, parenthesised, overflow);
    if (!r) {
      out += s[i++];
      continue;
    }
    const auto text = s.substr(i, r->end - i);
    if (overflow || (!r->group.empty() && r->count > (kMaxLayoutChars - out.size()) / r->group.size()))
      return out_of_range(
          fmt::format("layout={}: '{}' unrolls to more than {} characters", layout, text, kMaxLayoutChars));
    for (std::size_t k = 0; k < r->count; ++k) out += r->group;
    i = r->end;
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> parse_pipeline_layout(std::string_view layout) {
  std::string s;
  for (const char c : layout)
    if (c != ',') s += c;  // "purely cosmetic commas"
  auto unrolled = unroll(s, true, layout);
  if (unrolled) unrolled = unroll(*unrolled, false, layout);
  if (!unrolled) return std::unexpected(unrolled.error());
  std::vector<std::string> stages;
  for (std::size_t from = 0;;) {
    const auto bar = std::min(unrolled->find('|', from), unrolled->size());
    stages.push_back(unrolled->substr(from, bar - from));
    for (const char c : stages.back())
      if (std::string_view("EtmL").find(c) == std::string_view::npos)
        return parse_error(
            fmt::format("layout={}: invalid layer character '{}' in stage '{}' (known: E embedding, t "
                        "decoder layer, m MTP layer, L loss)",
                        layout, c, stages.back()));
    if (bar == unrolled->size()) break;
    from = bar + 1;
  }
  return stages;
}

}  // namespace refit::models
