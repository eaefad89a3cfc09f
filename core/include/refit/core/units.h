#pragma once
// Strong types for quantities with units, so that bytes, seconds and bandwidths
// cannot be mixed by accident and every signature says what it expects.
#include <compare>
#include <cstdint>
#include <functional>

namespace refit {

// A count of bytes. Signed so that differences are representable.
struct Bytes {
  std::int64_t value = 0;
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::int64_t v) : value(v) {}
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes& operator+=(Bytes o) {
    value += o.value;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    value -= o.value;
    return *this;
  }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes{a.value + b.value}; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes{a.value - b.value}; }
  friend constexpr Bytes operator*(Bytes a, std::int64_t k) { return Bytes{a.value * k}; }
};

struct Seconds {
  double value = 0.0;
  constexpr Seconds() = default;
  constexpr explicit Seconds(double v) : value(v) {}
  constexpr auto operator<=>(const Seconds&) const = default;
  constexpr Seconds& operator+=(Seconds o) {
    value += o.value;
    return *this;
  }
  friend constexpr Seconds operator+(Seconds a, Seconds b) { return Seconds{a.value + b.value}; }
  friend constexpr Seconds operator-(Seconds a, Seconds b) { return Seconds{a.value - b.value}; }
  friend constexpr Seconds operator*(Seconds a, double k) { return Seconds{a.value * k}; }
  friend constexpr double operator/(Seconds a, Seconds b) { return a.value / b.value; }
};

struct BytesPerSecond {
  double value = 0.0;
  constexpr BytesPerSecond() = default;
  constexpr explicit BytesPerSecond(double v) : value(v) {}
  constexpr auto operator<=>(const BytesPerSecond&) const = default;
  friend constexpr BytesPerSecond operator+(BytesPerSecond a, BytesPerSecond b) {
    return BytesPerSecond{a.value + b.value};
  }
  friend constexpr BytesPerSecond operator*(BytesPerSecond a, double k) {
    return BytesPerSecond{a.value * k};
  }
  // GB/s in the decimal sense of docs/hardware.md (1 GB = 1e9 bytes).
  static constexpr BytesPerSecond from_gbps(double gigabytes_per_second) {
    return BytesPerSecond{gigabytes_per_second * 1e9};
  }
  constexpr double gbps() const { return value / 1e9; }
};

// Time to move `b` bytes at rate `r`; infinite rate is not representable here on purpose.
constexpr Seconds transfer_time(Bytes b, BytesPerSecond r) {
  return Seconds{static_cast<double>(b.value) / r.value};
}
constexpr BytesPerSecond rate(Bytes b, Seconds t) {
  return BytesPerSecond{static_cast<double>(b.value) / t.value};
}

// A global rank of the refit job (training ranks first, then inference ranks).
struct Rank {
  std::int32_t value = 0;
  constexpr Rank() = default;
  constexpr explicit Rank(std::int32_t v) : value(v) {}
  constexpr auto operator<=>(const Rank&) const = default;
};

// A physical GPU of a cluster.
struct GpuId {
  std::int32_t value = 0;
  constexpr GpuId() = default;
  constexpr explicit GpuId(std::int32_t v) : value(v) {}
  constexpr auto operator<=>(const GpuId&) const = default;
};

}  // namespace refit

template <>
struct std::hash<refit::Rank> {
  std::size_t operator()(refit::Rank r) const noexcept { return std::hash<std::int32_t>{}(r.value); }
};
template <>
struct std::hash<refit::GpuId> {
  std::size_t operator()(refit::GpuId g) const noexcept { return std::hash<std::int32_t>{}(g.value); }
};
