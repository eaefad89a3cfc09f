#pragma once
// A 64-bit fingerprint of plain values, for ranks to compare what they built (plans, problems)
// without sending it. Not cryptographic: it tells honest mistakes apart, nothing more. Each value
// is mixed in as one 64-bit word (byte by byte, as FNV-1a does, was a tenth of `refit plan`).
#include <cstdint>
#include <span>
#include <string_view>

#include "refit/core/box.h"
#include "refit/core/tensor_spec.h"

namespace refit {

class Fingerprint {
 public:
  void add(std::uint64_t v);
  void add(std::string_view s);               // its length, then its bytes
  void add(std::span<const std::int64_t> s);  // its length, then its values
  void add(const TensorSpec& t);              // name, shape, dtype and quantization
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;  // any start; FNV-1a's offset basis
};

}  // namespace refit
