#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

TEST(LayoutCli, JsonMatchesTheContract) {
  // 10 rows over 3 mesh rows: chunk 4 -> extents 4,4,2; the replicate axis repeats boxes.
  const auto r = run_refit("layout --shape 10,7 --mesh 3x2 --placements S0,R --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["shape"], nlohmann::json({10, 7}));
  EXPECT_EQ(j["mesh"], nlohmann::json({3, 2}));
  EXPECT_EQ(j["placements"], nlohmann::json({"S0", "R"}));
  ASSERT_EQ(j["boxes"].size(), 6u);
  EXPECT_EQ(j["boxes"][0],
            nlohmann::json::parse(R"({"rank":0,"coord":[0,0],"offset":[0,0],"extent":[4,7]})"));
  EXPECT_EQ(j["boxes"][5],
            nlohmann::json::parse(R"({"rank":5,"coord":[2,1],"offset":[8,0],"extent":[2,7]})"));
}

TEST(LayoutCli, ExplicitRanksAreReported) {
  const auto r = run_refit("layout --shape 10,7 --mesh 3x2 --placements S0,R --ranks 4,5,6,7,8,9 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["boxes"][2]["rank"], 6);
}

TEST(LayoutCli, TableWithoutJson) {
  const auto r = run_refit("layout --shape 5 --mesh 4 --placements S0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank"), std::string::npos);
  EXPECT_NE(r.out.find("[5]"), std::string::npos);  // the empty shard's offset
}

struct BadInput {
  const char* args;
  const char* must_mention;
  friend void PrintTo(const BadInput& b, std::ostream* os) { *os << b.args; }
};

class LayoutCliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(LayoutCliBadInput, ExitsTwoNamingTheField) {
  const auto r = run_refit(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(GetParam().must_mention), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LayoutCliBadInput,
    ::testing::Values(BadInput{"layout --shape 10,7 --mesh 3x2 --placements S2,R", "S2"},
                      BadInput{"layout --shape 10,7 --mesh 3x2 --placements S0", "placements"},
                      BadInput{"layout --shape 10,x --mesh 3x2 --placements S0,R", "--shape"},
                      BadInput{"layout --shape 10,-7 --mesh 3x2 --placements S0,R", "--shape"},
                      BadInput{"layout --shape 10,7 --mesh 3x0 --placements S0,R", "--mesh"},
                      BadInput{"layout --shape 10,7 --mesh 2 --placements S0 --ranks 1,1", "--ranks"},
                      BadInput{"layout --shape 10,7 --mesh 2 --placements S0 --ranks 1,2,3", "--ranks"},
                      BadInput{"layout --shape 10,7 --mesh 2 --placements Z", "--placements"},
                      // CLI11's own errors carry the prefix too.
                      BadInput{"layout --mesh 2 --placements S0", "refit layout: error: --shape"},
                      BadInput{"layout --shape 10 --mesh 2 --placements S0 --bogus", "refit layout: error:"},
                      // Once "elements -9223372036854775808": sizes are capped (2^48 elements).
                      BadInput{"layout --shape 9223372036854775807 --mesh 2 --placements S0",
                               "refit layout: error: --shape: elements"},
                      // 2^32 once wrapped to rank 0.
                      BadInput{"layout --shape 10 --mesh 2 --placements S0 --ranks 4294967296,1",
                               "--ranks: entry 0 is 4294967296, must be < 2097152"},
                      // Once gigabytes and over 10 s: 2^20 mesh positions at most.
                      BadInput{"layout --shape 10 --mesh 1048576x2 --placements S0,R",
                               "refit layout: error: --mesh: mesh positions"},
                      BadInput{"nonsense", "nonsense"}));

}  // namespace
}  // namespace refit
