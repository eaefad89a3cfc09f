// agree() fails on every rank or on none, and every rank reports the kind of failure of the rank
// that refused: bad input stays bad input (with its own code), a failure at runtime is a failed
// peer for the others. Ranks are threads over the in-process bootstrap.
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "error_code.h"
#include "refit/executors/agreement.h"
#include "thread_bootstrap.h"

namespace refit {
namespace {

// Rank r contributes "payload r", or the error `refusals` gives it; returns every rank's outcome.
std::vector<Result<std::vector<std::string>>> agree_all(std::int32_t size,
                                                        const std::map<std::int32_t, Error>& refusals) {
  std::vector<Result<std::vector<std::string>>> out(static_cast<std::size_t>(size));
  testing::run_ranks(size, [&](std::int32_t r, Bootstrap& bootstrap) {
    const auto it = refusals.find(r);
    const Result<std::string> mine = it == refusals.end()
                                         ? Result<std::string>("payload " + std::to_string(r))
                                         : std::unexpected(it->second);
    out[static_cast<std::size_t>(r)] = agree(bootstrap, mine);
  });
  return out;
}

TEST(Agree, HandsEveryRankEveryPayloadWhenAllSucceed) {
  for (const auto& r : agree_all(3, {})) {
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, (std::vector<std::string>{"payload 0", "payload 1", "payload 2"}));
  }
}

TEST(Agree, EveryRankReportsTheCodeOfTheRankThatRefused) {
  const auto all = agree_all(4, {{2, Error{.code = ErrorCode::kMismatch, .message = "buffer too small"}}});
  for (std::size_t r = 0; r < all.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    ASSERT_FALSE(all[r]);
    EXPECT_EQ(all[r].error().code, ErrorCode::kMismatch);
    EXPECT_EQ(all[r].error().message,
              r == 2 ? "buffer too small" : "refused because rank 2 refused: buffer too small");
  }
}

TEST(Agree, ARuntimeFailureIsAFailedPeerForTheOthers) {
  const auto all =
      agree_all(3, {{1, Error{.code = ErrorCode::kRuntime, .message = "ucp_mem_map: no memory"}}});
  EXPECT_EQ(testing::error_code(all[0]), ErrorCode::kPeerFailed);
  EXPECT_EQ(testing::error_code(all[1]), ErrorCode::kRuntime);
  EXPECT_EQ(testing::error_code(all[2]), ErrorCode::kPeerFailed);
  ASSERT_FALSE(all[0]);
  EXPECT_EQ(all[0].error().message, "refused because rank 1 refused: ucp_mem_map: no memory");
}

// The message gives the first refusal's reason; bad input anywhere keeps the error bad input.
TEST(Agree, BadInputAnywhereStaysBadInput) {
  const auto all =
      agree_all(4, {{0, Error{.code = ErrorCode::kRuntime, .message = "transport down"}},
                    {2, Error{.code = ErrorCode::kOutOfRange,
                              .message = "staging must be at least 32 bytes (one chunk's), got 0"}}});
  for (const std::size_t r : {1u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    EXPECT_EQ(testing::error_code(all[r]), ErrorCode::kOutOfRange);
    ASSERT_FALSE(all[r]);
    EXPECT_EQ(all[r].error().message, "refused because ranks 0, 2 refused: transport down");
  }
  EXPECT_EQ(testing::error_code(all[0]), ErrorCode::kRuntime);
  EXPECT_EQ(testing::error_code(all[2]), ErrorCode::kOutOfRange);
}

TEST(CheckSameSettings, RanksThatDisagreeAreAMismatchNamingTheSettingAndWhoHasWhichValue) {
  const auto a =
      encode_settings({{.name = "plan hash", .value = "aa"}, {.name = "--iterations", .value = "1"}});
  const auto b =
      encode_settings({{.name = "plan hash", .value = "aa"}, {.name = "--iterations", .value = "3"}});
  EXPECT_TRUE(check_same_settings({a, a, a}));
  const auto r = check_same_settings({a, a, b});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kMismatch);
  EXPECT_NE(r.error().message.find("ranks disagree on the --iterations (ranks 0, 1 have 1; rank 2 has 3)"),
            std::string::npos)
      << r.error().message;
}

TEST(CheckSameSettings, ASettingOneRankLacksIsNamedAndGarbageIsNotRefits) {
  const auto both =
      encode_settings({{.name = "plan hash", .value = "aa"}, {.name = "staging bytes", .value = "8"}});
  const auto one = encode_settings({{.name = "plan hash", .value = "aa"}});
  const auto r = check_same_settings({both, one});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("staging bytes (rank 1 has (nothing); rank 0 has 8)"), std::string::npos)
      << r.error().message;
  const auto garbled = check_same_settings({both, std::string("\xff\x00;", 3)});
  ASSERT_FALSE(garbled);
  EXPECT_EQ(garbled.error().code, ErrorCode::kRuntime);
  EXPECT_EQ(garbled.error().message, "rank 1 sent settings that are not refit's");
}

}  // namespace
}  // namespace refit
