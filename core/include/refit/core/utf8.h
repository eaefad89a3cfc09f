#pragma once
// UTF-8 validation for text that refit reads without a parser that checks it (XML attributes,
// file names): refit writes what it reads into JSON, and JSON text must be valid UTF-8. And the
// control characters that a name refit prints must not carry to a terminal.
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

// A C0 control character or DEL: a line break, an escape that a terminal would act on.
constexpr bool is_control_character(unsigned char c) { return c < 0x20 || c == 0x7f; }
constexpr bool has_control_character(std::string_view text) {
  for (const char c : text)
    if (is_control_character(static_cast<unsigned char>(c))) return true;
  return false;
}

// valid_utf8(text) with every control character written as U+FFFD too: a name taken from the
// machine (NVML, sysfs) that refit prints and writes into files it loads back.
std::string printable(std::string_view text);

// `text` as one line a terminal shows as it is: line breaks written \n and \r, other control
// characters and bytes that begin no well-formed sequence \xNN, and the bidirectional formatting
// characters (U+202A-U+202E, U+2066-U+2069), which reorder what follows them on screen, \u{NNNN}.
// For messages that quote their input: a name from a file cannot start a line of its own that a
// script reading stderr would believe, nor hide the text around it.
std::string escaped_line(std::string_view text);

}  // namespace refit
