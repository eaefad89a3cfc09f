#pragma once
// Reading a whole input file (a manifest, plan, config, cluster file or topology dump), and
// writing one, with errors that name it. Only regular files are read, and only up to a cap, so
// that a FIFO, a device such as /dev/zero or a huge file is refused instead of blocking or
// exhausting memory. A file written is checked after its last byte is flushed, so that a full
// disk is an error and not a silently truncated file.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>

#include "refit/core/error.h"

namespace refit {

namespace limits {
// Bytes of one input file: 1 GiB, 20x the largest file refit writes for the reference problems
// (Kimi-K2's version 2 manifest, 48 MB; its gather-broadcast plan, 92 MB).
inline constexpr std::int64_t kMaxInputFileBytes = std::int64_t{1} << 30;
}  // namespace limits

// The file's bytes. kNotFound when it does not exist, kInvalidArgument for a directory or
// something that is not a regular file, kOutOfRange past limits::kMaxInputFileBytes, kRuntime
// when it cannot be read.
[[nodiscard]] Result<std::string> read_text_file(const std::filesystem::path& path);

// The file created (or truncated) for writing. kInvalidArgument, naming it, for an existing
// directory, disk device or socket, a FIFO that no process reads (opening it would block refit
// until one came), or a file that cannot be created (no such folder, no permission: the system's
// reason is given). Character devices (/dev/null) and FIFOs being read are written.
[[nodiscard]] Result<std::ofstream> open_output_file(const std::filesystem::path& path);

// Flushes and closes a file open_output_file opened at `path`; kRuntime, naming it, when any write
// to it, the flush or the close failed.
[[nodiscard]] Result<void> close_output_file(std::ofstream& out, const std::filesystem::path& path);

// Creates (or truncates) the file as open_output_file does and has `write` fill it; kRuntime when
// any write, the flush or the close fails.
[[nodiscard]] Result<void> write_file(const std::filesystem::path& path,
                                      const std::function<void(std::ostream&)>& write);

}  // namespace refit
