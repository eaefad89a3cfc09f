// ReceivedSegments against a brute-force map: where each kept segment stays, found by
// (transfer, segment); null for a transfer that kept nothing, a segment past its transfer's
// last, and a negative segment.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>

#include "refit/lowering/rank_program.h"

namespace refit::lowering {
namespace {

TEST(ReceivedSegments, FindsEachKeptSegmentAsABruteForceMapDoes) {
  std::mt19937 random(7);
  ReceivedSegments received;
  std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> reference;  // -> array offset
  std::int32_t transfer = 0;
  for (int i = 0; i < 2000; ++i) {
    transfer += 1 + static_cast<std::int32_t>(random() % 4);        // increasing, with gaps
    const auto segments = static_cast<std::int32_t>(random() % 5);  // 0..4
    for (std::int32_t s = 0; s < segments; ++s) {
      const std::int64_t offset = static_cast<std::int64_t>(random() % 100000);
      received.keep(transfer,
                    Located{.kind = BufferKind::kScratch, .index = 0, .array = Array{.offset = offset}});
      reference[{transfer, s}] = offset;
    }
  }
  for (std::int32_t t = -1; t <= transfer + 1; ++t)
    for (std::int32_t s = -1; s <= 5; ++s) {
      const Located* found = received.find(t, s);
      const auto it = reference.find({t, s});
      ASSERT_EQ(found != nullptr, it != reference.end()) << "transfer " << t << " segment " << s;
      if (found) EXPECT_EQ(found->array.offset, it->second) << "transfer " << t << " segment " << s;
    }
}

TEST(ReceivedSegments, FindsNothingBeforeAnythingIsKept) {
  const ReceivedSegments received;
  EXPECT_EQ(received.find(0, 0), nullptr);
}

}  // namespace
}  // namespace refit::lowering
