#include "refit/lowering/pair_pacing.h"

#include <algorithm>

namespace refit::lowering {

PairPacing::PairPacing(std::vector<std::int64_t> pair_bytes)
    : total_(std::move(pair_bytes)), sent_(total_.size(), 0) {}

// When the chunk ends as a fraction of the pair's bytes: the time it ends in the weighted share,
// in units of the time every pair takes.
double PairPacing::finish(std::size_t pair, std::int64_t chunk) const {
  return static_cast<double>(sent_[pair] + chunk) /
         static_cast<double>(std::max<std::int64_t>(total_[pair], 1));
}

bool PairPacing::before(std::size_t a, std::int64_t a_chunk, std::size_t b, std::int64_t b_chunk) const {
  const double fa = finish(a, a_chunk);
  const double fb = finish(b, b_chunk);
  return fa < fb || (fa == fb && a < b);
}

}  // namespace refit::lowering
