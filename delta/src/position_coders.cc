#include "position_coder.h"

#include <array>

namespace refit::delta {

std::span<const PositionCoder* const> position_coders() {
  static const std::array<const PositionCoder*, 3> table = {&dense_coder(), &bitmask_coder(), &runs_coder()};
  return table;
}

const PositionCoder& position_coder(DeltaEncoding encoding) {
  return *position_coders()[static_cast<std::size_t>(encoding)];
}

}  // namespace refit::delta
