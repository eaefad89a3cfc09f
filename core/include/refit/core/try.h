#pragma once
// Error propagation in one line. Inside a function that returns a Result (or a std::expected
// with Error), `auto x = REFIT_TRY(f());` is f()'s value, or returns f()'s error from the
// enclosing function; `REFIT_TRY(g());` does the same for a Result<void>.
// REFIT_TRY_IN(f(), context) prefixes the error with where it happened (Error::in); `context`
// is evaluated only when there is an error, so it may format freely.
//
// These are GNU statement expressions (GCC and Clang; __extension__ keeps -Wpedantic quiet):
// the only way in C++ to return from the caller inside an expression. The operand is evaluated
// once; an lvalue operand is moved from.
#include <utility>

#include "refit/core/error.h"

#define REFIT_TRY(...)                                                                        \
  __extension__({                                                                             \
    auto&& refit_try_result_ = (__VA_ARGS__);                                                 \
    if (!refit_try_result_) return ::std::unexpected(::std::move(refit_try_result_).error()); \
    ::std::move(refit_try_result_).value();                                                   \
  })

#define REFIT_TRY_IN(expr, context)                                                                       \
  __extension__({                                                                                         \
    auto&& refit_try_result_ = (expr);                                                                    \
    if (!refit_try_result_) return ::std::unexpected(::std::move(refit_try_result_).error().in(context)); \
    ::std::move(refit_try_result_).value();                                                               \
  })
