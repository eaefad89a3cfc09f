#include "refit/core/placement.h"

#include <cctype>
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

std::string Placement::to_string() const { return is_shard() ? fmt::format("S{}", dim) : "R"; }

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Result<Placement> parse_placement(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t == "r" || t == "replicate" || t == "replicate()") return Placement::replicate();
  std::string_view digits;
  if (t.size() >= 2 && t[0] == 's' && std::isdigit(static_cast<unsigned char>(t[1]))) {
    digits = std::string_view(t).substr(1);
  } else if (t.starts_with("shard(") && t.ends_with(")")) {
    digits = std::string_view(t).substr(6, t.size() - 7);
  }
  int dim = -1;
  const auto* end = digits.data() + digits.size();
  if (!digits.empty() && std::from_chars(digits.data(), end, dim).ptr == end && dim >= 0)
    return Placement::shard(dim);
  return parse_error(fmt::format("placement '{}' is not R or S<dim> (e.g. S0)", text));
}

Result<std::vector<Placement>> parse_placements(std::string_view comma_separated) {
  std::vector<Placement> out;
  std::size_t index = 0;
  while (true) {
    const auto comma = comma_separated.find(',');
    out.push_back(REFIT_TRY_IN(parse_placement(comma_separated.substr(0, comma)),
                               fmt::format("placements[{}]", index)));
    if (comma == std::string_view::npos) break;
    comma_separated.remove_prefix(comma + 1);
    ++index;
  }
  return out;
}

}  // namespace refit
