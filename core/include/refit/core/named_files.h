#pragma once
// Files named after things an input names (framework parameters, for `refit run --load-sources`
// and `--save-destinations`). A name from an input is never a path: it is encoded into one file
// name, which can neither leave the folder nor name the folder itself, and every file is opened
// relative to the folder without following symbolic links, so that a hostile name ('/etc/passwd',
// '../../x') or a link planted in the folder cannot read or write anything outside it.
//
// The encoding keeps ASCII letters, digits, '_', '-' and '.' (so 'decoder.layers.0.mlp.weight'
// is its own file name) and writes every other byte, and a leading '.', as '%' and two upper-case
// hex digits; it is reversible (decode_file_name) and never makes '.', '..' or a '/'.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "refit/core/error.h"

namespace refit {

// The file name of `name`: kInvalidArgument for an empty name, kOutOfRange when the encoding
// exceeds the 255 bytes a file name may have.
[[nodiscard]] Result<std::string> encode_file_name(std::string_view name);
// The name encode_file_name made `file` from; kInvalidArgument for a file name it never makes.
[[nodiscard]] Result<std::string> decode_file_name(std::string_view file);

// What a write may do to a file that is already there.
enum class Overwrite : bool { kRefuse, kAllow };

// One file of a write_all: its name (encoded as encode_file_name does) and its contents.
struct NamedBytes {
  std::string_view name;
  std::span<const std::byte> bytes;
};

// A folder of named files, opened once. Its own path is the caller's (links in it are followed
// like any path a user types); below it nothing is.
class NamedFileFolder {
 public:
  // Opens `root`/`sub` (sub: one plain file name such as "rank3"), creating both when `create`.
  // Errors name the folder: kNotFound when it is missing and not created, kInvalidArgument when
  // `sub` is a symbolic link or not a folder, or `root` is not a folder, kRuntime for the system's
  // other refusals.
  [[nodiscard]] static Result<NamedFileFolder> open(const std::filesystem::path& root, std::string_view sub,
                                                    bool create);
  NamedFileFolder(NamedFileFolder&& other) noexcept;
  NamedFileFolder& operator=(NamedFileFolder&&) = delete;
  NamedFileFolder(const NamedFileFolder&) = delete;
  ~NamedFileFolder();

  // Fills `out` from the file of `name`, which must be a regular file of exactly out.size()
  // bytes. Errors name the file: kNotFound, kMismatch for another size, kInvalidArgument for a
  // link or a non-regular file, kRuntime when reading fails.
  [[nodiscard]] Result<void> read(std::string_view name, std::span<std::byte> out) const;
  // Whether write(name, ..., overwrite) would be refused for its name or for what is there now, as
  // write() refuses it, without writing: a caller that writes many files checks them all first.
  [[nodiscard]] Result<void> check_write(std::string_view name, Overwrite overwrite) const;
  // Writes `bytes` to the file of `name`, whole or not at all (through a temporary file in the
  // folder, put in place once written). An existing file is refused (kInvalidArgument) unless
  // `overwrite` allows it, and even then only a regular file with no other hard link (one inside
  // the folder could reach a file outside it). kRuntime, naming the file, when a write or the
  // close fails (a full disk): then the folder holds what it held before.
  [[nodiscard]] Result<void> write(std::string_view name, std::span<const std::byte> bytes,
                                   Overwrite overwrite) const;
  // write() of every file as one set: all are written to temporaries first and put in place only
  // once every one is whole, so that a write that fails (a full disk) leaves the folder as it was,
  // not a mix of new and old files that a loader would read as one step. Only a failure to put a
  // file in place (a file of that name appearing meanwhile) can leave some files replaced; the
  // error then says how many.
  [[nodiscard]] Result<void> write_all(std::span<const NamedBytes> files, Overwrite overwrite) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  NamedFileFolder(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  // The path a message shows for `name`'s file.
  std::string shown(std::string_view file) const;
  // Writes `bytes` to a new temporary file for `file` (shown as `where`) and returns its name. It is
  // created with the permissions of the file it replaces, so a private file's contents are never
  // readable by others on their way.
  [[nodiscard]] Result<std::string> write_temporary(const std::string& file, std::span<const std::byte> bytes,
                                                    const std::string& where) const;
  // Gives the written `temporary` the name `file`: renamed over it (kAllow) or linked to it.
  [[nodiscard]] Result<void> put_in_place(const std::string& temporary, const std::string& file,
                                          Overwrite overwrite, const std::string& where) const;

  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace refit
