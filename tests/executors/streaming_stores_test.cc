// streaming_copy() against memcpy and streaming_zero() against memset: every alignment of source
// and destination within a cache line, lengths around the streaming thresholds (4 KiB for a copy,
// two lines for zeroing) and odd tails; bytes around the destination range stay as they were.
#include "refit/executors/streaming_stores.h"

#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace refit {
namespace {

constexpr std::size_t kLengths[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 4160, 65'537};

TEST(StreamingStores, CopyMatchesMemcpyAtEveryAlignmentAndLength) {
  std::mt19937 rng(5);
  std::vector<std::byte> source(70'000);
  for (auto& b : source) b = static_cast<std::byte>(rng());
  for (std::size_t from = 0; from < 64; from += 7)
    for (std::size_t to = 0; to < 64; to += 5)
      for (const std::size_t n : kLengths) {
        SCOPED_TRACE(::testing::Message()
                     << "source +" << from << ", destination +" << to << ", " << n << " bytes");
        std::vector<std::byte> got(n + 192, std::byte{0xAB});
        std::vector<std::byte> want = got;
        std::memcpy(want.data() + 64 + to, source.data() + from, n);
        streaming_copy(got.data() + 64 + to, source.data() + from, n);
        store_fence();
        ASSERT_EQ(got, want);
      }
}

TEST(StreamingStores, ZeroMatchesMemsetAtEveryAlignmentAndLength) {
  // Zeroing streams from two lines on (127-129 bytes straddle that), copying from 4 KiB on.
  std::vector<std::size_t> lengths(std::begin(kLengths), std::end(kLengths));
  lengths.insert(lengths.end(), {127, 128, 129, 200});
  for (std::size_t to = 0; to < 64; ++to)
    for (const std::size_t n : lengths) {
      SCOPED_TRACE(::testing::Message() << "destination +" << to << ", " << n << " bytes");
      std::vector<std::byte> got(n + 192, std::byte{0xAB});
      std::vector<std::byte> want = got;
      std::memset(want.data() + 64 + to, 0, n);
      streaming_zero(got.data() + 64 + to, n);
      store_fence();
      ASSERT_EQ(got, want);
    }
}

}  // namespace
}  // namespace refit
