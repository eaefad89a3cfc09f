// The GPU delta codec (executors/nccl/src/delta_kernel.cu) on a GPU, against refit::DeltaCodec
// and against its own bodies run on the host (HostDeltaKernels), bit for bit:
// - the payload the kernels write for a chunk is the host bodies' and DeltaCodec's (entropy off);
// - DeltaCodec decodes it to the current bytes, and the kernels decode DeltaCodec's dense, bitmask
//   and runs payloads to them;
// - a payload whose planes or mask were damaged is refused with the receiver's device bytes
//   untouched.
// Chunks of bf16, fp16, fp32, fp8 and fp64, from empty to more tiles than the kernels' grid (the
// tiles strided over the blocks, the one-block kernels' threads holding several tiles, lanes or
// segments each), at 8-byte
// aligned and odd device addresses (the byte-wise loads). Throughput is bench/delta_gpu_bench's.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "chunk_data.h"
#include "cuda_delta_kernels.h"
#include "cuda_handles.h"
#include "device_delta_codec.h"
#include "gpu_support.h"
#include "refit/delta/codec.h"

namespace refit {
namespace {

using nccl_detail::CudaDeltaKernels;
using nccl_detail::DeviceDeltaCodec;
using nccl_detail::DeviceMemory;
using nccl_detail::HostDeltaKernels;
using testing::ByteVector;
using testing::ChunkPair;

// Device memory holding `bytes` at `offset` bytes past an aligned allocation.
struct DeviceBytes {
  DeviceMemory memory;
  std::byte* at = nullptr;
  DeviceBytes(std::size_t bytes, std::size_t offset) {
    EXPECT_TRUE(memory.allocate(bytes + offset + 8, "test bytes").has_value());
    at = memory.get() + offset;
  }
  void upload(const ByteVector& host) {
    EXPECT_TRUE(nccl_detail::upload(at, host.data(), host.size(), "test bytes").has_value());
  }
  ByteVector download(std::size_t bytes) const {
    ByteVector host(bytes);
    EXPECT_EQ(cudaMemcpy(host.data(), at, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
};

ChunkPair random_pair(DType dtype, std::int64_t elements, double fraction, std::mt19937_64& rng) {
  std::bernoulli_distribution changes(fraction);
  return testing::make_pair("random", dtype, elements, rng,
                            [&](auto, auto b) { return changes(rng) ? ~b : b; });
}

// The payload of `c` encoded by `kernels` over chunks in their memory (device or host).
ByteVector encode_with(nccl_detail::DeltaKernels& kernels, const std::byte* baseline,
                       const std::byte* current, std::byte* out, const ChunkPair& c, Checksum base,
                       bool device) {
  DeviceDeltaCodec codec(kernels);
  const auto bytes = static_cast<std::int64_t>(c.current.size());
  const auto header = codec.encode({.baseline = baseline,
                                    .current = current,
                                    .bytes = bytes,
                                    .dtype = c.dtype,
                                    .base = base,
                                    .name = "chunk"},
                                   out, kDeltaHeaderBytes + bytes);
  EXPECT_TRUE(header.has_value()) << header.error().message;
  if (!header) return {};
  const auto size = static_cast<std::size_t>(header->payload_bytes());
  if (!device) return ByteVector(out, out + size);
  ByteVector host(size);
  EXPECT_EQ(cudaMemcpy(host.data(), out, size, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// DeltaCodec's payload with its entropy stage off: its own choice, or `encoding`.
ByteVector cpu_encode(const ChunkPair& c, Checksum base, std::optional<DeltaEncoding> encoding) {
  DeltaCodec codec({.entropy = false,
                    .format = encoding ? std::optional(DeltaFormat{.encoding = *encoding}) : std::nullopt});
  ByteVector out(static_cast<std::size_t>(
      delta_payload_capacity(static_cast<std::int64_t>(c.current.size()), dtype_size(c.dtype))));
  const auto header =
      codec.encode({.baseline = c.baseline, .current = c.current, .dtype = c.dtype, .base = base}, out);
  EXPECT_TRUE(header.has_value());
  out.resize(static_cast<std::size_t>(header->payload_bytes()));
  return out;
}

// Decodes `payload` on the GPU onto a device copy of the baseline; the bytes after, and the result.
std::pair<ByteVector, Result<Checksum>> gpu_decode(CudaDeltaKernels& kernels, const ChunkPair& c,
                                                   const ByteVector& payload, Checksum base,
                                                   std::size_t offset) {
  DeviceBytes target(c.baseline.size(), offset);
  DeviceBytes in(payload.size(), offset);
  target.upload(c.baseline);
  in.upload(payload);
  DeviceDeltaCodec codec(kernels);
  auto result = codec.decode(in.at, static_cast<std::int64_t>(payload.size()),
                             {.bytes = target.at,
                              .size = static_cast<std::int64_t>(c.baseline.size()),
                              .dtype = c.dtype,
                              .base = base,
                              .name = "chunk"});
  return {target.download(c.baseline.size()), std::move(result)};
}

void expect_gpu_as_cpu(CudaDeltaKernels& kernels, const ChunkPair& c, std::size_t offset) {
  SCOPED_TRACE(std::string(dtype_name(c.dtype)) + ", " + std::to_string(c.current.size()) +
               " bytes at offset " + std::to_string(offset));
  const Checksum base = checksum_of(c.baseline);
  const std::size_t n = c.current.size();
  DeviceBytes baseline(n, offset), current(n, offset), out(kDeltaHeaderBytes + n, offset);
  baseline.upload(c.baseline);
  current.upload(c.current);
  const ByteVector on_gpu = encode_with(kernels, baseline.at, current.at, out.at, c, base, true);
  HostDeltaKernels host;
  ByteVector host_out(kDeltaHeaderBytes + n);
  EXPECT_EQ(on_gpu, encode_with(host, c.baseline.data(), c.current.data(), host_out.data(), c, base, false));
  EXPECT_EQ(on_gpu, cpu_encode(c, base, std::nullopt));

  DeltaCodec cpu;
  ByteVector by_cpu = c.baseline;
  EXPECT_TRUE(cpu.decode(on_gpu, {.bytes = by_cpu, .dtype = c.dtype, .base = base}).has_value());
  EXPECT_TRUE(by_cpu == c.current);
  for (const DeltaEncoding e : {DeltaEncoding::kBitmask, DeltaEncoding::kDense, DeltaEncoding::kRuns}) {
    const auto [bytes, result] = gpu_decode(kernels, c, cpu_encode(c, base, e), base, offset);
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(*result, checksum_of(c.current));
    EXPECT_TRUE(bytes == c.current) << delta_encoding_name(e);
  }
}

// The kernels on a stream of their own.
class GpuDeltaCodec : public ::testing::Test {
 protected:
  void SetUp() override {
    REFIT_REQUIRE_GPU();
    ASSERT_TRUE(stream_.create().has_value());
    kernels_.emplace(stream_.get());
  }
  CudaDeltaKernels& kernels() { return *kernels_; }

 private:
  nccl_detail::Stream stream_;
  std::optional<CudaDeltaKernels> kernels_;
};

TEST_F(GpuDeltaCodec, MatchesTheCpuCodecAndItsHostBodies) {
  std::mt19937_64 rng(34);
  for (const DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32, DType::kFP8E4M3, DType::kFP64})
    for (const double fraction : {0.0, 0.001, 0.01, 0.1, 0.3, 1.0})
      for (const std::int64_t elements : {0, 1, 63, 65, 16385, 1000003})
        for (const std::size_t offset : {0, 3})
          expect_gpu_as_cpu(kernels(), random_pair(dtype, elements, fraction, rng), offset);
}

// 2^27 + 5 fp8 elements: 8193 tiles, one more than the grid's blocks, nine per prefix thread.
TEST_F(GpuDeltaCodec, MoreTilesThanBlocks) {
  std::mt19937_64 rng(5);
  expect_gpu_as_cpu(kernels(), random_pair(DType::kFP8E4M3, (std::int64_t{1} << 27) + 5, 0.01, rng), 0);
}

TEST_F(GpuDeltaCodec, DamagedPayloadsAreRefusedUntouched) {
  std::mt19937_64 rng(3);
  const ChunkPair c = random_pair(DType::kBF16, 100000, 0.02, rng);
  const Checksum base = checksum_of(c.baseline);
  // A mask bit or a run's position flipped (the count disagrees with the header, or the checksum),
  // a plane's byte and the last plane's last byte (the checksum disagrees): each refused before
  // anything is written.
  const auto header = static_cast<std::size_t>(kDeltaHeaderBytes);
  for (const DeltaEncoding encoding : {DeltaEncoding::kBitmask, DeltaEncoding::kRuns}) {
    const ByteVector payload = cpu_encode(c, base, encoding);
    for (const std::size_t at : {header + 10, payload.size() - 1000, payload.size() - 1}) {
      ByteVector damaged = payload;
      damaged[at] ^= std::byte{0x01};
      const auto [bytes, result] = gpu_decode(kernels(), c, damaged, base, 0);
      EXPECT_FALSE(result.has_value()) << delta_encoding_name(encoding) << " byte " << at;
      EXPECT_TRUE(bytes == c.baseline) << delta_encoding_name(encoding) << " byte " << at;
    }
  }
}

}  // namespace
}  // namespace refit
