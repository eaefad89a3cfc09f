#pragma once
// Runs the built `refit` binary and captures its exit code, stdout and stderr, so CLI tests
// exercise the real command-line contract.
#include <string>

#include "shell.h"

namespace refit::testing {

using CliResult = ShellResult;

inline CliResult run_refit(const std::string& args) {
  return run_shell(std::string(REFIT_CLI_PATH) + " " + args);
}

}  // namespace refit::testing
