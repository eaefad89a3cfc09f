#pragma once
// `refit run` under mpirun, as users start it, for the tests that launch processes.
#include <map>
#include <optional>
#include <regex>
#include <sstream>
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

// A wrapper in front of each process that reports its exit code and end (seconds since the epoch)
// on stderr; a process killed by a signal is passed on as such to mpirun.
inline const std::string kEndReporter =
    "sh -c '\"$@\"; rc=$?; echo \"refit-test: rank $OMPI_COMM_WORLD_RANK exit $rc at $(date +%s.%N)\" >&2; "
    "if [ $rc -gt 128 ]; then kill -KILL $$; fi; exit $rc' sh";

struct ProcessEnd {
  int exit_code = -1;
  double at = 0;
};

// What kEndReporter and `refit run --test-fault` (cli/run_faults.h) printed on stderr.
struct ProcessEnds {
  std::map<int, ProcessEnd> ends;  // by rank
  std::optional<double> fault_at;  // when the faulty rank acted
};

inline ProcessEnds process_ends(const std::string& err) {
  ProcessEnds out;
  std::istringstream lines(err);
  const std::regex end(R"(^refit-test: rank (\d+) exit (\d+) at ([0-9.]+)$)");
  const std::regex fault(R"(^refit-test: rank \d+ [a-z-]+ [a-z]+ at ([0-9.]+)$)");
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_match(line, m, end))
      out.ends[std::stoi(m[1])] = ProcessEnd{.exit_code = std::stoi(m[2]), .at = std::stod(m[3])};
    else if (std::regex_match(line, m, fault))
      out.fault_at = std::stod(m[1]);
  }
  return out;
}

}  // namespace refit::testing
