#include "refit/executors/sequenced_bootstrap.h"

#include <array>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {
namespace {

// The prefix: 'r' 'f', the protocol version (4 bytes), the call's number (8 bytes), its kind.
constexpr std::size_t kPrefixBytes = 2 + 4 + 8 + 1;

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <class T>
T take(std::string_view in, std::size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

// By kind, as a message says it; a peer's kind beyond the table is shown as its number.
constexpr std::array<std::string_view, 2> kKindNames = {"an allgather", "a barrier"};

std::string call_text(std::uint64_t number, std::uint8_t kind) {
  return kind < kKindNames.size() ? fmt::format("collective call {} ({})", number, kKindNames[kind])
                                  : fmt::format("collective call {} (of kind {})", number, kind);
}

}  // namespace

Result<std::vector<std::string>> SequencedBootstrap::call(Kind kind, std::string_view mine) {
  const auto number = ++calls_;
  std::string prefixed("rf");
  put(prefixed, kExchangeProtocolVersion);
  put(prefixed, number);
  put(prefixed, static_cast<std::uint8_t>(kind));
  prefixed.append(mine);
  auto all = REFIT_TRY(inner_.allgather(prefixed));
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string_view part = all[r];
    if (part.size() < kPrefixBytes || part.substr(0, 2) != "rf")
      return fail(ErrorCode::kRuntime,
                  fmt::format("rank {}'s part of {} is not refit's ({} bytes): the exchange must hand every "
                              "rank's bytes back unchanged",
                              r, call_text(number, static_cast<std::uint8_t>(kind)), part.size()));
    const auto version = take<std::uint32_t>(part, 2);
    if (version != kExchangeProtocolVersion)
      return mismatch(
          fmt::format("rank {} speaks exchange protocol {}, this rank {}: every rank must run the "
                      "same refit version",
                      r, version, kExchangeProtocolVersion));
    const auto theirs = take<std::uint64_t>(part, 6);
    const auto their_kind = take<std::uint8_t>(part, 14);
    if (theirs != number || their_kind != static_cast<std::uint8_t>(kind))
      return mismatch(
          fmt::format("rank {} is at its {}, this rank at its {}: the ranks are out of step (an "
                      "option that changes what a rank does given on some ranks only?)",
                      r, call_text(theirs, their_kind), call_text(number, static_cast<std::uint8_t>(kind))));
    all[r].erase(0, kPrefixBytes);
  }
  return all;
}

Result<std::vector<std::string>> SequencedBootstrap::allgather(std::string_view mine) {
  return call(Kind::kAllgather, mine);
}

Result<void> SequencedBootstrap::barrier() {
  REFIT_TRY(call(Kind::kBarrier, {}));
  return {};
}

}  // namespace refit
