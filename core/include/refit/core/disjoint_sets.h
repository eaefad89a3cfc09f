// Disjoint sets (union-find) over 0..n-1: which items a relation joins into one part. The planner
// finds a problem's independent parts with it, the simulator a plan's components.
#pragma once

#include <cstddef>
#include <numeric>
#include <vector>

namespace refit {

// Union-find with path halving: near-constant time per call, n words of memory.
class DisjointSets {
 public:
  // `n` items, each a set of its own.
  explicit DisjointSets(std::size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }

  // The representative of x's set: equal for two items exactly when they have been joined.
  std::size_t find(std::size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }

  // Merges the sets of a and b.
  void join(std::size_t a, std::size_t b) { parent_[find(a)] = find(b); }

  // How many items there are.
  [[nodiscard]] std::size_t size() const { return parent_.size(); }

 private:
  std::vector<std::size_t> parent_;
};

}  // namespace refit
