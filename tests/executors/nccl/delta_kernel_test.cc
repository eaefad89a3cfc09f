// The GPU delta codec's kernel bodies (executors/nccl/src/delta_kernel_body.h), run on the host
// through HostDeltaKernels in the kernels' own lane and tile mapping, against refit::DeltaCodec:
// - bit for bit: the GPU codec's payload of a chunk is DeltaCodec's with its entropy stage off
//   (the same choice of dense, bitmask or runs, the same bytes);
// - both ways: DeltaCodec decodes what the GPU codec encodes and the reverse, giving the current
//   bytes and checksum_of them;
// - all or nothing: a payload cut short or damaged in any byte is refused by the GPU codec
//   exactly when DeltaCodec refuses it, and then the receiver's bytes are the baseline's.
// Over random chunks of bf16, fp16, fp32, fp8 and fp64 elements, sizes that end mid-lane,
// mid-word and mid-tile, change fractions from none to all, and the adversarial chunks of
// tests/delta (NaN payloads, signed zeros, denormals, long gaps); runs whose positions span many
// of the decoder's segments (varints and head-length pairs across their boundaries).
#include <gtest/gtest.h>

#include <random>

#include "chunk_data.h"
#include "delta_kernels.h"
#include "device_delta_codec.h"
#include "refit/delta/codec.h"

namespace refit::nccl_detail {
namespace {

using testing::ByteVector;
using testing::ChunkPair;

struct GpuCodec {
  HostDeltaKernels kernels;
  DeviceDeltaCodec codec{kernels};

  // The GPU codec's payload of `c` against its baseline (or a full refit without `base`).
  Result<ByteVector> encode(const ChunkPair& c, std::optional<Checksum> base) {
    ByteVector out(kDeltaHeaderBytes + c.current.size());
    const auto header = codec.encode({.baseline = c.baseline.data(),
                                      .current = c.current.data(),
                                      .bytes = static_cast<std::int64_t>(c.current.size()),
                                      .dtype = c.dtype,
                                      .base = base,
                                      .name = c.name},
                                     out.data(), static_cast<std::int64_t>(out.size()));
    if (!header) return std::unexpected(header.error());
    out.resize(static_cast<std::size_t>(header->payload_bytes()));
    return out;
  }

  Result<Checksum> decode(const ByteVector& payload, ByteVector& bytes, DType dtype,
                          std::optional<Checksum> base) {
    return codec.decode(payload.data(), static_cast<std::int64_t>(payload.size()),
                        {.bytes = bytes.data(),
                         .size = static_cast<std::int64_t>(bytes.size()),
                         .dtype = dtype,
                         .base = base,
                         .name = "chunk"});
  }
};

ByteVector cpu_encode(const ChunkPair& c, std::optional<Checksum> base, DeltaEncodeOptions options) {
  DeltaCodec codec(options);
  ByteVector out(static_cast<std::size_t>(
      delta_payload_capacity(static_cast<std::int64_t>(c.current.size()), dtype_size(c.dtype))));
  const auto header = codec.encode(
      {.baseline = c.baseline, .current = c.current, .dtype = c.dtype, .base = base, .name = c.name}, out);
  EXPECT_TRUE(header.has_value()) << header.error().message;
  if (!header) return {};
  out.resize(static_cast<std::size_t>(header->payload_bytes()));
  return out;
}

DeltaFormat format_of(const ByteVector& payload) { return read_delta_header(payload).value().format; }

// Runs from the encodings' bench case: each changed element one of a run of 1 to 5.
ChunkPair runs_pair(DType dtype, std::int64_t elements, double fraction, std::mt19937_64& rng) {
  std::bernoulli_distribution starts(fraction);
  std::int64_t left = 0;
  return testing::make_pair("runs " + std::to_string(fraction), dtype, elements, rng, [&](auto, auto b) {
    if (left == 0 && starts(rng)) left = static_cast<std::int64_t>(rng() % 5) + 1;
    if (left == 0) return b;
    --left;
    return ~b;
  });
}

// Every property of the file's header comment for one chunk.
void expect_same_as_cpu(GpuCodec& gpu, const ChunkPair& c) {
  SCOPED_TRACE(c.name + " (" + std::string(dtype_name(c.dtype)) + ", " + std::to_string(c.current.size()) +
               " bytes)");
  const Checksum base = checksum_of(c.baseline);
  const auto payload = gpu.encode(c, base);
  ASSERT_TRUE(payload.has_value()) << payload.error().message;
  EXPECT_EQ(*payload, cpu_encode(c, base, {.entropy = false}));

  DeltaCodec cpu;
  ByteVector by_cpu = c.baseline;
  const auto cpu_result =
      cpu.decode(*payload, {.bytes = by_cpu, .dtype = c.dtype, .base = base, .name = c.name});
  ASSERT_TRUE(cpu_result.has_value()) << cpu_result.error().message;
  EXPECT_TRUE(by_cpu == c.current);
  EXPECT_EQ(*cpu_result, checksum_of(c.current));

  for (const DeltaEncoding encoding :
       {DeltaEncoding::kBitmask, DeltaEncoding::kDense, DeltaEncoding::kRuns}) {
    const ByteVector from_cpu =
        cpu_encode(c, base, {.entropy = false, .format = DeltaFormat{.encoding = encoding}});
    ByteVector by_gpu = c.baseline;
    const auto gpu_result = gpu.decode(from_cpu, by_gpu, c.dtype, base);
    ASSERT_TRUE(gpu_result.has_value()) << gpu_result.error().message;
    EXPECT_TRUE(by_gpu == c.current) << delta_encoding_name(encoding);
    EXPECT_EQ(*gpu_result, checksum_of(c.current));
  }

  // A full refit: dense, the same payload as DeltaCodec's, whatever the receiver holds.
  const auto full = gpu.encode(c, std::nullopt);
  ASSERT_TRUE(full.has_value()) << full.error().message;
  EXPECT_EQ(*full, cpu_encode(c, std::nullopt, {.entropy = false}));
  ByteVector fresh(c.current.size(), std::byte{0x5a});
  const auto fresh_result = gpu.decode(*full, fresh, c.dtype, std::nullopt);
  ASSERT_TRUE(fresh_result.has_value()) << fresh_result.error().message;
  EXPECT_TRUE(fresh == c.current);
}

// `fraction` of the elements changed at random places, each in random bits of the element.
ChunkPair random_pair(DType dtype, std::int64_t elements, double fraction, std::mt19937_64& rng) {
  std::bernoulli_distribution changes(fraction);
  return testing::make_pair("random " + std::to_string(fraction), dtype, elements, rng, [&](auto, auto b) {
    if (!changes(rng)) return b;
    std::uint64_t x = 0;
    while ((x & (dtype_size(dtype) == 8 ? ~0ull : (1ull << (8 * dtype_size(dtype))) - 1)) == 0) x = rng();
    return b ^ x;
  });
}

constexpr DType kDtypes[] = {DType::kBF16, DType::kFP16, DType::kFP32, DType::kFP8E4M3, DType::kFP64};

TEST(DeltaKernelBody, RandomChunksMatchTheCpuCodecBothWays) {
  GpuCodec gpu;
  std::mt19937_64 rng(34);
  // Sizes around the lane (64 elements), the word (8 bytes) and the tile (16384 elements).
  std::uniform_int_distribution<std::int64_t> sizes(0, 40000);
  for (const DType dtype : kDtypes)
    for (const double fraction : {0.0, 0.001, 0.01, 0.03, 0.1, 0.3, 0.9, 1.0})
      for (int round = 0; round < 3; ++round)
        expect_same_as_cpu(gpu, random_pair(dtype, round == 0 ? 16384 + 63 : sizes(rng), fraction, rng));
}

TEST(DeltaKernelBody, RunsAcrossTheDecodersSegments) {
  GpuCodec gpu;
  std::mt19937_64 rng(12);
  for (const DType dtype : kDtypes)
    for (const double fraction : {0.001, 0.01, 0.05, 0.2})
      for (const std::int64_t elements : {1000, 30011, 200003})
        expect_same_as_cpu(gpu, runs_pair(dtype, elements, fraction, rng));
}

TEST(DeltaKernelBody, EdgeSizes) {
  GpuCodec gpu;
  std::mt19937_64 rng(7);
  for (const DType dtype : kDtypes)
    for (const std::int64_t elements : {0, 1, 3, 7, 63, 64, 65, 127, 16383, 16384, 16385, 2 * 16384 + 1})
      expect_same_as_cpu(gpu, random_pair(dtype, elements, 0.05, rng));
}

TEST(DeltaKernelBody, AdversarialChunks) {
  GpuCodec gpu;
  for (const DType dtype : kDtypes)
    for (const ChunkPair& c : testing::adversarial_pairs(dtype, 40013, 11)) expect_same_as_cpu(gpu, c);
}

// Each damaged payload (every byte flipped in its low bit and in all bits, every length cut
// short): the GPU codec accepts it exactly when DeltaCodec does, with the same bytes; refused, the
// receiver's bytes are untouched.
void expect_same_verdicts(GpuCodec& gpu, const ChunkPair& c, const ByteVector& payload, Checksum base) {
  DeltaCodec cpu;
  const auto verdicts_agree = [&](const ByteVector& damaged, const std::string& what) {
    SCOPED_TRACE(what);
    ByteVector by_cpu = c.baseline;
    ByteVector by_gpu = c.baseline;
    const auto cpu_result =
        cpu.decode(damaged, {.bytes = by_cpu, .dtype = c.dtype, .base = base, .name = "chunk"});
    const auto gpu_result = gpu.decode(damaged, by_gpu, c.dtype, base);
    ASSERT_EQ(gpu_result.has_value(), cpu_result.has_value())
        << (gpu_result ? cpu_result.error().message : gpu_result.error().message);
    if (!gpu_result) EXPECT_TRUE(by_gpu == c.baseline) << gpu_result.error().message;
    EXPECT_TRUE(by_gpu == by_cpu);
  };
  for (std::size_t at = 0; at < payload.size(); ++at)
    for (const std::byte flip : {std::byte{0x01}, std::byte{0xff}}) {
      ByteVector damaged = payload;
      damaged[at] ^= flip;
      verdicts_agree(damaged, "byte " + std::to_string(at) + " flipped");
    }
  for (std::size_t size = 0; size < payload.size(); ++size)
    verdicts_agree(ByteVector(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(size)),
                   "cut to " + std::to_string(size) + " bytes");
}

TEST(DeltaKernelBody, DamagedPayloadsAreRefusedAsTheCpuCodecRefusesThem) {
  GpuCodec gpu;
  std::mt19937_64 rng(3);
  // The runs payloads' positions span several of the decoder's 64-byte segments.
  for (const DType dtype : {DType::kBF16, DType::kFP32, DType::kFP8E4M3}) {
    const ChunkPair c = runs_pair(dtype, 1500, 0.06, rng);
    const Checksum base = checksum_of(c.baseline);
    for (const DeltaEncoding encoding :
         {DeltaEncoding::kBitmask, DeltaEncoding::kDense, DeltaEncoding::kRuns}) {
      SCOPED_TRACE(std::string(delta_encoding_name(encoding)) + " " + std::string(dtype_name(dtype)));
      expect_same_verdicts(
          gpu, c, cpu_encode(c, base, {.entropy = false, .format = DeltaFormat{.encoding = encoding}}), base);
    }
  }
}

// A receiver whose baseline is not the sender's, or that has none, is refused a sparse payload
// (kMismatch) and keeps its bytes; so is a payload for a chunk of another size or element size
// (fp16 for bf16 is the same size: bits are bits, as DeltaCodec has it).
TEST(DeltaKernelBody, ABaselineOrChunkThatDiffersIsRefused) {
  GpuCodec gpu;
  std::mt19937_64 rng(5);
  const ChunkPair c = random_pair(DType::kBF16, 1000, 0.02, rng);
  const Checksum base = checksum_of(c.baseline);
  const ByteVector payload = gpu.encode(c, base).value();
  ASSERT_EQ(format_of(payload).encoding, DeltaEncoding::kRuns);
  ByteVector bytes = c.baseline;
  for (const std::optional<Checksum> receiver :
       {std::optional<Checksum>{}, std::optional(Checksum{base.value + 1})}) {
    const auto result = gpu.decode(payload, bytes, c.dtype, receiver);
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::kMismatch) << result.error().message;
    EXPECT_TRUE(bytes == c.baseline);
  }
  const auto as_fp32 = gpu.decode(payload, bytes, DType::kFP32, base);
  ASSERT_FALSE(as_fp32.has_value());
  EXPECT_EQ(as_fp32.error().code, ErrorCode::kMismatch) << as_fp32.error().message;
  ByteVector shorter(bytes.begin(), bytes.end() - 2);
  const auto short_chunk = gpu.decode(payload, shorter, c.dtype, base);
  ASSERT_FALSE(short_chunk.has_value());
  EXPECT_EQ(short_chunk.error().code, ErrorCode::kMismatch) << short_chunk.error().message;
  EXPECT_TRUE(bytes == c.baseline);
}

// zstd payloads are DeltaCodec's alone: refused (kUnsupported) untouched, naming the format.
TEST(DeltaKernelBody, ZstdPayloadsAreRefusedUntouched) {
  GpuCodec gpu;
  std::mt19937_64 rng(9);
  const ChunkPair c = random_pair(DType::kBF16, 5000, 0.01, rng);
  const Checksum base = checksum_of(c.baseline);
  for (const DeltaEncoding encoding : {DeltaEncoding::kRuns, DeltaEncoding::kBitmask}) {
    const DeltaFormat format{.encoding = encoding, .entropy = DeltaEntropy::kZstd};
    ByteVector bytes = c.baseline;
    const auto result = gpu.decode(cpu_encode(c, base, {.format = format}), bytes, c.dtype, base);
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::kUnsupported) << result.error().message;
    EXPECT_NE(result.error().message.find(delta_format_name(format)), std::string::npos)
        << result.error().message;
    EXPECT_TRUE(bytes == c.baseline);
  }
}

}  // namespace
}  // namespace refit::nccl_detail
