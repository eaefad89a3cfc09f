#include "resident_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace refit::cli {

std::optional<Bytes> resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("VmRSS:")) continue;
    std::istringstream fields(line.substr(6));
    std::int64_t kib = 0;
    if (fields >> kib) return Bytes{kib * 1024};  // the kernel prints it in kB (KiB)
  }
  return std::nullopt;
}

}  // namespace refit::cli
