#include "refit/core/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

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

// A name beside `path` that no other writer uses: this process's id and a count. The file's own
// name is cut to leave room for them within a file name's 255 bytes (at a character's start).
std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  constexpr std::size_t kKeptNameBytes = 200;
  static std::atomic<std::uint64_t> count{0};
  auto name = path.filename().string();
  if (name.size() > kKeptNameBytes) {
    std::size_t cut = kKeptNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    name.resize(cut);
  }
  return path.parent_path() / fmt::format(".{}.refit-{}-{}", name, ::getpid(), count.fetch_add(1));
}

// Whether `path` names a descriptor of this process (/dev/stdout, /dev/fd/N, /proc/self/fd/N,
// /proc/<pid>/fd/N): what the shell redirected it to must be written through it, not replaced.
bool names_a_descriptor(const std::filesystem::path& path) {
  std::vector<std::string> parts;
  for (const auto& part : path.lexically_normal()) parts.push_back(part.string());
  const auto is_number = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (parts.size() == 3 && parts[0] == "/" && parts[1] == "dev")
    return parts[2] == "stdin" || parts[2] == "stdout" || parts[2] == "stderr";
  if (parts.size() == 4 && parts[0] == "/" && parts[1] == "dev" && parts[2] == "fd")
    return is_number(parts[3]);
  return parts.size() == 5 && parts[0] == "/" && parts[1] == "proc" &&
         (parts[2] == "self" || parts[2] == "thread-self" || is_number(parts[2])) && parts[3] == "fd" &&
         is_number(parts[4]);
}

// Whether `path` names a descriptor once the links of its folders are resolved too (a link `d`
// to /proc/self/fd makes `d/1` one).
bool reaches_a_descriptor(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto folder = fs::canonical(path.parent_path().empty() ? fs::path(".") : path.parent_path(), ec);
  if (!ec && names_a_descriptor(folder / path.filename())) return true;
  const auto absolute = fs::absolute(path, ec);
  return !ec && names_a_descriptor(absolute);
}

// What writing `path` writes: the end of its chain of links (the shell's > writes through links),
// and whether any step of the chain names a descriptor; a chain that never ends (a loop) is
// refused, as the shell's > refuses it. A broken chain ends at the missing file, which is made.
struct LinkEnd {
  std::filesystem::path file;
  bool descriptor = false;
};
Result<LinkEnd> follow_links(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  constexpr int kMaxLinks = 40;  // Linux's own limit on links followed in one lookup (ELOOP)
  LinkEnd end{.file = path, .descriptor = reaches_a_descriptor(path)};
  std::error_code ec;
  for (int hop = 0; fs::is_symlink(fs::symlink_status(end.file, ec)); ++hop) {
    if (hop == kMaxLinks)
      return invalid(fmt::format("{}: more than {} links in a row (a loop?)", path.string(), kMaxLinks));
    const auto next = fs::read_symlink(end.file, ec);
    if (ec) break;
    end.file = next.is_absolute() ? next : end.file.parent_path() / next;
    end.descriptor = end.descriptor || reaches_a_descriptor(end.file);
  }
  return end;
}

// The permissions of the file `target` replaces (0666 less the umask for a new one): a private
// file's contents are never readable by others on their way. The owner may write it whatever the
// old file allowed, since it is opened again to be written; commit() gives it the old file's
// permissions exactly.
mode_t mode_for(const std::filesystem::path& target) {
  std::error_code ec;
  const auto old = std::filesystem::status(target, ec);
  return std::filesystem::exists(old) ? (static_cast<mode_t>(old.permissions()) & 07777) | S_IWUSR : 0666;
}

std::string descriptor_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// Opens `out` on the file `fd` has open, through /proc/self/fd (a stream cannot take a descriptor);
// false where /proc is missing.
bool open_through(int fd, std::ofstream& out) {
  out.open(descriptor_path(fd), std::ios::binary | std::ios::trunc);
  return out.is_open();
}

// A file of no name in `target`'s folder, opened for writing through `out`; -1 where the file
// system (or a missing /proc) has none.
int open_unnamed(const std::filesystem::path& target, std::ofstream& out) {
  const auto folder = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  const int fd = ::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode_for(target));
  if (fd < 0 || open_through(fd, out)) return fd;
  ::close(fd);
  return -1;
}

// The named temporary, created with mode_for(target); one that exists (a link planted at its
// name) is refused. It is written through the descriptor that created it, so that a link swapped
// in meanwhile is not followed, or by its name where /proc is missing. 0, or the system's error
// number.
int open_named(const std::filesystem::path& temporary, const std::filesystem::path& target,
               std::ofstream& out) {
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_for(target));
  if (fd < 0) return errno;
  if (!open_through(fd, out)) out.open(temporary, std::ios::binary | std::ios::trunc);
  const int error = out.is_open() ? 0 : errno != 0 ? errno : EACCES;
  ::close(fd);
  if (error != 0) ::unlink(temporary.c_str());
  return error;
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
  // Many tools read "-" as standard output; a file of that name would surprise whoever meant it so.
  if (path == "-") return invalid("-: standard output is /dev/stdout here (./- names a file called '-')");
  // Only a regular file (or a new one) is replaced whole; a descriptor, a terminal, /dev/null or a
  // FIFO is written in place.
  auto [target, descriptor] = REFIT_TRY(follow_links(path));
  const bool in_place = descriptor || fs::is_character_file(status) || fs::is_fifo(status);
  // Opening a FIFO no process reads would block; without blocking, it fails (ENXIO) instead. The
  // probe stays open until the stream is: closed before, it would leave the reader a FIFO with no
  // writer, which it reads as the end, and the stream's open would wait for it forever.
  int probe = -1;
  if (fs::is_fifo(status)) {
    probe = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (probe < 0) return invalid(fmt::format("{}: a FIFO that no process reads", path.string()));
  }
  auto temporary = in_place ? fs::path{} : temporary_beside(target);
  std::ofstream out;
  int unnamed = -1;
  errno = 0;
  if (in_place)
    out.open(path, std::ios::binary | std::ios::trunc);
  else if (unnamed = open_unnamed(target, out); unnamed < 0)
    errno = open_named(temporary, target, out);
  const int opened = errno;
  if (probe >= 0) ::close(probe);
  if (!out.is_open())
    return invalid(fmt::format("{}: cannot be created{}", path.string(), system_reason(opened)));
  return OutputFile(path, std::move(target), std::move(temporary), unnamed, std::move(out));
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temporary_(std::exchange(other.temporary_, {})),
      unnamed_(std::exchange(other.unnamed_, -1)),
      out_(std::move(other.out_)) {}

OutputFile::~OutputFile() {
  out_.close();
  if (unnamed_ >= 0) {
    ::close(unnamed_);  // the file had no name: it is gone
    return;
  }
  if (temporary_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

int OutputFile::name_unnamed() {
  const int error = ::linkat(AT_FDCWD, descriptor_path(unnamed_).c_str(), AT_FDCWD, temporary_.c_str(),
                             AT_SYMLINK_FOLLOW) == 0
                        ? 0
                        : errno;
  ::close(std::exchange(unnamed_, -1));
  if (error != 0) temporary_.clear();  // nothing of that name to remove
  return error;
}

Result<void> OutputFile::commit() {
  if (out_) out_.flush();
  const int written = errno;
  if (out_.is_open()) out_.close();
  if (!out_)
    return fail(ErrorCode::kRuntime,
                fmt::format("{}: cannot be written{}", path_.string(), system_reason(written)));
  if (temporary_.empty()) return {};
  if (const int error = unnamed_ >= 0 ? name_unnamed() : 0; error != 0)
    return fail(ErrorCode::kRuntime,
                fmt::format("{}: cannot be put in place{}", path_.string(), system_reason(error)));
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
