#pragma once
// Where the commands put a transport library's warnings and errors (ExecutorOptions::
// on_transport_message): on stderr with the other diagnostics, so that stdout holds results only.
#include <string_view>

namespace refit::cli {

// Prints `line` on stderr.
void print_transport_message(std::string_view line);

}  // namespace refit::cli
