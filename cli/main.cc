// The refit command: the only place that reads the process environment, prints errors and
// chooses exit codes (0 ok, 2 bad input, 1 runtime failure).
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "command.h"
#include "refit/core/utf8.h"
#include "say.h"

namespace {

using refit::cli::say;

constexpr std::string_view kStdoutFailed = "writing standard output failed (a full disk, a closed pipe?)";

// A standard descriptor the caller left closed would be the next file refit opens (an output),
// and what refit prints would land in that file. Each is opened onto a device instead: stdin and
// stderr onto /dev/null (nothing to read; messages dropped), stdout onto /dev/full, so that results
// printed to a closed stdout still fail the command (exit 1), as they did.
void open_closed_standard_descriptors() {
  constexpr std::array<std::pair<int, const char*>, 3> kDevices{
      {{STDIN_FILENO, "/dev/null"}, {STDOUT_FILENO, "/dev/full"}, {STDERR_FILENO, "/dev/null"}}};
  for (const auto& [fd, device] : kDevices) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int opened = ::open(device, fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

refit::Result<void> out_of_memory(const std::string& name) {
  return refit::fail(
      refit::ErrorCode::kRuntime,
      fmt::format("out of memory: refit {} needs more memory for this problem than it was "
                  "given (a smaller problem, or --jobs 1 where the command has it, holds less)",
                  name));
}

// `code`, once all `who` printed reached standard output; a write that failed (a full disk) is a
// runtime failure (1), not a success with its output lost.
int after_flushing_stdout(std::string_view who, int code) {
  std::cout.flush();
  if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0 && std::cout.good()) return code;
  say("{}: error: {}\n", who, kStdoutFailed);
  return 1;
}

// The action's result; running out of memory or threads (a problem larger than this machine) is
// a runtime failure with a message, as any other, not an abort.
refit::Result<void> run_action(const std::string& name, const refit::cli::Action& action) {
  try {
    return action();
  } catch (const std::bad_alloc&) {
    return out_of_memory(name);
  } catch (const std::length_error&) {  // a container asked for more than it can hold
    return out_of_memory(name);
  } catch (const std::exception& e) {
    // fmt::print throws when standard output cannot take what the command prints.
    if (std::ferror(stdout) != 0) return refit::fail(refit::ErrorCode::kRuntime, std::string(kStdoutFailed));
    return refit::fail(refit::ErrorCode::kInternal, fmt::format("internal error: {}", e.what()));
  } catch (...) {
    return refit::fail(refit::ErrorCode::kInternal, "internal error: an exception of unknown type");
  }
}

}  // namespace

int main(int argc, char** argv) {
  open_closed_standard_descriptors();
  CLI::App app{
      "refit: plan, predict and perform the transfer of sharded model weights between two "
      "parallel layouts (training -> inference)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "refit 0.1.0");
  std::map<std::string, refit::cli::Action> actions;
  actions["layout"] = refit::cli::add_layout_command(app);
  actions["topo"] = refit::cli::add_topo_command(app);
  actions["models"] = refit::cli::add_models_command(app);
  actions["plan"] = refit::cli::add_plan_command(app);
  actions["simulate"] = refit::cli::add_simulate_command(app);
  actions["sweep"] = refit::cli::add_sweep_command(app);
  actions["run"] = refit::cli::add_run_command(app);
  actions["calibrate"] = refit::cli::add_calibrate_command(app);

  if (argc > 1 && argv[1][0] != '-' && !actions.contains(argv[1])) {
    std::vector<std::string> names;
    for (const auto& [name, _] : actions) names.push_back(name);
    say("refit: error: unknown command '{}' (expected one of: {})\n", refit::escaped_line(argv[1]),
        fmt::join(names, ", "));
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return after_flushing_stdout("refit", app.exit(e));  // --help, --version
    // Every bad-input message starts "refit <cmd>: error:", CLI11's own included.
    const std::string command = argc > 1 && actions.contains(argv[1]) ? fmt::format(" {}", argv[1]) : "";
    say("refit{}: error: {}\n", command, refit::escaped_line(e.what()));
    return 2;
  }
  for (const auto* sub : app.get_subcommands()) {
    const auto result = run_action(sub->get_name(), actions.at(sub->get_name()));
    if (!result) {
      say("refit {}: error: {}\n", sub->get_name(), refit::escaped_line(result.error().message));
      return result.error().is_bad_input() ? 2 : 1;
    }
    if (const int code = after_flushing_stdout(fmt::format("refit {}", sub->get_name()), 0); code != 0)
      return code;
  }
  return 0;
}
