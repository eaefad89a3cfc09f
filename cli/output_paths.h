#pragma once
// An output a command writes must not be a file the same command reads: written over, the input
// would be lost to a file of another kind (a model's config.json replaced by a plan).
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "refit/core/error.h"

namespace refit::cli {

struct InputFile {
  std::string_view option;     // how the command was given it, e.g. "--model"
  std::filesystem::path path;  // the file read; empty when the option was not given
};

// Refuses `path` (given as `option`) when it is one of `inputs`, naming both.
[[nodiscard]] Result<void> check_not_an_input(std::string_view option, const std::string& path,
                                              std::span<const InputFile> inputs);

}  // namespace refit::cli
