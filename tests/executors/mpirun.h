#pragma once
// `refit run` under mpirun, as users start it, for the tests that launch processes.
#include <string>

#include "shell.h"

namespace refit::testing {

// As root (CI containers) mpirun refuses to start without these; UCX stays on shared memory and
// loopback; under AddressSanitizer, MPI's and UCX's process-lifetime allocations are not leaks.
inline constexpr const char* kMpiEnvironment =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 UCX_TLS=self,sm,tcp "
    "ASAN_OPTIONS=detect_leaks=0 ";

// mpirun -np N refit run ARGS, killed after `limit` seconds so that a hang fails instead of
// stalling the suite. `wrapper` runs in front of each process (e.g. to report its exit).
inline ShellResult refit_run(int np, const std::string& args, int limit = 60,
                             const std::string& mpirun_flags = "", const std::string& wrapper = "") {
  return run_shell(std::string(kMpiEnvironment) + "timeout -k 5 " + std::to_string(limit) + " " +
                   REFIT_MPIEXEC + " --oversubscribe " + mpirun_flags + " -np " + std::to_string(np) + " " +
                   wrapper + " " + REFIT_CLI_PATH + " run " + args);
}

}  // namespace refit::testing
