#include "output_paths.h"

#include <system_error>

#include <fmt/format.h>

namespace refit::cli {

Result<void> check_not_an_input(std::string_view option, const std::string& path,
                                std::span<const InputFile> inputs) {
  for (const auto& input : inputs) {
    std::error_code ec;  // an input that cannot be looked up is not the output
    if (!input.path.empty() && std::filesystem::equivalent(path, input.path, ec))
      return invalid(
          fmt::format("{}: {} is the file {} reads from; write elsewhere", option, path, input.option));
  }
  return {};
}

}  // namespace refit::cli
