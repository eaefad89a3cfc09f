// refit._refit.OutputFile: a file the Python package writes (a trace, a manifest, a table, a
// figure), opened as the library opens the files it writes (open_output_file, as Plan.save and
// refit simulate --trace): a folder, a disk device, a FIFO that no process reads, or a folder that
// does not exist is refused when the file is opened, before the work whose result it will hold,
// and a write that fails in part (a full disk) is an error, not a short file.
#include <cerrno>
#include <fstream>
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

struct OutputFile {
  std::string path;
  std::string what;  // the option or argument the path was given as ("trace", "--csv")
  std::optional<std::ofstream> out;
};

OutputFile* open(const FsPath& path, const std::string& what) {
  auto out = open_output_file(path.bytes);
  if (!out) raise_error(std::move(out.error()).in(what));
  return new OutputFile{.path = path.bytes, .what = what, .out = std::move(*out)};
}

void write(OutputFile& file, const nb::bytes& data) {
  if (!file.out)
    raise_error(Error{.code = ErrorCode::kInvalidArgument,
                      .message = fmt::format("{}: {}: written once already", file.what, file.path)});
  Result<void> written;
  {
    nb::gil_scoped_release release;
    errno = 0;
    file.out->write(data.c_str(), static_cast<std::streamsize>(data.size()));
    written = close_output_file(*file.out, file.path);
  }
  file.out.reset();
  if (!written) raise_error(std::move(written.error()).in(file.what));
}

}  // namespace

void bind_files(nb::module_& m) {
  nb::class_<OutputFile>(m, "OutputFile",
                         "A file opened for writing as refit opens the files it writes: refused now, "
                         "naming `what` and the path, if it cannot be.")
      .def(nb::new_(&open), "path"_a, "what"_a,
           "Creates (or truncates) the file; BadInput naming `what` for a folder, a device, a FIFO no "
           "process reads, or a file that cannot be created.")
      .def("write", &write, "data"_a,
           "Writes the file's bytes and closes it; Failure when any of them could not be written.");
}

}  // namespace refit::python
