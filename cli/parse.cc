#include "parse.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::cli {
namespace {

std::vector<std::string_view> split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const auto at = text.find_first_of(separators, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

[[nodiscard]] Result<std::vector<std::int64_t>> parse_numbers(std::string_view text, std::string_view option,
                                                              std::string_view separators,
                                                              std::int64_t min_value) {
  std::vector<std::int64_t> out;
  const auto parts = split(text, separators);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::int64_t v = 0;
    const auto part = parts[i];
    const auto* end = part.data() + part.size();
    const auto [ptr, ec] = std::from_chars(part.data(), end, v);
    if (!part.empty() && ec == std::errc::result_out_of_range && ptr == end)  // too large for int64
      return out_of_range(fmt::format("{}: entry {} '{}' of '{}' is not an integer", option, i, part, text));
    if (part.empty() || ec != std::errc{} || ptr != end)
      return parse_error(fmt::format("{}: entry {} '{}' of '{}' is not an integer", option, i, part, text));
    if (v < min_value)
      return out_of_range(fmt::format("{}: entry {} is {}, must be >= {}", option, i, v, min_value));
    out.push_back(v);
  }
  return out;
}

}  // namespace

Result<std::vector<std::int64_t>> parse_int_list(std::string_view text, std::string_view option,
                                                 std::int64_t min_value) {
  return parse_numbers(text, option, ",", min_value);
}

Result<std::vector<std::int32_t>> parse_engine_list(std::string_view text, std::string_view option) {
  std::vector<std::int32_t> out;
  if (text.empty()) return out;
  for (const auto e : REFIT_TRY(parse_int_list(text, option, 0))) {
    if (e > std::numeric_limits<std::int32_t>::max())
      return out_of_range(fmt::format("{}: engine {} is too large", option, e));
    out.push_back(static_cast<std::int32_t>(e));
  }
  return out;
}

Result<std::vector<std::int64_t>> parse_mesh_shape(std::string_view text, std::string_view option) {
  return parse_numbers(text, option, "x,", 1);
}

namespace {

// Digits too many for a 64-bit integer: an integer option would take them as the largest one there
// is (the conversion saturates) and go on, silently.
bool beyond_int64(std::string_view text) {
  const auto digits = text.substr(!text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
  std::int64_t v = 0;
  const auto* first = text.data() + (text[0] == '+' ? 1 : 0);
  return std::from_chars(first, text.data() + text.size(), v).ec == std::errc::result_out_of_range;
}

// What an option holds: a whole number (a count, bytes) takes only digits, since CLI11 reads "1.5"
// or "8e6" into an integer as a failed conversion that names neither what is wanted nor why.
enum class Number : std::uint8_t { kWhole, kReal };

CLI::Validator number_above(Number kind, double floor, bool inclusive, const char* name, std::string wanted,
                            double ceiling = std::numeric_limits<double>::max()) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool number = ec == std::errc{} && end == text.data() + text.size() && std::isfinite(v);
        if (!number) return fmt::format("expected a number {}, got '{}'", wanted, text);
        if (kind == Number::kWhole && text.find_first_of(".eE") != std::string::npos)
          return fmt::format("expected a whole number {}, got '{}'", wanted, text);
        // CLI11 reads an integer with a leading 0 as octal ("010" as 8) once this check passes.
        const auto digits = text.find_first_not_of("+-");
        if (digits != std::string::npos && digits + 1 < text.size() && text[digits] == '0' &&
            text[digits + 1] >= '0' && text[digits + 1] <= '9')
          return fmt::format("expected a decimal number {} without leading zeros, got '{}'", wanted, text);
        if (beyond_int64(text)) return fmt::format("must be {} and fit 64 bits, got {}", wanted, text);
        if ((inclusive ? v >= floor : v > floor) && v <= ceiling) return {};
        return fmt::format("must be {}, got {}", wanted, text);
      },
      name);
}

}  // namespace

CLI::Validator positive() { return number_above(Number::kWhole, 0, false, "POSITIVE", "> 0"); }
CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& text) { return text.empty() ? std::string("is empty") : std::string(); }, "TEXT");
}
CLI::Validator bytes_at_least(std::int64_t floor) {
  return number_above(Number::kWhole, static_cast<double>(floor), true, "BYTES", fmt::format(">= {}", floor));
}
CLI::Validator seconds_within(Seconds floor, Seconds ceiling) {
  return number_above(Number::kReal, floor.value, true, "SECONDS",
                      fmt::format(">= {:g} and <= {:g}", floor.value, ceiling.value), ceiling.value);
}
CLI::Validator count_within(std::int64_t low, std::int64_t high) {
  return number_above(Number::kWhole, static_cast<double>(low), true, "COUNT",
                      fmt::format("in [{}, {}]", low, high), static_cast<double>(high));
}
CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty()) return "is empty";
        const std::filesystem::path path(text);
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec))
          return fmt::format("'{}' is a folder; give a file in it", text);
        const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
        if (!std::filesystem::is_directory(folder, ec))
          return fmt::format("'{}': no folder '{}'", text, folder.string());
        return {};
      },
      "FILE");
}
CLI::Validator non_negative() { return number_above(Number::kWhole, 0, true, "NONNEGATIVE", ">= 0"); }
CLI::Validator fraction() { return number_above(Number::kReal, 0, true, "FRACTION", "in [0, 1]", 1.0); }
CLI::Validator accepted_by(std::function<Result<void>(std::string_view)> check, std::string kind) {
  return CLI::Validator(
      [check = std::move(check)](std::string& text) {
        const auto ok = check(text);
        return ok ? std::string() : ok.error().message;
      },
      std::move(kind));
}

}  // namespace refit::cli
