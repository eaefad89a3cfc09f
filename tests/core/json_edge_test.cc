// parse_object, the edge every JSON input of refit goes through (cluster files, config.json,
// manifests, plans): hostile text becomes a bad-input error naming where, in bounded time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/core/json_fields.h"

namespace refit::json_fields {
namespace {

using refit::testing::error_code;
using ::testing::HasSubstr;

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonEdge, NestingUpToTheLimitIsRead) {
  // The root object is level 1, so an array nested kMaxJsonDepth - 1 deep in it is the deepest.
  const auto text = R"({"a": )" + nested_arrays(kMaxJsonDepth - 1) + "}";
  EXPECT_TRUE(parse_object(text, "x"));
}

TEST(JsonEdge, DeeperNestingIsRefusedWithItsPath) {
  const auto text = R"({"a": [1, )" + nested_arrays(kMaxJsonDepth) + "]}";
  const auto r = parse_object(text, "the plan");
  EXPECT_EQ(error_code(r), ErrorCode::kUnsupported);
  // a[1] holds the array that opens the 64th level below the root; its path names each index.
  EXPECT_THAT(r.error().message, HasSubstr("the plan: a[1][0]"));
  EXPECT_THAT(r.error().message, HasSubstr("nested deeper than 64 levels"));
}

TEST(JsonEdge, AMillionLevelsAreRefusedWithoutRecursing) {
  // Once a stack overflow: now refused at level 65, before anything recurses over the value.
  const auto r = parse_object(R"({"name": )" + nested_arrays(1'000'000) + "}", "config.json");
  EXPECT_EQ(error_code(r), ErrorCode::kUnsupported);
}

TEST(JsonEdge, NumbersBeyondDoubleRangeAreParseErrors) {
  // Once an uncaught out_of_range exception (abort) in all four JSON formats.
  for (const char* text : {R"({"x": 1e309})", R"({"x": -1e309})", R"({"a": {"b": [1, 2e400]}})"}) {
    const auto r = parse_object(text, "manifest");
    EXPECT_EQ(error_code(r), ErrorCode::kParse) << text;
    EXPECT_THAT(r.error().message, HasSubstr("manifest: not valid JSON")) << text;
  }
}

TEST(JsonEdge, DuplicateKeysAreRefusedWithTheirPath) {
  // nlohmann would keep the last "tp" silently.
  const auto r = parse_object(R"({"tensors": [{"shape": [1]}, {"shape": [2], "shape": [3]}]})", "manifest");
  EXPECT_EQ(error_code(r), ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("manifest: tensors[1].shape: key appears twice"));
  EXPECT_EQ(error_code(parse_object(R"({"a": 1, "a": 1})", "x")), ErrorCode::kInvalidArgument);
  // The same key in two objects is fine.
  EXPECT_TRUE(parse_object(R"({"a": {"k": 1}, "b": {"k": 2}})", "x"));
}

TEST(JsonEdge, TextThatIsNotUtf8IsAParseError) {
  EXPECT_EQ(error_code(parse_object("{\"name\": \"\xff\"}", "x")), ErrorCode::kParse);
}

TEST(JsonEdge, DescribeNeverDumpsAContainer) {
  // Error messages quote values; a large or deep one is summarised, not printed.
  EXPECT_EQ(describe(Json::parse("[[1], [2], [3]]")), "an array of 3 elements");
  EXPECT_EQ(describe(Json::parse(R"({"a": {"b": 1}})")), "an object of 1 fields");
  EXPECT_EQ(describe(Json::parse("[]")), "[]");
  EXPECT_EQ(describe(Json("abc")), "\"abc\"");
}

TEST(JsonEdge, NonFiniteNumbersBuiltInMemoryAreRefused) {
  // The parser cannot produce nan, but a Json built by a caller (the Python package) can.
  const Json j{{"gbps", std::numeric_limits<double>::quiet_NaN()}};
  const auto r = require_number(j, "gbps", "nics[0]");
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("nics[0].gbps: must be a finite number"));
}

}  // namespace
}  // namespace refit::json_fields
