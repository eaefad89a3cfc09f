#pragma once
// UCX prints its warnings and errors on stdout unless UCX_LOG_FILE names a file, and stdout is
// where refit's callers read its results (`refit run --json` prints one JSON object there, which a
// peer's warning about a killed process once broke). The UCX executor sends them to stderr
// instead, a line each, unless the user chose a log file.
namespace refit::ucx_detail {

// Installs the handler once per process (any thread, any number of times); with UCX_LOG_FILE set,
// nothing.
void log_to_stderr();

}  // namespace refit::ucx_detail
