#pragma once
// Collective steps (an executor's prepare, `refit run` before it) must fail on every rank or on
// none: a rank that refuses alone leaves the others waiting for it forever. So each step's local
// outcome goes through the bootstrap before anyone moves on.
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/bootstrap.h"

namespace refit {

// Every rank's payload, or on every rank an error naming the ranks that failed and why (a rank
// that failed itself returns its own error). The others report the code of the first rank that
// refused with bad input (kMismatch, kOutOfRange, ...), so bad input anywhere stays bad input;
// when every failure was at runtime, kPeerFailed.
[[nodiscard]] Result<std::vector<std::string>> agree(Bootstrap& bootstrap, const Result<std::string>& mine);

// What a rank must have alike with every other rank (its plan's hash, its staging, the options
// that change what it does), by name: "plan hash", "--iterations".
struct Setting {
  std::string name;
  std::string value;
};
// One rank's settings as one contribution to agree().
std::string encode_settings(const std::vector<Setting>& settings);
// Ranks whose settings differ refuse before any byte moves (kMismatch), naming the first setting
// they differ on and which ranks have which value; a contribution that is not encode_settings'
// is kRuntime naming its rank.
[[nodiscard]] Result<void> check_same_settings(const std::vector<std::string>& contributions);

}  // namespace refit
