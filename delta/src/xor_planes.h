#pragma once
// The changed elements' XOR values as byte planes: plane p holds byte p of every value, in the
// order of the changes (planes[p * count + c]). An RL step moves a weight by a few units in its
// last place, so its XOR has zeros in the high bytes; gathered into their own planes those zeros
// become long runs an entropy stage packs well (docs/delta.md has the measurement).
#include <cstddef>
#include <cstdint>

namespace refit::delta {

template <class T>
class PlaneWriter {
 public:
  PlaneWriter(std::byte* planes, std::int64_t count) : planes_(planes), count_(count) {}
  void put(T x) {
    for (std::size_t p = 0; p < sizeof(T); ++p)
      planes_[p * count_ + next_] = static_cast<std::byte>(x >> (8 * p));
    ++next_;
  }

 private:
  std::byte* planes_;
  std::int64_t count_;
  std::int64_t next_ = 0;
};

template <class T>
class PlaneReader {
 public:
  PlaneReader(const std::byte* planes, std::int64_t count) : planes_(planes), count_(count) {}
  // The next value; the caller reads at most `count` of them.
  T next() {
    T x = 0;
    for (std::size_t p = 0; p < sizeof(T); ++p)
      x |= static_cast<T>(static_cast<T>(planes_[p * count_ + next_]) << (8 * p));
    ++next_;
    return x;
  }

 private:
  const std::byte* planes_;
  std::int64_t count_;
  std::int64_t next_ = 0;
};

}  // namespace refit::delta
