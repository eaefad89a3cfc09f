#pragma once
// Looking a name up in a table of named entries (strategies, deployments, models, presets'
// keys...), and the table's names for the error that says what a name could have been: one piece
// of code for every table, so that the list an error gives is always the table's.
#include <functional>
#include <ranges>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace refit {

// The first entry of `table` whose `name` (a member or a function of an entry) is `wanted`;
// nullptr when none is.
template <std::ranges::contiguous_range Table, class Name>
const std::ranges::range_value_t<Table>* find_named(const Table& table, std::string_view wanted, Name name) {
  for (const auto& entry : table)
    if (std::string_view(std::invoke(name, entry)) == wanted) return &entry;
  return nullptr;
}

// Every entry's name, in table order, joined by ", ".
template <std::ranges::input_range Table, class Name>
std::string names_of(const Table& table, Name name) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += ", ";
    out += std::string_view(std::invoke(name, entry));
  }
  return out;
}

}  // namespace refit
