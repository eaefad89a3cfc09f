#pragma once
// A file name as the system spells it. Python names a file with a str, whose bytes that are not
// UTF-8 are surrogate-escaped (what os.listdir returns for such a name), with bytes, or with an
// os.PathLike: each converts to the bytes os.fsencode makes of it, which is what the library
// opens. A name goes back to Python as os.fsdecode makes it, so that it round-trips. A plain
// std::string takes only text that is UTF-8, and so refused the names the system allows.
#include <string>

#include <nanobind/nanobind.h>

namespace refit::python {

struct FsPath {
  std::string bytes;
};

}  // namespace refit::python

namespace nanobind::detail {

template <>
struct type_caster<refit::python::FsPath> {
  NB_TYPE_CASTER(refit::python::FsPath, const_name("str"))

  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    PyObject* encoded = nullptr;
    if (PyUnicode_FSConverter(src.ptr(), &encoded) == 0) {
      PyErr_Clear();
      return false;
    }
    char* data = nullptr;
    Py_ssize_t size = 0;
    const bool ok = PyBytes_AsStringAndSize(encoded, &data, &size) == 0;
    if (ok) value.bytes.assign(data, static_cast<std::size_t>(size));
    Py_DECREF(encoded);
    if (!ok) PyErr_Clear();
    return ok;
  }

  static handle from_cpp(const refit::python::FsPath& path, rv_policy, cleanup_list*) noexcept {
    return PyUnicode_DecodeFSDefaultAndSize(path.bytes.data(), static_cast<Py_ssize_t>(path.bytes.size()));
  }
};

}  // namespace nanobind::detail
