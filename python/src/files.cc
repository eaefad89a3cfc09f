// refit._refit.OutputFile: a file the Python package writes (a trace, a manifest, a table, a
// figure), opened as the library opens the files it writes (refit::OutputFile, as Plan.save and
// refit simulate --trace): a folder, a disk device, a FIFO that no process reads, or a folder that
// does not exist is refused when the file is opened, before the work whose result it will hold,
// and a write that fails in part (a full disk) is an error that leaves the old file as it was.
#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "path_caster.h"
#include "refit/core/text_file.h"

namespace refit::python {
namespace {

using namespace nb::literals;

struct WrittenFile {
  std::string path;
  std::string what;  // the option or argument the path was given as ("trace", "--csv")
  std::optional<OutputFile> out;
};

WrittenFile* open(const FsPath& path, const std::string& what) {
  auto out = OutputFile::open(path.bytes);
  if (!out) raise_error(std::move(out.error()).in(what));
  return new WrittenFile{.path = path.bytes, .what = what, .out = std::move(*out)};
}

void write(WrittenFile& file, const nb::bytes& data) {
  if (!file.out)
    raise_error(Error{.code = ErrorCode::kInvalidArgument,
                      .message = fmt::format("{}: {}: written once already", file.what, file.path)});
  Result<void> written;
  {
    nb::gil_scoped_release release;
    errno = 0;
    file.out->stream().write(data.c_str(), static_cast<std::streamsize>(data.size()));
    written = file.out->commit();
  }
  file.out.reset();
  if (!written) raise_error(std::move(written.error()).in(file.what));
}

}  // namespace

void bind_files(nb::module_& m) {
  nb::class_<WrittenFile>(m, "OutputFile",
                          "A file opened for writing as refit opens the files it writes: refused now, "
                          "naming `what` and the path, if it cannot be.")
      .def(nb::new_(&open), "path"_a, "what"_a,
           "Opens the file to be written whole (into a temporary file beside it until write() puts it in "
           "place); BadInput naming `what` for a folder, a device, a FIFO no "
           "process reads, or a file that cannot be created.")
      .def("write", &write, "data"_a,
           "Writes the file's bytes and closes it; Failure when any of them could not be written.");
}

}  // namespace refit::python
