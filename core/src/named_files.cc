#include "refit/core/named_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {
namespace {

// The longest file name Linux file systems take (NAME_MAX).
constexpr std::size_t kMaxFileName = 255;

bool kept(unsigned char c, bool first) {
  if (c == '.') return !first;
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string system_reason() { return std::strerror(errno); }

// Closes on every path out of a function that has not handed the descriptor on.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

[[nodiscard]] Result<void> write_bytes(int fd, std::span<const std::byte> bytes, const std::string& where) {
  while (!bytes.empty()) {
    const auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be written: {}", where, system_reason()));
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return {};
}

[[nodiscard]] Result<void> read_all(int fd, std::span<std::byte> out, const std::string& where) {
  while (!out.empty()) {
    const auto n = ::read(fd, out.data(), out.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be read: {}", where, system_reason()));
    if (n == 0) return mismatch(fmt::format("{}: ended early (it shrank while being read)", where));
    out = out.subspan(static_cast<std::size_t>(n));
  }
  return {};
}

// A write's refusals, whether found before it (check_write) or by its open (write).
std::unexpected<Error> exists_error(const std::string& where) {
  return invalid(fmt::format("{}: already exists; refit overwrites nothing unless asked", where));
}
std::unexpected<Error> link_error(const std::string& where) {
  return invalid(fmt::format("{}: is a symbolic link; refit follows none here", where));
}
std::unexpected<Error> not_one_link_error(const std::string& where) {
  return invalid(
      fmt::format("{}: not a regular file of one link; refit writes no file another path reaches", where));
}

}  // namespace

Result<std::string> encode_file_name(std::string_view name) {
  if (name.empty()) return invalid("an empty name has no file name");
  std::string out;
  out.reserve(name.size());
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (kept(c, i == 0))
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("%{:02X}", c);
  }
  if (out.size() > kMaxFileName)
    return out_of_range(
        fmt::format("'{:.40}...': its file name would be {} bytes, more than the {} a file "
                    "name may have",
                    name, out.size(), kMaxFileName));
  return out;
}

Result<std::string> decode_file_name(std::string_view file) {
  std::string out;
  for (std::size_t i = 0; i < file.size(); ++i) {
    const auto c = static_cast<unsigned char>(file[i]);
    if (c != '%') {
      if (!kept(c, i == 0)) return invalid(fmt::format("'{}' is not a file name refit makes", file));
      out.push_back(static_cast<char>(c));
      continue;
    }
    const int high = i + 2 < file.size() ? hex_value(file[i + 1]) : -1;
    const int low = i + 2 < file.size() ? hex_value(file[i + 2]) : -1;
    const auto decoded = static_cast<unsigned char>(high * 16 + low);
    if (high < 0 || low < 0 || kept(decoded, i == 0))
      return invalid(fmt::format("'{}' is not a file name refit makes", file));
    out.push_back(static_cast<char>(decoded));
    i += 2;
  }
  if (out.empty()) return invalid("an empty file name");
  return out;
}

Result<NamedFileFolder> NamedFileFolder::open(const std::filesystem::path& root, std::string_view sub,
                                              bool create) {
  const auto shown_root = root.string();
  if (create) {
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    if (ec == std::errc::not_a_directory || ec == std::errc::file_exists)
      return invalid(fmt::format("{}: is not a folder (or lies under a file)", shown_root));
    if (ec)
      return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be created: {}", shown_root, ec.message()));
  }
  Descriptor top{::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (top.fd < 0)
    return errno == ENOENT ? not_found(fmt::format("{}: no such folder", shown_root))
                           : fail(ErrorCode::kRuntime, fmt::format("{}: {}", shown_root, system_reason()));
  const std::string sub_name(sub);
  const auto path = root / sub_name;
  if (create && ::mkdirat(top.fd, sub_name.c_str(), 0755) != 0 && errno != EEXIST)
    return fail(ErrorCode::kRuntime,
                fmt::format("{}: cannot be created: {}", path.string(), system_reason()));
  const int fd = ::openat(top.fd, sub_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return NamedFileFolder(fd, path);
  if (errno == ENOENT) return not_found(fmt::format("{}: no such folder", path.string()));
  if (errno == ELOOP || errno == ENOTDIR)
    return invalid(
        fmt::format("{}: is a symbolic link or not a folder; refit opens no link here", path.string()));
  return fail(ErrorCode::kRuntime, fmt::format("{}: {}", path.string(), system_reason()));
}

NamedFileFolder::NamedFileFolder(NamedFileFolder&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

NamedFileFolder::~NamedFileFolder() {
  if (fd_ >= 0) ::close(fd_);
}

std::string NamedFileFolder::shown(std::string_view file) const {
  return (path_ / std::string(file)).string();
}

Result<void> NamedFileFolder::read(std::string_view name, std::span<std::byte> out) const {
  const auto file = REFIT_TRY_IN(encode_file_name(name), path_.string());
  const auto where = shown(file);
  // O_NONBLOCK: a FIFO opens at once (to be refused below) instead of waiting for a writer.
  Descriptor d{::openat(fd_, file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)};
  if (d.fd < 0) {
    if (errno == ENOENT) return not_found(fmt::format("{}: missing", where));
    if (errno == ELOOP) return link_error(where);
    return fail(ErrorCode::kRuntime, fmt::format("{}: {}", where, system_reason()));
  }
  struct stat st {};
  if (::fstat(d.fd, &st) != 0)
    return fail(ErrorCode::kRuntime, fmt::format("{}: {}", where, system_reason()));
  if (!S_ISREG(st.st_mode)) return invalid(fmt::format("{}: not a regular file", where));
  if (static_cast<std::uint64_t>(st.st_size) != out.size())
    return mismatch(fmt::format("{}: {} bytes, expected {}", where, st.st_size, out.size()));
  return read_all(d.fd, out, where);
}

Result<void> NamedFileFolder::check_write(std::string_view name, Overwrite overwrite) const {
  const auto file = REFIT_TRY_IN(encode_file_name(name), path_.string());
  const auto where = shown(file);
  struct stat st {};
  if (::fstatat(fd_, file.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return {};
    return fail(ErrorCode::kRuntime, fmt::format("{}: {}", where, system_reason()));
  }
  if (overwrite == Overwrite::kRefuse) return exists_error(where);
  if (S_ISLNK(st.st_mode)) return link_error(where);
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1) return not_one_link_error(where);
  return {};
}

Result<void> NamedFileFolder::write(std::string_view name, std::span<const std::byte> bytes,
                                    Overwrite overwrite) const {
  const NamedBytes one[] = {{.name = name, .bytes = bytes}};
  return write_all(one, overwrite);
}

Result<void> NamedFileFolder::write_all(std::span<const NamedBytes> files, Overwrite overwrite) const {
  struct Pending {
    std::string file, where, temporary;
  };
  std::vector<Pending> pending;
  // Written under names no encoded name has (a leading '.'), then renamed over the files (kAllow)
  // or linked to their names, which fails if anything has that name (kRefuse).
  const auto discard = [&] {
    for (const auto& p : pending) ::unlinkat(fd_, p.temporary.c_str(), 0);
  };
  std::vector<std::string> names;
  for (const auto& f : files) {
    REFIT_TRY(check_write(f.name, overwrite));
    names.push_back(REFIT_TRY_IN(encode_file_name(f.name), path_.string()));
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto where = shown(names[i]);
    auto temporary = write_temporary(names[i], files[i].bytes, where);
    if (!temporary) {
      discard();
      return std::unexpected(std::move(temporary).error());
    }
    pending.push_back({std::move(names[i]), std::move(where), std::move(*temporary)});
  }
  for (std::size_t i = 0; i < pending.size(); ++i) {
    auto placed = put_in_place(pending[i].temporary, pending[i].file, overwrite, pending[i].where);
    if (!placed) {
      discard();
      if (i == 0) return placed;
      return fail(placed.error().code, fmt::format("{} ({} of the {} files were already replaced)",
                                                   placed.error().message, i, pending.size()));
    }
  }
  discard();  // the temporaries' names of the files linked into place
  return {};
}

Result<std::string> NamedFileFolder::write_temporary(const std::string& file,
                                                     std::span<const std::byte> bytes,
                                                     const std::string& where) const {
  static std::atomic<std::uint64_t> count{0};
  auto temporary = fmt::format(".refit-{}-{}", ::getpid(), count.fetch_add(1));
  struct stat old {};
  const mode_t mode =
      ::fstatat(fd_, file.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 ? old.st_mode & 07777 : 0644;
  Descriptor d{::openat(fd_, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)};
  if (d.fd < 0)
    return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be created: {}", where, system_reason()));
  auto written = write_bytes(d.fd, bytes, where);
  if (written && ::close(d.release()) != 0)
    written = fail(ErrorCode::kRuntime, fmt::format("{}: cannot be written: {}", where, system_reason()));
  if (!written) {
    ::unlinkat(fd_, temporary.c_str(), 0);
    return std::unexpected(std::move(written).error());
  }
  return temporary;
}

Result<void> NamedFileFolder::put_in_place(const std::string& temporary, const std::string& file,
                                           Overwrite overwrite, const std::string& where) const {
  // A file replaced keeps its permissions (a private file stays private).
  if (struct stat old{};
      overwrite == Overwrite::kAllow && ::fstatat(fd_, file.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0)
    ::fchmodat(fd_, temporary.c_str(), old.st_mode & 07777, 0);
  const int done = overwrite == Overwrite::kAllow ? ::renameat(fd_, temporary.c_str(), fd_, file.c_str())
                                                  : ::linkat(fd_, temporary.c_str(), fd_, file.c_str(), 0);
  if (done == 0) return {};
  if (errno == EEXIST) return exists_error(where);
  return fail(ErrorCode::kRuntime, fmt::format("{}: cannot be put in place: {}", where, system_reason()));
}

}  // namespace refit
