#include "refit/core/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

Result<std::string> read_text_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
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

Result<std::ofstream> open_output_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::is_directory(status)) return invalid(fmt::format("{}: is a directory, not a file", path.string()));
  if (fs::is_block_file(status) || fs::is_socket(status))
    return invalid(fmt::format("{}: a disk device or a socket, not a file", path.string()));
  // Opening a FIFO no process reads would block; without blocking, it fails (ENXIO) instead. The
  // probe stays open until the stream is: closed before, it would leave the reader a FIFO with no
  // writer, which it reads as the end, and the stream's open would wait for it forever.
  int probe = -1;
  if (fs::is_fifo(status)) {
    probe = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (probe < 0) return invalid(fmt::format("{}: a FIFO that no process reads", path.string()));
  }
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const int opened = errno;
  if (probe >= 0) ::close(probe);
  if (!out)
    return invalid(fmt::format("{}: cannot be created{}", path.string(),
                               opened != 0 ? fmt::format(": {}", std::strerror(opened)) : ""));
  return out;
}

Result<void> close_output_file(std::ofstream& out, const std::filesystem::path& path) {
  if (out) out.flush();
  if (out.is_open()) out.close();
  if (!out)
    return fail(ErrorCode::kRuntime,
                fmt::format("{}: cannot be written{}", path.string(),
                            errno != 0 ? fmt::format(": {}", std::strerror(errno)) : ""));
  return {};
}

Result<void> write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  auto out = REFIT_TRY(open_output_file(path));
  errno = 0;
  write(out);
  return close_output_file(out, path);
}

}  // namespace refit
