#pragma once
// Fixed-size slots of a staging region, handed out and returned by index.
#include <cstdint>
#include <vector>

namespace refit::ucx_detail {

class SlotPool {
 public:
  explicit SlotPool(std::int64_t slots) {
    for (std::int64_t s = slots; s-- > 0;) free_.push_back(s);
  }
  bool available() const { return !free_.empty(); }
  // Precondition: available().
  std::int64_t take() {
    const auto s = free_.back();
    free_.pop_back();
    return s;
  }
  void give(std::int64_t slot) { free_.push_back(slot); }

 private:
  std::vector<std::int64_t> free_;
};

}  // namespace refit::ucx_detail
