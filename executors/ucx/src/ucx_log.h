#pragma once
// UCX prints its warnings and errors on stdout unless UCX_LOG_FILE names a file, and stdout is
// where refit's callers read its results (`refit run --json` prints one JSON object there, which a
// peer's warning about a killed process once broke). Given ExecutorOptions::on_transport_message,
// the UCX executor hands each of them there instead, a line each, and the caller decides where it
// goes; unless the user chose a log file.
#include <functional>
#include <string_view>

namespace refit::ucx_detail {

// From now on, UCX's messages of this process go to `sink` (the latest one given wins); with
// UCX_LOG_FILE set, UCX keeps writing there. Any thread, any number of times.
void forward_log_to(std::function<void(std::string_view)> sink);

}  // namespace refit::ucx_detail
