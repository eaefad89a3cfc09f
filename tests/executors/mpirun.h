#pragma once
// `refit run` under mpirun, as users start it, for the tests that launch processes.
#include <string>

#include "shell.h"

namespace refit::testing {

// The MPI tests' environment (REFIT_MPI_TEST_ENV in tests/CMakeLists.txt, which says why each
// variable is there), set on mpirun's command line.
inline constexpr const char* kMpiEnvironment = REFIT_MPI_ENVIRONMENT " ";

// mpirun -np N refit run ARGS, killed after `limit` seconds so that a hang fails instead of
// stalling the suite. `wrapper` runs in front of each process (e.g. to report its exit).
inline ShellResult refit_run(int np, const std::string& args, int limit = 60,
                             const std::string& mpirun_flags = "", const std::string& wrapper = "") {
  return run_shell(std::string(kMpiEnvironment) + "timeout -k 5 " + std::to_string(limit) + " " +
                   REFIT_MPIEXEC + " --oversubscribe " + mpirun_flags + " -np " + std::to_string(np) + " " +
                   wrapper + " " + REFIT_CLI_PATH + " run " + args);
}

}  // namespace refit::testing
