#pragma once
// What a receiver does with the changes a body lists, in two passes so that a bad body leaves its
// bytes untouched: first ChecksumOfResult, which reads the bytes and writes nothing, then, once
// the body has been checked whole and the result's checksum is the sender's, ApplyChanges. Both
// take the changes as (element index, XOR of the element's bits), indices increasing.
#include <cstdint>
#include <cstring>
#include <span>

#include "element_types.h"
#include "refit/core/error.h"
#include "refit/delta/checksum.h"
#include "refit/delta/payload.h"
#include "words.h"

namespace refit::delta {

// The checksum the bytes will have once the changes are applied, from their checksum now.
template <class T>
class ChecksumOfResult {
 public:
  ChecksumOfResult(std::span<const std::byte> bytes, Checksum base) : bytes_(bytes), sum_(base) {}

  void operator()(std::int64_t index, T x) {
    constexpr std::int64_t kPerWord = 8 / sizeof(T);
    const std::int64_t word = index / kPerWord;
    if (word != word_) {
      flush();
      word_ = word;
    }
    xor_ |= static_cast<std::uint64_t>(x) << (8 * sizeof(T) * (index % kPerWord));
  }

  Checksum finish() {
    flush();
    return sum_;
  }

 private:
  void flush() {
    if (word_ < 0) return;
    const std::uint64_t before = load_word(bytes_, word_);
    sum_ = replace_word(sum_, static_cast<std::uint64_t>(word_), before, before ^ xor_);
    xor_ = 0;
  }

  std::span<const std::byte> bytes_;
  Checksum sum_;
  std::int64_t word_ = -1;
  std::uint64_t xor_ = 0;
};

template <class T>
class ApplyChanges {
 public:
  explicit ApplyChanges(std::span<std::byte> bytes) : bytes_(bytes.data()) {}
  void operator()(std::int64_t index, T x) {
    T v;
    std::memcpy(&v, bytes_ + index * sizeof(T), sizeof(T));
    v ^= x;
    std::memcpy(bytes_ + index * sizeof(T), &v, sizeof(T));
  }

 private:
  std::byte* bytes_;
};

// A sparse encoding's check() and apply(), from its Changes::list<T>(body, header, visit): the
// function that lists the body's changes to `visit`, checking the body as it goes.
template <class Changes>
Result<Checksum> check_changes(std::span<const std::byte> body, const DeltaHeader& header,
                               std::span<const std::byte> bytes, Checksum base) {
  return with_element_type(header.element_bytes, [&]<class T>(T) -> Result<Checksum> {
    ChecksumOfResult<T> result(bytes, base);
    auto visited = Changes::template list<T>(body, header, result);
    if (!visited) return std::unexpected(visited.error());
    return result.finish();
  });
}

template <class Changes>
void apply_changes(std::span<const std::byte> body, const DeltaHeader& header, std::span<std::byte> bytes) {
  with_element_type(header.element_bytes, [&]<class T>(T) {
    ApplyChanges<T> changes(bytes);
    (void)Changes::template list<T>(body, header, changes);
  });
}

}  // namespace refit::delta
