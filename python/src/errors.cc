#include <string>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "refit/core/utf8.h"

namespace refit::python {

void raise_error(const Error& error) {
  // The exception classes are plain Python (refit/_errors.py), so that users subclass, catch and
  // document them like any other; the module only picks one by the error's code.
  const nb::object errors = nb::module_::import_("refit._errors");
  const nb::object exception =
      errors.attr("make_error")(std::string(error_code_name(error.code)), valid_utf8(error.message));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  throw nb::python_error();
}

}  // namespace refit::python
