#include "refit/executors/host_memory.h"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "refit/core/checked.h"

namespace refit {
namespace {

// A limit at or above this is "no limit" (cgroup v1 writes 2^63 rounded down to a page).
constexpr std::int64_t kUnlimited = std::int64_t{1} << 62;

std::optional<std::int64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stoll(text);
  } catch (...) {
    return std::nullopt;
  }
}

// VmSize of /proc/self/status, in bytes.
std::optional<std::int64_t> mapped_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmSize:")) {
      std::istringstream fields(line.substr(7));
      std::int64_t kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  return std::nullopt;
}

std::optional<Bytes> address_space_left() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const auto used = mapped_bytes().value_or(0);
  return Bytes{std::max<std::int64_t>(0, static_cast<std::int64_t>(limit.rlim_cur) - used)};
}

// cgroup v2 (memory.max, memory.current) or v1 (memory.limit_in_bytes, memory.usage_in_bytes).
std::optional<Bytes> cgroup_left() {
  for (const auto& [limit_file, use_file] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                  "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const auto limit = read_number(limit_file);
    if (!limit || *limit >= kUnlimited) continue;
    return Bytes{std::max<std::int64_t>(0, *limit - read_number(use_file).value_or(0))};
  }
  return std::nullopt;
}

std::optional<Bytes> shared_memory_free() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return std::nullopt;
  return Bytes{static_cast<std::int64_t>(fs.f_bavail) * static_cast<std::int64_t>(fs.f_frsize)};
}

// "1.50 GiB", or below a GiB "12.0 MiB", so that a nearly full /dev/shm does not read as 0.00 GiB.
std::string gib(Bytes b) {
  const auto bytes = static_cast<double>(b.value);
  return bytes < (1 << 30) ? fmt::format("{:.1f} MiB", bytes / (1 << 20))
                           : fmt::format("{:.2f} GiB", bytes / (1 << 30));
}

}  // namespace

HostMemoryLimits read_host_memory_limits() {
  return HostMemoryLimits{.address_space_left = address_space_left(),
                          .cgroup_left = cgroup_left(),
                          .shared_memory_free = shared_memory_free()};
}

Bytes physical_memory() {
  const auto pages = sysconf(_SC_PHYS_PAGES);
  const auto page = sysconf(_SC_PAGE_SIZE);
  return Bytes{pages > 0 && page > 0 ? std::int64_t{pages} * page : limits::kMaxBytes};
}

Result<void> check_host_memory(Bytes bytes, bool shared, const HostMemoryLimits& limits,
                               const std::string& what) {
  if (limits.address_space_left && bytes > *limits.address_space_left)
    return out_of_range(
        fmt::format("{}: {} would pass this process's address-space limit, which has {} left: raise "
                    "it (ulimit -v) or give the process fewer or smaller shards",
                    what, gib(bytes), gib(*limits.address_space_left)));
  if (limits.cgroup_left && bytes > *limits.cgroup_left)
    return out_of_range(
        fmt::format("{}: {} would pass the control group's memory limit, which has {} left: raise "
                    "it (docker --memory, systemd MemoryMax) or run fewer ranks on this host",
                    what, gib(bytes), gib(*limits.cgroup_left)));
  if (shared && limits.shared_memory_free && bytes > *limits.shared_memory_free)
    return out_of_range(
        fmt::format("{}: {} of shared memory, but /dev/shm has {} free: enlarge it (docker "
                    "--shm-size, or mount -o remount,size=... /dev/shm), free it, or run fewer "
                    "ranks on this host",
                    what, gib(bytes), gib(*limits.shared_memory_free)));
  return {};
}

Error shared_memory_shortage(Error cause, Bytes needed, const HostMemoryLimits& limits) {
  if (!limits.shared_memory_free || *limits.shared_memory_free >= needed) return cause;
  return Error{
      .code = ErrorCode::kOutOfRange,
      .message = fmt::format("{}: /dev/shm has {} free, less than the {} a UCX worker needs: enlarge it "
                             "(docker --shm-size, or mount -o remount,size=... /dev/shm) or free it",
                             cause.message, gib(*limits.shared_memory_free), gib(needed))};
}

}  // namespace refit
