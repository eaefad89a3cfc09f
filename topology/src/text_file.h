#pragma once
// Reading a whole input file, with errors that name it.
#include <filesystem>
#include <string>

#include "refit/core/error.h"

namespace refit::detail {

// kNotFound when the file does not exist (bad input), kRuntime when it cannot be read.
[[nodiscard]] Result<std::string> read_text_file(const std::filesystem::path& path);

}  // namespace refit::detail
