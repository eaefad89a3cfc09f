#include "transport_messages.h"

#include <fmt/format.h>

namespace refit::cli {

void print_transport_message(std::string_view line) { fmt::print(stderr, "{}\n", line); }

}  // namespace refit::cli
