#pragma once
// Reading a whole input file (a manifest, plan, config, cluster file or topology dump), and
// writing one, with errors that name it. Only regular files are read, and only up to a cap, so
// that a FIFO, a device such as /dev/zero or a huge file is refused instead of blocking or
// exhausting memory. A file written is checked after its last byte is flushed and only then put
// in place, so that a full disk or a refusal half-way is an error, never a truncated file or a
// lost old one.
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

// A file written whole or not at all. A regular file (new, or replacing one) is written to a
// file of no name in its folder (O_TMPFILE), which commit() names ".<name>.refit-<pid>-<n>" and
// renames over it: until then, and for good when the writer fails, gives up or is killed, the old
// file is untouched and nothing else is left in the folder. Where the file system has no unnamed
// files, the temporary is made with that name at once and removed unless committed (a process
// killed meanwhile leaves it). It has the permissions of the file it replaces. Character devices
// (/dev/null), FIFOs being read and a path whose links name a descriptor (/dev/stdout redirected
// to a file) have no "whole" and are written in place. A symbolic link is written through, as the
// shell's > does: the file it names is replaced. open() refuses, with kInvalidArgument naming the
// path, an existing directory, disk device or socket, a FIFO that no process reads (opening it
// would block refit until one came), a chain of links that never ends, "-", or a file that cannot
// be created (no such folder, no permission: the system's reason is given).
class OutputFile {
 public:
  [[nodiscard]] static Result<OutputFile> open(const std::filesystem::path& path);
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;
  OutputFile(const OutputFile&) = delete;
  ~OutputFile();

  std::ostream& stream() { return out_; }
  // Flushes and closes the file and puts it in place; kRuntime, naming the path, when any write to
  // it, the flush, the close or the rename failed (then nothing is left at the path but what was
  // there before).
  [[nodiscard]] Result<void> commit();

 private:
  OutputFile(std::filesystem::path path, std::filesystem::path target, std::filesystem::path temporary,
             int unnamed, std::ofstream out)
      : path_(std::move(path)),
        target_(std::move(target)),
        temporary_(std::move(temporary)),
        unnamed_(unnamed),
        out_(std::move(out)) {}
  // Gives the unnamed file its temporary name: 0, or the system's error number.
  [[nodiscard]] int name_unnamed();
  std::filesystem::path path_;       // as given, for messages
  std::filesystem::path target_;     // what is replaced: path_, or the file a link at path_ names
  std::filesystem::path temporary_;  // empty when written in place; not yet a file while unnamed_
  int unnamed_ = -1;                 // the O_TMPFILE descriptor until commit() names it
  std::ofstream out_;
};

// Writes the file whole (OutputFile) with `write` filling it; kRuntime when any write, the flush,
// the close or the rename fails.
[[nodiscard]] Result<void> write_file(const std::filesystem::path& path,
                                      const std::function<void(std::ostream&)>& write);

}  // namespace refit
