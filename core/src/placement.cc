#include "refit/core/placement.h"

#include <cctype>
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

std::string Placement::to_string() const {
  if (!is_shard()) return "R";
  if (chunk == 0) return fmt::format("S{}", dim);
  return start == 0 ? fmt::format("S{}:{}", dim, chunk) : fmt::format("S{}:{}@{}", dim, chunk, start);
}

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

template <class T>
bool parse_whole(std::string_view digits, T& value) {
  const auto* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  return !digits.empty() && ec == std::errc{} && ptr == end;  // out of range leaves value as it was
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
  const auto colon = digits.find(':');
  const auto at = digits.find('@');
  const bool has_chunk = colon != std::string_view::npos;
  const bool has_start = has_chunk && at != std::string_view::npos && at > colon;
  int dim = -1;
  std::int64_t chunk = 0;
  std::int64_t start = 0;
  const bool chunk_ok =
      !has_chunk ||
      (parse_whole(digits.substr(colon + 1, has_start ? at - colon - 1 : std::string_view::npos), chunk) &&
       chunk > 0);
  const bool start_ok = !has_start || (parse_whole(digits.substr(at + 1), start) && start <= 0);
  if (has_chunk) digits = digits.substr(0, colon);
  if (parse_whole(digits, dim) && dim >= 0 && chunk_ok && start_ok)
    return Placement::shard(dim, chunk, start);
  return parse_error(fmt::format(
      "placement '{}' is not R, S<dim>, S<dim>:<chunk> or S<dim>:<chunk>@<start <= 0> (e.g. S0, S0:128, "
      "S0:192@-512)",
      text));
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
