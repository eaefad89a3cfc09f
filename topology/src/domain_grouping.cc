#include "domain_grouping.h"

#include <algorithm>
#include <numeric>

namespace refit::detail {

DomainGrouping::DomainGrouping(std::int32_t gpus) : parent_(static_cast<std::size_t>(gpus)) {
  std::iota(parent_.begin(), parent_.end(), 0);
}

std::int32_t DomainGrouping::root(std::int32_t g) {
  while (parent_[static_cast<std::size_t>(g)] != g) {
    auto& p = parent_[static_cast<std::size_t>(g)];
    p = parent_[static_cast<std::size_t>(p)];  // path halving keeps the trees flat
    g = p;
  }
  return g;
}

void DomainGrouping::join(std::int32_t a, std::int32_t b) {
  const auto ra = root(a);
  const auto rb = root(b);
  if (ra != rb) parent_[static_cast<std::size_t>(std::max(ra, rb))] = std::min(ra, rb);
}

void DomainGrouping::join_switch(std::int32_t gpu) {
  if (first_switch_gpu_ < 0) first_switch_gpu_ = gpu;
  join(first_switch_gpu_, gpu);
}

std::vector<std::int32_t> DomainGrouping::domains() {
  std::vector<std::int32_t> id_of_root(parent_.size(), -1);
  std::vector<std::int32_t> out;
  std::int32_t next = 0;
  for (std::size_t g = 0; g < parent_.size(); ++g) {
    auto& id = id_of_root[static_cast<std::size_t>(root(static_cast<std::int32_t>(g)))];
    if (id < 0) id = next++;
    out.push_back(id);
  }
  return out;
}

}  // namespace refit::detail
