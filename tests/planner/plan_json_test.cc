#include <sstream>

#include <gtest/gtest.h>

#include "error_code.h"

#include "refit/planner/plan_json.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

TEST(PlanJson, EveryStrategyRoundTrips) {
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("a", {64, 32}, make_layout({64, 32}, {2, 2}, rank_range(0, 4), "S0,R"),
                                 make_layout({64, 32}, {2, 2}, rank_range(4, 4), "R,S1")),
           testing::make_reshard("b", {10}, make_layout({10}, {4}, rank_range(0, 4), "S0"),
                                 make_layout({10}, {4}, rank_range(4, 4), "R"), DType::kFP32)},
          4, 4)
          .value();
  const auto c = testing::make_test_cluster(4, 2, 4, 4);
  for (auto name : strategy_names()) {
    const auto plan = make_plan(name, p, c).value();
    std::ostringstream out;
    write_plan_json(plan, out);
    const auto back = parse_plan_json(out.str());
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, plan) << name;
    EXPECT_EQ(plan_hash(*back), plan_hash(plan));
  }
}

TEST(PlanJson, ErrorsNameTheJsonPath) {
  const std::string base =
      R"({"format":"refit-plan","version":1,"strategy":"refit","source_ranks":1,"destination_ranks":1,)"
      R"("tensors":[{"name":"w","shape":[4],"dtype":"bf16"}],"transfers":[{"id":0,"from":0,"to":1,)"
      R"("link":"network","bytes":8,"chunk":64,"segments":[{"tensor":0,"offset":[0],"extent":[4],"via":-1}]}]})";
  ASSERT_TRUE(parse_plan_json(base));
  // Replaces `from` by `to` in the plan and checks the kind of error and that it names `path`.
  auto expect_error = [&](const std::string& from, const std::string& to, ErrorCode code,
                          const std::string& path) {
    std::string s = base;
    s.replace(s.find(from), from.size(), to);
    const auto r = parse_plan_json(s);
    ASSERT_FALSE(r) << to;
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
  };
  expect_error(R"("extent":[4])", R"("extent":"x")", ErrorCode::kInvalidArgument,
               "transfers[0].segments[0].extent: expected an array");
  expect_error(R"("link":"network")", R"("link":"pigeon")", ErrorCode::kParse, "transfers[0].link");
  expect_error(R"("dtype":"bf16")", R"("dtype":"bf17")", ErrorCode::kUnsupported, "tensors[0].dtype");
  expect_error(R"("from":0,)", "", ErrorCode::kInvalidArgument, "transfers[0].from: missing");
  // Ranks and ids are 32-bit: 2^32 + 1 once read back as 1, a rank of the plan.
  expect_error(R"("to":1,)", R"("to":4294967297,)", ErrorCode::kOutOfRange,
               "transfers[0].to: must be <= 2147483647");
  expect_error(R"("id":0,)", R"("id":4294967296,)", ErrorCode::kOutOfRange,
               "transfers[0].id: must be <= 2147483647");
  expect_error(R"("chunk":64)", R"("chunk":0)", ErrorCode::kOutOfRange,
               "transfers[0].chunk: must be >= 1, got 0");
  expect_error(R"("via":-1)", R"("via":-2)", ErrorCode::kOutOfRange,
               "transfers[0].segments[0].via: must be >= -1");
  expect_error(R"("version":1)", R"("version":2)", ErrorCode::kUnsupported,
               "format: expected refit-plan version 1");
  expect_error(R"("format":"refit-plan")", R"("format":"refit-manifest")", ErrorCode::kInvalidArgument,
               "got refit-manifest version 1");
  expect_error(R"("via":-1)", R"("via":-1,"vai":0)", ErrorCode::kNotFound,
               "transfers[0].segments[0].vai: unknown field");
  expect_error(R"("chunk":64)", R"("chunk":64,"lnk":"nvlink")", ErrorCode::kNotFound,
               "transfers[0].lnk: unknown field");
  expect_error(R"("strategy":"refit")", R"("strategy":"refit","strategi":"y")", ErrorCode::kNotFound,
               "strategi: unknown field");
  // A label that is no strategy (a hand-made plan is labelled "refit").
  expect_error(R"("strategy":"refit")", R"("strategy":"bogus")", ErrorCode::kNotFound, "strategy");
  EXPECT_EQ(testing::error_code(parse_plan_json("{not json")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(load_plan_file("/nonexistent/plan.json")), ErrorCode::kNotFound);
}

TEST(PlanJson, BoxesReachAsFarAsTensorsDo) {
  // A manifest's dims reach 2^48 elements, so the plan written for it must read back.
  const std::string text =
      R"({"format":"refit-plan","version":1,"strategy":"refit","source_ranks":1,"destination_ranks":1,)"
      R"("tensors":[{"name":"w","shape":[281474976710656],"dtype":"int8"}],"transfers":[{"id":0,"from":0,)"
      R"("to":1,"link":"network","bytes":281474976710656,"chunk":1099511627776,"segments":[{"tensor":0,)"
      R"("offset":[0],"extent":[281474976710656],"via":-1}]}]})";
  const auto plan = parse_plan_json(text);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->transfers[0].segments[0].box.extent[0], std::int64_t{1} << 48);
}

}  // namespace
}  // namespace refit
