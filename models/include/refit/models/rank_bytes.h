#pragma once
// How many bytes of weights each rank of a reshard problem holds on each side.
#include <vector>

#include "refit/core/problem.h"
#include "refit/core/units.h"

namespace refit::models {

struct RankBytes {
  std::vector<Bytes> source;       // index r: training rank r
  std::vector<Bytes> destination;  // index i: inference rank source_ranks + i
};

RankBytes rank_bytes(const ReshardProblem& problem);

}  // namespace refit::models
