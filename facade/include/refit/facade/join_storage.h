#pragma once
// Where a join's shards lie in the frameworks' parameters (membership.h's JoinProblem), so that an
// executor runs a join like any refit: a peer's source buffers are its own inference parameters
// (its destination shards of the full problem), the joining engine's destination buffers its own.
#include "refit/core/error.h"
#include "refit/models/storage_map.h"
#include "refit/planner/membership.h"

namespace refit {

// The join's two sides as the frameworks store them.
struct JoinStorage {
  models::StorageMap sources;       // training ranks, then peers: ranks 0.. of the join
  models::StorageMap destinations;  // the joining engine's ranks
};

// From the full problem's storage maps (load_storage: `training` Megatron's, `inference` vLLM's):
// a training rank keeps its parameters with the regions of the tensors the training ranks send,
// a peer its inference parameters with the regions of the tensors the peers send, and the joining
// engine its inference parameters and regions. Errors name the map that lacks a rank.
[[nodiscard]] Result<JoinStorage> join_storage(const JoinProblem& join, const models::StorageMap& training,
                                               const models::StorageMap& inference);

}  // namespace refit
