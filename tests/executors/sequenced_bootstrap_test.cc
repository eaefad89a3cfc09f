// SequencedBootstrap numbers every collective call: ranks out of step are a mismatch naming both
// calls, on every rank, at the call where they part (not a timeout, and not one rank's barrier
// taken as another's allgather); an exchange that garbles bytes is named.
#include "refit/executors/sequenced_bootstrap.h"

#include <thread>

#include <gtest/gtest.h>

#include "thread_bootstrap.h"

namespace refit {
namespace {

TEST(SequencedBootstrap, RanksInStepGetEveryRanksBytesUnchanged) {
  testing::ThreadGroup group(3);
  std::vector<Result<std::vector<std::string>>> got(3);
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      testing::ThreadBootstrap inner(group, r);
      SequencedBootstrap b(inner);
      ASSERT_TRUE(b.barrier());
      got[static_cast<std::size_t>(r)] = b.allgather(std::string(static_cast<std::size_t>(r), 'x'));
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g.value(), (std::vector<std::string>{"", "x", "xx"}));
}

TEST(SequencedBootstrap, ARankThatMakesOneCallMoreIsNamedByEveryRankAtThatCall) {
  // Rank 1 makes a barrier its peers do not: its second call (the barrier) meets their second
  // call (an allgather). Without the numbers the allgather would take the barrier's empty part as
  // rank 1's contribution.
  testing::ThreadGroup group(3);
  std::vector<Result<std::vector<std::string>>> second(3);
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      testing::ThreadBootstrap inner(group, r);
      SequencedBootstrap b(inner);
      ASSERT_TRUE(b.allgather("first"));
      if (r == 1) {
        const auto extra = b.barrier();
        second[1] = extra ? Result<std::vector<std::string>>{} : std::unexpected(extra.error());
      } else {
        second[static_cast<std::size_t>(r)] = b.allgather("hash");
      }
    });
  for (auto& t : threads) t.join();
  for (std::size_t r = 0; r < 3; ++r) {
    ASSERT_FALSE(second[r]) << "rank " << r;
    EXPECT_EQ(second[r].error().code, ErrorCode::kMismatch);
  }
  EXPECT_EQ(second[0].error().message,
            "rank 1 is at its collective call 2 (a barrier), this rank at its collective call 2 (an "
            "allgather): the ranks are out of step (an option that changes what a rank does given on "
            "some ranks only?)");
  EXPECT_NE(second[1].error().message.find("rank 0 is at its collective call 2 (an allgather)"),
            std::string::npos);
}

// A bootstrap whose allgather hands back what a broken exchange makes of rank 1's bytes.
class GarblingBootstrap final : public Bootstrap {
 public:
  std::int32_t rank() const override { return 0; }
  std::int32_t size() const override { return 2; }
  Result<std::vector<std::string>> allgather(std::string_view mine) override {
    return std::vector<std::string>{std::string(mine), std::string("\xff\xfe", 2)};
  }
  Result<void> barrier() override { return {}; }
};

TEST(SequencedBootstrap, AnExchangeThatGarblesBytesIsNamed) {
  GarblingBootstrap inner;
  SequencedBootstrap b(inner);
  const auto r = b.allgather("mine");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kRuntime);
  EXPECT_EQ(r.error().message,
            "rank 1's part of collective call 1 (an allgather) is not refit's (2 bytes): the exchange must "
            "hand every rank's bytes back unchanged");
}

}  // namespace
}  // namespace refit
