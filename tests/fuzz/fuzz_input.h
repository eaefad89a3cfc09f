#pragma once
// What every fuzz target shares: the input as text, and the one rule a target checks besides
// "no crash, no leak, no undefined behaviour" (the sanitizers check those): a refused input is
// bad input, never a runtime failure or an internal error, and its message is not empty.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

#include "refit/core/error.h"

namespace refit::fuzz {

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input read from the front, a byte at a time; zeros once it runs out, so that every input
// describes something.
struct ByteReader {
  std::span<const std::uint8_t> rest;
  std::uint8_t next() {
    if (rest.empty()) return 0;
    const auto b = rest.front();
    rest = rest.subspan(1);
    return b;
  }
};

// Aborts (a finding) unless `r` is a value or a bad-input error that says something.
template <class T>
void expect_clean(const Result<T>& r) {
  if (r) return;
  if (r.error().is_bad_input() && !r.error().message.empty()) return;
  std::fprintf(stderr, "refused with a %s error: '%s'\n",
               std::string(error_code_name(r.error().code)).c_str(), r.error().message.c_str());
  std::abort();
}

}  // namespace refit::fuzz
