// Fuzz target: the delta codec's decoder, on payloads it made and then damaged, and on payloads
// made of the input itself. Whatever the payload, decode() either applies it exactly or refuses it
// as bad input with the receiver's bytes untouched: never a crash, an out-of-bounds access or a
// half-written chunk. And every payload encode() makes of two chunks decodes to the second.
//
// The input: byte 0 picks the element width (bits 0-1: 1, 2, 4, 8 bytes), the format (bits 2-4:
// the smallest, or one of the six forced) and the mode (bit 7: the rest of the input is the
// payload); bytes 1-2 the element count (below 4096); then the baseline, the current bytes (zeros
// where the input runs out) and, in the damage mode, (offset u16, xor byte) triples to apply to
// the payload (an offset past its end cuts it there instead). Seeds (tests/data/fuzz/delta_payload/):
// a damage-mode input, and valid runs (bf16), bitmask (fp32) and dense (fp8) payloads, raw mode.
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz_input.h"
#include "refit/delta/codec.h"

namespace {

using Bytes = std::vector<std::byte>;

struct Input : refit::fuzz::ByteReader {
  Bytes take(std::size_t n) {
    Bytes out(n);
    for (auto& b : out) b = static_cast<std::byte>(next());
    return out;
  }
};

constexpr refit::DType kWidths[] = {refit::DType::kFP8E4M3, refit::DType::kBF16, refit::DType::kFP32,
                                    refit::DType::kFP64};

std::optional<refit::DeltaFormat> format_of(std::uint8_t pick) {
  const auto encodings = refit::all_delta_encodings();
  const auto entropies = refit::all_delta_entropies();
  const std::size_t n = encodings.size() * entropies.size();
  if (pick % (n + 1) == 0) return std::nullopt;
  const std::size_t i = pick % (n + 1) - 1;
  return refit::DeltaFormat{encodings[i / entropies.size()], entropies[i % entropies.size()]};
}

// Decodes `payload` onto a copy of `baseline`: exact (`expected`, when known) or refused cleanly.
void decode_checked(refit::DeltaCodec& codec, std::span<const std::byte> payload, const Bytes& baseline,
                    refit::DType dtype, const Bytes* expected) {
  Bytes receiver = baseline;
  const auto result = codec.decode(
      payload, {.bytes = receiver, .dtype = dtype, .base = refit::checksum_of(baseline), .name = "fuzz"});
  refit::fuzz::expect_clean(result);
  if (!result && receiver != baseline) std::abort();  // refused, but written
  if (result && *result != refit::checksum_of(receiver)) std::abort();
  if (result && expected && receiver != *expected) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{{{data, size}}};
  const std::uint8_t first = in.next();
  const refit::DType dtype = kWidths[first & 3];
  const bool raw_payload = (first & 0x80) != 0;
  const std::size_t elements = (in.next() | in.next() << 8) % 4096;
  const auto bytes = elements * static_cast<std::size_t>(refit::dtype_size(dtype));
  const Bytes baseline = in.take(bytes);
  refit::DeltaCodec codec({.format = format_of(static_cast<std::uint8_t>(first >> 2 & 7))});
  if (raw_payload) {
    const Bytes payload(reinterpret_cast<const std::byte*>(in.rest.data()),
                        reinterpret_cast<const std::byte*>(in.rest.data() + in.rest.size()));
    decode_checked(codec, payload, baseline, dtype, nullptr);
    return 0;
  }
  const Bytes current = in.take(bytes);
  Bytes payload(static_cast<std::size_t>(
      refit::delta_payload_capacity(static_cast<std::int64_t>(bytes), refit::dtype_size(dtype))));
  const auto header = codec.encode(
      {.baseline = baseline, .current = current, .dtype = dtype, .base = refit::checksum_of(baseline)},
      payload);
  if (!header) std::abort();  // the buffer holds any payload: encoding cannot fail
  payload.resize(static_cast<std::size_t>(header->payload_bytes()));
  decode_checked(codec, payload, baseline, dtype, &current);
  while (in.rest.size() >= 3) {
    const std::size_t at = in.next() | in.next() << 8;
    const auto flip = static_cast<std::byte>(in.next());
    if (at < payload.size())
      payload[at] ^= flip;
    else
      payload.resize(at % (payload.size() + 1));
  }
  decode_checked(codec, payload, baseline, dtype, &current);
  return 0;
}
