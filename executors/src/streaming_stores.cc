#include "refit/executors/streaming_stores.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace refit {

#if defined(__SSE2__)

namespace {

constexpr std::size_t kLine = 64;  // bytes per cache line, stored as four 16-byte quarters
// Below this a copy is a few lines: not worth the alignment work, and its source likely still
// cached. Zeroing streams every whole line whatever the size, since leaving none of the range in
// the cache is its point.
constexpr std::size_t kMinStreamedCopy = 4096;
constexpr std::size_t kMinStreamedZero = 2 * kLine;
// Lines of one 4 KiB page, and the pages copied side by side: the hardware prefetcher follows
// each page on its own, so walking four at once keeps four streams of reads in flight. Measured
// on 1 GiB of cold memory in 8 MiB pieces, one core: 5.5 GB/s one page at a time, 6.9 GB/s four
// (memcpy 4.6 GB/s).
constexpr std::size_t kPageLines = 4096 / kLine;
constexpr std::size_t kPagesAtOnce = 4;

void stream_line(std::byte* to, const std::byte* from) {
  const auto* in = reinterpret_cast<const __m128i*>(from);
  auto* out = reinterpret_cast<__m128i*>(to);
  const __m128i a = _mm_loadu_si128(in);
  const __m128i b = _mm_loadu_si128(in + 1);
  const __m128i c = _mm_loadu_si128(in + 2);
  const __m128i d = _mm_loadu_si128(in + 3);
  _mm_stream_si128(out, a);
  _mm_stream_si128(out + 1, b);
  _mm_stream_si128(out + 2, c);
  _mm_stream_si128(out + 3, d);
}

void stream_lines(std::byte* to, const std::byte* from, std::size_t lines) {
  constexpr std::size_t kBlock = kPageLines * kPagesAtOnce;
  std::size_t i = 0;
  for (; i + kBlock <= lines; i += kBlock)
    for (std::size_t k = 0; k < kPageLines; ++k)
      for (std::size_t p = 0; p < kPagesAtOnce; ++p) {
        const std::size_t at = (i + p * kPageLines + k) * kLine;
        stream_line(to + at, from + at);
      }
  for (; i < lines; ++i) stream_line(to + i * kLine, from + i * kLine);
}

// Zeroes `lines` whole lines from the line-aligned `to`.
void zero_lines(std::byte* to, std::size_t lines) {
  const __m128i zero = _mm_setzero_si128();
  auto* out = reinterpret_cast<__m128i*>(to);
  for (std::size_t i = 0; i < lines * (kLine / sizeof(__m128i)); ++i) _mm_stream_si128(out + i, zero);
}

// Non-temporal stores want an aligned destination: `small(at, n)` stores the bytes up to the
// first line boundary and after the last whole line, `lines(at, count)` the whole lines between;
// a range shorter than `shortest` (at least two lines) is `small` alone.
template <class Small, class Lines>
void by_lines(std::byte* to, std::size_t bytes, std::size_t shortest, Small small, Lines lines) {
  if (bytes < shortest) {
    small(std::size_t{0}, bytes);
    return;
  }
  const std::size_t head = (kLine - (reinterpret_cast<std::uintptr_t>(to) % kLine)) % kLine;
  small(std::size_t{0}, head);
  const std::size_t count = (bytes - head) / kLine;
  lines(head, count);
  const std::size_t done = head + count * kLine;
  small(done, bytes - done);
}

}  // namespace

void streaming_copy(std::byte* to, const std::byte* from, std::size_t bytes) {
  by_lines(
      to, bytes, kMinStreamedCopy, [&](std::size_t at, std::size_t n) { std::memcpy(to + at, from + at, n); },
      [&](std::size_t at, std::size_t count) { stream_lines(to + at, from + at, count); });
}

void streaming_zero(std::byte* to, std::size_t bytes) {
  by_lines(
      to, bytes, kMinStreamedZero, [&](std::size_t at, std::size_t n) { std::memset(to + at, 0, n); },
      [&](std::size_t at, std::size_t count) { zero_lines(to + at, count); });
}

void store_fence() { _mm_sfence(); }

#else

void streaming_copy(std::byte* to, const std::byte* from, std::size_t bytes) { std::memcpy(to, from, bytes); }

void streaming_zero(std::byte* to, std::size_t bytes) { std::memset(to, 0, bytes); }

void store_fence() { std::atomic_thread_fence(std::memory_order_release); }

#endif

}  // namespace refit
