#include "refit/core/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

Result<std::string> read_text_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    return invalid(fmt::format("{}: cannot be looked up: {}", path.string(), ec.message()));
  if (!fs::exists(status)) return not_found(fmt::format("{}: no such file", path.string()));
  if (fs::is_directory(status)) return invalid(fmt::format("{}: is a directory, not a file", path.string()));
  if (!fs::is_regular_file(status))
    return invalid(
        fmt::format("{}: not a regular file (a pipe, device or socket is not read)", path.string()));
  const auto size = fs::file_size(path, ec);
  if (ec)
    return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be read: {}", path.string(), ec.message()));
  if (size > static_cast<std::uintmax_t>(limits::kMaxInputFileBytes))
    return out_of_range(fmt::format("{}: {} bytes, more than the {} bytes refit reads from one file",
                                    path.string(), size, limits::kMaxInputFileBytes));
  // Read to the end rather than to the size: files of /proc report 0 bytes and have more.
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be read", path.string()));
  std::string text;
  text.reserve(static_cast<std::size_t>(size));
  std::array<char, 1 << 16> block{};
  while (in.read(block.data(), block.size()) || in.gcount() > 0) {
    text.append(block.data(), static_cast<std::size_t>(in.gcount()));
    if (std::ssize(text) > limits::kMaxInputFileBytes)
      return out_of_range(fmt::format("{}: more than the {} bytes refit reads from one file", path.string(),
                                      limits::kMaxInputFileBytes));
  }
  if (in.bad()) return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be read", path.string()));
  return text;
}

namespace {

std::string system_reason(int error) { return error != 0 ? fmt::format(": {}", std::strerror(error)) : ""; }

// A name beside `path` that no other writer uses: this process's id and a count.
std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  static std::atomic<std::uint64_t> count{0};
  return path.parent_path() /
         fmt::format(".{}.refit-{}-{}", path.filename().string(), ::getpid(), count.fetch_add(1));
}

}  // namespace

Result<OutputFile> OutputFile::open(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::is_directory(status)) return invalid(fmt::format("{}: is a directory, not a file", path.string()));
  if (fs::is_block_file(status) || fs::is_socket(status))
    return invalid(fmt::format("{}: a disk device or a socket, not a file", path.string()));
  if (path.filename().empty()) return invalid(fmt::format("{}: names a folder, not a file", path.string()));
  // Opening a FIFO no process reads would block; without blocking, it fails (ENXIO) instead. The
  // probe stays open until the stream is: closed before, it would leave the reader a FIFO with no
  // writer, which it reads as the end, and the stream's open would wait for it forever.
  int probe = -1;
  if (fs::is_fifo(status)) {
    probe = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (probe < 0) return invalid(fmt::format("{}: a FIFO that no process reads", path.string()));
  }
  // /dev/stdout and /proc/self/fd/N name an open descriptor: what the shell redirected it to must
  // be written through it, not replaced under its name.
  const auto text = path.string();
  const bool descriptor = text.starts_with("/dev/") || text.starts_with("/proc/");
  const bool in_place = descriptor || fs::is_character_file(status) || fs::is_fifo(status);
  // A link is written through, as the shell's > does: the file put in place is its target.
  auto target = fs::is_symlink(fs::symlink_status(path, ec)) ? fs::weakly_canonical(path, ec) : path;
  if (ec) target = path;
  auto temporary = in_place ? fs::path{} : temporary_beside(target);
  errno = 0;
  std::ofstream out(in_place ? path : temporary, std::ios::binary | std::ios::trunc);
  const int opened = errno;
  if (probe >= 0) ::close(probe);
  if (!out) return invalid(fmt::format("{}: cannot be created{}", path.string(), system_reason(opened)));
  return OutputFile(path, std::move(target), std::move(temporary), std::move(out));
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temporary_(std::exchange(other.temporary_, {})),
      out_(std::move(other.out_)) {}

OutputFile::~OutputFile() {
  if (temporary_.empty()) return;
  out_.close();
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

Result<void> OutputFile::commit() {
  if (out_) out_.flush();
  const int written = errno;
  if (out_.is_open()) out_.close();
  if (!out_)
    return fail(ErrorCode::kRuntime,
                fmt::format("{}: cannot be written{}", path_.string(), system_reason(written)));
  if (temporary_.empty()) return {};
  std::error_code ec;
  // A file replaced keeps its permissions (a private file stays private).
  if (const auto old = std::filesystem::status(target_, ec); std::filesystem::exists(old))
    std::filesystem::permissions(temporary_, old.permissions(), ec);
  std::filesystem::rename(temporary_, target_, ec);
  if (ec)
    return fail(ErrorCode::kRuntime,
                fmt::format("{}: cannot be put in place: {}", path_.string(), ec.message()));
  temporary_.clear();
  return {};
}

Result<void> write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  auto out = REFIT_TRY(OutputFile::open(path));
  errno = 0;
  write(out.stream());
  return out.commit();
}

}  // namespace refit
