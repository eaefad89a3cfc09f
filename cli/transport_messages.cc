#include "transport_messages.h"

#include "say.h"

namespace refit::cli {

void print_transport_message(std::string_view line) { say("{}\n", line); }

}  // namespace refit::cli
