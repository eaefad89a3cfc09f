#pragma once
// Parsers for the compact command-line notations; errors name the option they came from.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit::cli {

// "10,7" -> {10, 7}. Every entry must be an integer >= min_value.
[[nodiscard]] Result<std::vector<std::int64_t>> parse_int_list(std::string_view text, std::string_view option,
                                                               std::int64_t min_value);
// "0,2" -> engines {0, 2}: engine indices (>= 0 and 32-bit); "" -> none.
[[nodiscard]] Result<std::vector<std::int32_t>> parse_engine_list(std::string_view text,
                                                                  std::string_view option);
// "3x2" -> {3, 2} (a comma works too); every axis >= 1.
[[nodiscard]] Result<std::vector<std::int64_t>> parse_mesh_shape(std::string_view text,
                                                                 std::string_view option);

// Option checks whose message says what is wanted ("must be > 0, got 0"), where CLI11's own
// print the range of a double. positive, non_negative, count_within and bytes_at_least are for
// integer options and take whole numbers only; seconds_within and fraction take any.
CLI::Validator positive();
// Refuses "": an empty name would otherwise read as the option left out (a default preset, a
// missing --model).
CLI::Validator non_empty();
CLI::Validator seconds_within(Seconds floor, Seconds ceiling);
// A count in [low, high] (processes, devices).
CLI::Validator count_within(std::int64_t low, std::int64_t high);
// A byte count of at least `floor` (a staging that holds one chunk).
CLI::Validator bytes_at_least(std::int64_t floor);
// A file to write: not empty, not a folder, in a folder that exists; checked at parsing, so that a
// typo is bad input before an expensive step rather than a failure after it.
CLI::Validator output_file();
CLI::Validator non_negative();
// A fraction in [0, 1]; unlike CLI::Range, it refuses nan, which compares false to both ends.
CLI::Validator fraction();
// A name `check` accepts (a strategy, an executor), refused at parsing with check's message, so
// that a misspelt name is not first found after an expensive step.
CLI::Validator accepted_by(std::function<Result<void>(std::string_view)> check, std::string kind);

}  // namespace refit::cli
