#pragma once
// Plans, problems and jobs number their ranks, tensors, transfers and tasks with signed integers
// (std::int32_t, byte offsets std::int64_t) because differences between them are meaningful;
// containers index with std::size_t. `at` is the one conversion, for ids already checked to be in
// range (a negative id is a bug, never input: plans are validated before they are used).
#include <cassert>
#include <concepts>
#include <cstddef>

namespace refit {

template <std::signed_integral Id>
constexpr std::size_t at(Id i) {
  assert(i >= 0);
  return static_cast<std::size_t>(i);
}

}  // namespace refit
