#pragma once
// Runs a shell command line and captures its exit code, stdout and stderr, so tests drive
// mpirun and `refit run` exactly as a user would.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace refit::testing {

struct ShellResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline ShellResult run_shell(const std::string& command) {
  static int serial = 0;
  const auto err_path =
      std::filesystem::temp_directory_path() /
      ("refit_shell_err_" + std::to_string(::getpid()) + "_" + std::to_string(serial++) + ".txt");
  const std::string cmd = "(" + command + ") 2>" + err_path.string();
  ShellResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream ss;
  ss << err.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace refit::testing
