// REFIT_TRY and REFIT_TRY_IN: a value passes through, an error returns from the caller unchanged
// (or with its context prefixed), and the operand is evaluated exactly once.
#include "refit/core/try.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace refit {
namespace {

[[nodiscard]] Result<int> half(int x) {
  if (x % 2 != 0) return out_of_range("odd");
  return x / 2;
}

[[nodiscard]] Result<void> check_even(int x) {
  if (x % 2 != 0) return invalid("odd");
  return {};
}

// quarter(8) = half(half(8)) = 2; quarter(6): half(6) = 3 is odd, so the inner error returns.
[[nodiscard]] Result<int> quarter(int x) {
  const int h = REFIT_TRY(half(x));
  return REFIT_TRY(half(h));
}

[[nodiscard]] Result<std::string> labelled(int x) {
  REFIT_TRY_IN(check_even(x), "x = " + std::to_string(x));
  return std::string("even");
}

TEST(Try, PassesValuesThrough) { EXPECT_EQ(quarter(8), 2); }

TEST(Try, ReturnsTheFirstErrorUnchanged) {
  const auto r = quarter(6);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kOutOfRange);
  EXPECT_EQ(r.error().message, "odd");
}

TEST(Try, PrefixesContextOnlyOnError) {
  EXPECT_EQ(labelled(4), "even");
  const auto r = labelled(3);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, "x = 3: odd");
}

TEST(Try, EvaluatesTheOperandOnceAndMovesMoveOnlyValues) {
  int calls = 0;
  const auto make = [&]() -> Result<std::unique_ptr<int>> {
    ++calls;
    return std::make_unique<int>(7);
  };
  const auto take = [&]() -> Result<int> {
    std::unique_ptr<int> p = REFIT_TRY(make());
    return *p;
  };
  EXPECT_EQ(take(), 7);
  EXPECT_EQ(calls, 1);
}

TEST(ErrorCodes, SplitBadInputFromRuntimeFailures) {
  for (auto c : {ErrorCode::kInvalidArgument, ErrorCode::kParse, ErrorCode::kOutOfRange, ErrorCode::kNotFound,
                 ErrorCode::kMismatch, ErrorCode::kUnsupported})
    EXPECT_TRUE((Error{c, ""}.is_bad_input())) << error_code_name(c);
  for (auto c : {ErrorCode::kRuntime, ErrorCode::kTimeout, ErrorCode::kPeerFailed, ErrorCode::kInternal})
    EXPECT_FALSE((Error{c, ""}.is_bad_input())) << error_code_name(c);
}

}  // namespace
}  // namespace refit
