#pragma once
// JSON text for stdout. Names refit prints come from files and command lines (a cluster named
// after its XML file, a NIC name from a dump); nlohmann throws on a string that is not UTF-8,
// so every JSON the command prints replaces such bytes with U+FFFD instead of aborting.
#include <string>

namespace refit::cli {

template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace refit::cli
