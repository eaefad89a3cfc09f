#pragma once
// UTF-8 validation for text that refit reads without a parser that checks it (XML attributes,
// file names): refit writes what it reads into JSON, and JSON text must be valid UTF-8.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace refit {

// The offset of the first byte that does not begin a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF included), or nullopt when all are valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// `text` with every byte that does not begin a well-formed sequence written as U+FFFD, so that
// a message quoting bytes from outside (a peer, a file) can always be shown.
std::string valid_utf8(std::string_view text);

}  // namespace refit
