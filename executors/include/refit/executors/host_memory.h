#pragma once
// How much host memory this process may still take, from the limits that end an allocation in a
// crash or a kill rather than an error: the address-space limit (ulimit -v, under which UCX's
// error path segfaulted on two 4 GiB shards), the control group's memory limit (the OOM killer),
// and for shared memory the free space of /dev/shm (where UCX puts the memory peers map; a full
// /dev/shm failed with "No resources are available"). Executors check an allocation against them
// before making it, so that it is refused naming the limit, what is free and the fix.
#include <optional>
#include <string>

#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit {

struct HostMemoryLimits {
  std::optional<Bytes> address_space_left;  // RLIMIT_AS less the process's mapped size; none: no limit
  std::optional<Bytes> cgroup_left;         // the control group's limit less its use; none: no limit
  std::optional<Bytes> shared_memory_free;  // /dev/shm's free bytes; none: no /dev/shm
};

// Read now from this process and system (getrlimit, /proc/self/status, /sys/fs/cgroup, statvfs).
HostMemoryLimits read_host_memory_limits();

// This host's physical memory (sysconf), limits::kMaxBytes where the system does not say.
Bytes physical_memory();

// kOutOfRange when `bytes` (of shared memory, `shared`, or private) exceed a limit: the message
// names the limit, what is left of it and how to raise it. `what` says what is being allocated.
[[nodiscard]] Result<void> check_host_memory(Bytes bytes, bool shared, const HostMemoryLimits& limits,
                                             const std::string& what);

// The error for a transport that could not start for want of shared memory (`cause`, its own
// message), saying how much /dev/shm has free and what to do: bad input when /dev/shm holds less
// than `needed`, else `cause` unchanged.
[[nodiscard]] Error shared_memory_shortage(Error cause, Bytes needed, const HostMemoryLimits& limits);

}  // namespace refit
