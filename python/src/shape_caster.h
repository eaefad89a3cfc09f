#pragma once
// Python sees a refit::Shape as it sees a std::vector<std::int64_t>: a list of ints, and any
// sequence of ints converts to one.
#include <cstdint>

#include <nanobind/stl/detail/nb_list.h>

#include "refit/core/shape.h"

namespace nanobind::detail {

template <>
struct type_caster<refit::Shape> : list_caster<refit::Shape, std::int64_t> {};

}  // namespace nanobind::detail
