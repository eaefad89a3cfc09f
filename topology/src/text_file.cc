#include "text_file.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace refit::detail {

Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return not_found(fmt::format("{}: no such file", path.string()));
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof())
    return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be read", path.string()));
  return text.str();
}

}  // namespace refit::detail
