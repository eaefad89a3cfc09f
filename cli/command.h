#pragma once
// The contract between main.cc and each subcommand: a command registers its options on a
// CLI11 subcommand and returns an action that does the work and reports failure as an Error.
// main.cc alone turns errors into exit codes (2 bad input, 1 runtime failure).
#include <functional>

#include <CLI/CLI.hpp>

#include "refit/core/error.h"

namespace refit::cli {

using Action = std::function<Result<void>()>;

// Each add_* registers one subcommand on `app` and returns the action to run when it is chosen.
Action add_layout_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_simulate_command(CLI::App& app);
Action add_sweep_command(CLI::App& app);
Action add_topo_command(CLI::App& app);
Action add_models_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_calibrate_command(CLI::App& app);

}  // namespace refit::cli
