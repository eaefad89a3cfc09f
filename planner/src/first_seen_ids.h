#pragma once
// Numbers keys 0, 1, 2, ... in the order they are first seen. The planner groups up to millions
// of items by small keys (a piece and its sender, a pair of ranks); a node-based hash map costs
// an allocation and a pointer chase per key, so the keys live in one array probed linearly.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace refit::planner_detail {

// Key: regular (copyable, ==); Hash: a callable giving a 64-bit hash of a key (its bits are
// mixed again here, so a plain combination of the fields will do).
template <class Key, class Hash>
class FirstSeenIds {
 public:
  // The id of `key`, and whether it is new (then it is size() - 1).
  std::pair<std::uint32_t, bool> insert(const Key& key) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    std::size_t i = home(key);
    for (; slots_[i].id != kEmpty; i = (i + 1) & (slots_.size() - 1))
      if (slots_[i].key == key) return {slots_[i].id, false};
    slots_[i] = Slot{.key = key, .id = static_cast<std::uint32_t>(size_)};
    return {static_cast<std::uint32_t>(size_++), true};
  }

  std::optional<std::uint32_t> find(const Key& key) const {
    if (slots_.empty()) return std::nullopt;
    for (std::size_t i = home(key); slots_[i].id != kEmpty; i = (i + 1) & (slots_.size() - 1))
      if (slots_[i].key == key) return slots_[i].id;
    return std::nullopt;
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    Key key{};
    std::uint32_t id = kEmpty;
  };

  // The top bits of the hash times a 64-bit odd constant (Fibonacci hashing): every bit of the
  // hash reaches them, so keys that differ in high fields alone still spread.
  std::size_t home(const Key& key) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(Hash{}(key)) * 0x9e3779b97f4a7c15ull) >>
                                    shift_);
  }

  void grow() {
    auto old = std::exchange(slots_, std::vector<Slot>(std::max<std::size_t>(16, 2 * slots_.size())));
    shift_ = 64 - std::countr_zero(slots_.size());
    for (const Slot& s : old) {
      if (s.id == kEmpty) continue;
      std::size_t i = home(s.key);
      while (slots_[i].id != kEmpty) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;  // a power of two of them, at most half full
  std::size_t size_ = 0;
  int shift_ = 64;  // 64 - log2(slots)
};

}  // namespace refit::planner_detail
