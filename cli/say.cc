#include "say.h"

#include <cstdio>

namespace refit::cli {

void write_stderr(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stderr) != text.size()) std::clearerr(stderr);
}

}  // namespace refit::cli
