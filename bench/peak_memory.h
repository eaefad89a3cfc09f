#pragma once
// Peak resident memory of a benchmark's timed part: Linux keeps the process's high-water mark
// (VmHWM in /proc/self/status), and writing 5 to /proc/self/clear_refs resets it to the memory
// resident now. Without procfs both read 0 and the counter says nothing.
#include <cstdint>
#include <fstream>
#include <string>

namespace refit::bench {

inline void reset_peak_memory() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The high-water mark since the last reset, in bytes.
inline std::int64_t peak_memory_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // reported in kB
  return 0;
}

}  // namespace refit::bench
