#include "refit/core/utf8.h"

#include <cstdint>

#include <fmt/format.h>

namespace refit {
namespace {

// A lead byte: the sequence length it starts and the range of the byte after it (Unicode 15,
// table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF). n == 0: not a lead byte.
struct Lead {
  std::size_t n = 0;
  std::uint8_t lo = 0x80, hi = 0xBF;
};

Lead lead_of(std::uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {};
}

// The length of the well-formed sequence at text[i], or 0.
std::size_t sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(text[k]); };
  if (byte(i) < 0x80) return 1;
  const Lead lead = lead_of(byte(i));
  if (lead.n == 0 || i + lead.n > text.size()) return 0;
  if (byte(i + 1) < lead.lo || byte(i + 1) > lead.hi) return 0;
  for (std::size_t k = 2; k < lead.n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return lead.n;
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto n = sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string printable(std::string_view text) {
  std::string out;
  for (const char c : valid_utf8(text))
    out += is_control_character(static_cast<unsigned char>(c)) ? std::string_view("\xEF\xBF\xBD")
                                                               : std::string_view(&c, 1);
  return out;
}

namespace {

// Whether the well-formed sequence `s` is a bidirectional embedding, override or isolate.
bool is_bidi_control(std::string_view s) {
  if (s.size() != 3 || static_cast<unsigned char>(s[0]) != 0xE2) return false;
  const auto b1 = static_cast<unsigned char>(s[1]);
  const auto b2 = static_cast<unsigned char>(s[2]);
  return (b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9);
}

}  // namespace

std::string escaped_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto n = sequence_length(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (n == 0 || is_control_character(c))
      out += fmt::format("\\x{:02x}", c);
    else if (is_bidi_control(text.substr(i, n)))
      out += fmt::format("\\u{{{:04x}}}", (static_cast<unsigned>(text[i + 1]) & 0x3F) << 6 |
                                              (static_cast<unsigned>(text[i + 2]) & 0x3F) | 0x2000);
    else
      out += text.substr(i, n);
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto n = sequence_length(text, i);
    out += n == 0 ? std::string_view("\xEF\xBF\xBD") : text.substr(i, n);
    i += n == 0 ? 1 : n;
  }
  return out;
}

}  // namespace refit
