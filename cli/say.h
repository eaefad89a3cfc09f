#pragma once
// What refit says to a person (errors, notes, progress) goes to standard error, results alone to
// standard output. Standard error may be closed or full (a daemon, a full disk, a log reader that
// died): what cannot be written there is dropped, not thrown, so that the exit code still says how
// the command ended instead of an abort.
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace refit::cli {

// Writes `text` to stderr as it is, ignoring a failed write.
void write_stderr(std::string_view text);

// fmt::print(stderr, ...) whose failed write does not throw.
template <class... T>
void say(fmt::format_string<T...> format, T&&... args) {
  write_stderr(fmt::format(format, std::forward<T>(args)...));
}

}  // namespace refit::cli
