// The payload header (refit/delta/payload.h): written and read back, and every field that can be
// wrong refused by name; the encoding table in the order of the header's ids.
#include "refit/delta/payload.h"

#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "chunk_data.h"
#include "entropy_stage.h"
#include "error_code.h"
#include "position_coder.h"

namespace refit {
namespace {

using testing::ByteVector;
using testing::error_code;

// A runs+zstd header of a 4096-byte bf16 chunk (2048 elements) with a 100-byte body, and the
// payload that carries it.
DeltaHeader example_header() {
  return {.format = {.encoding = DeltaEncoding::kRuns, .entropy = DeltaEntropy::kZstd},
          .element_bytes = 2,
          .chunk_bytes = 4096,
          .changed_elements = 17,
          .inner_bytes = 150,
          .body_bytes = 100,
          .base = Checksum{0x0123456789abcdefull},
          .result = Checksum{0xfedcba9876543210ull}};
}

ByteVector payload_of(const DeltaHeader& h) {
  ByteVector out(static_cast<std::size_t>(kDeltaHeaderBytes + h.body_bytes));
  write_delta_header(h, out);
  return out;
}

void put_u64(ByteVector& p, std::size_t at, std::uint64_t v) { std::memcpy(p.data() + at, &v, 8); }

TEST(DeltaHeader, ReadsBackWhatWasWritten) {
  const DeltaHeader h = example_header();
  const auto read = read_delta_header(payload_of(h));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->format, h.format);
  EXPECT_EQ(read->element_bytes, 2);
  EXPECT_EQ(read->chunk_bytes, 4096);
  EXPECT_EQ(read->changed_elements, 17);
  EXPECT_EQ(read->inner_bytes, 150);
  EXPECT_EQ(read->body_bytes, 100);
  EXPECT_EQ(read->base, h.base);
  EXPECT_EQ(read->result, h.result);
  EXPECT_EQ(read->payload_bytes(), kDeltaHeaderBytes + 100);
}

TEST(DeltaHeader, RefusesEveryBadField) {
  // Each case breaks one field of a good payload; the message names that field.
  struct Case {
    const char* name;
    std::function<void(ByteVector&)> spoil;
    const char* says;
  };
  const Case cases[] = {
      {"magic", [](ByteVector& p) { p[0] = std::byte{'X'}; }, "magic"},
      {"version", [](ByteVector& p) { p[3] = std::byte{2}; }, "magic"},
      {"encoding", [](ByteVector& p) { p[4] = std::byte{3}; }, "unknown encoding 3"},
      {"entropy", [](ByteVector& p) { p[5] = std::byte{2}; }, "unknown entropy stage 2"},
      {"element size", [](ByteVector& p) { p[6] = std::byte{3}; }, "element size 3"},
      {"reserved", [](ByteVector& p) { p[7] = std::byte{1}; }, "reserved"},
      {"chunk not whole elements", [](ByteVector& p) { put_u64(p, 8, 4095); }, "not whole 2-byte elements"},
      {"chunk size sign", [](ByteVector& p) { put_u64(p, 8, ~0ull); }, "chunk size"},
      {"changed", [](ByteVector& p) { put_u64(p, 16, 2049); }, "2049 changed elements"},
      {"inner", [](ByteVector& p) { put_u64(p, 24, 4096 + 2048 + 1); }, "inner body of 6145 bytes"},
      {"body", [](ByteVector& p) { put_u64(p, 32, 99); }, "the header says 99"},
      {"cut short", [](ByteVector& p) { p.pop_back(); }, "99 bytes after the header"},
      {"no stage, inner != body", [](ByteVector& p) { p[5] = std::byte{0}; }, "no entropy stage"},
      {"shorter than a header", [](ByteVector& p) { p.resize(55); }, "shorter than its 56-byte header"},
  };
  for (const auto& c : cases) {
    auto payload = payload_of(example_header());
    c.spoil(payload);
    const auto read = read_delta_header(payload);
    EXPECT_EQ(error_code(read), ErrorCode::kParse) << c.name;
    if (!read)
      EXPECT_NE(read.error().message.find(c.says), std::string::npos)
          << c.name << ": " << read.error().message;
  }
}

TEST(DeltaHeader, NamesFormats) {
  EXPECT_EQ(delta_format_name({.encoding = DeltaEncoding::kRuns, .entropy = DeltaEntropy::kZstd}),
            "runs+zstd");
  EXPECT_EQ(delta_format_name({.encoding = DeltaEncoding::kBitmask}), "bitmask");
  EXPECT_EQ(delta_format_name({}), "dense");
}

TEST(DeltaTables, EntriesSitAtTheirIds) {
  // The header's ids index the tables: entry i must be the encoding (stage) with id i.
  const auto encodings = all_delta_encodings();
  ASSERT_EQ(delta::position_coders().size(), encodings.size());
  for (std::size_t i = 0; i < encodings.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(encodings[i]), i);
    EXPECT_EQ(delta::position_coders()[i]->id, encodings[i]);
  }
  EXPECT_EQ(delta::entropy_stage(DeltaEntropy::kNone), nullptr);
  for (const auto entropy : all_delta_entropies())
    if (entropy != DeltaEntropy::kNone)
      ASSERT_NE(delta::entropy_stage(entropy), nullptr) << delta_entropy_name(entropy);
}

TEST(DeltaHeader, CapacityHoldsTheLargestBody) {
  // Any body is at most chunk + one byte per element before packing (docs/delta.md), and zstd's
  // bound covers what packing can add.
  EXPECT_GE(delta_payload_capacity(8 << 20, 1), kDeltaHeaderBytes + (16 << 20));
  EXPECT_GE(delta_payload_capacity(0, 2), kDeltaHeaderBytes);
}

}  // namespace
}  // namespace refit
