#pragma once
// Stable sorting by small integer keys in linear time (counting sort). The planner and the
// validation order up to millions of items by rank, tensor or phase, where a comparison sort
// costs a pass over the items per level of its recursion.
#include <cstddef>
#include <numeric>
#include <vector>

namespace refit::planner_detail {

// `items` sorted by key(item), a number below `keys`, keeping the order of equal keys.
template <typename T, typename Key>
std::vector<T> counting_sorted(std::vector<T> items, std::size_t keys, Key key) {
  std::vector<std::size_t> first(keys + 1, 0);
  for (const auto& x : items) ++first[key(x) + 1];
  std::partial_sum(first.begin(), first.end(), first.begin());
  std::vector<T> out(items.size());
  for (auto& x : items) out[first[key(x)]++] = std::move(x);
  return out;
}

}  // namespace refit::planner_detail
