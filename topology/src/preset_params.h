#pragma once
// The parameters of a preset and the key=value overrides that change them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/topology/cluster.h"

namespace refit::detail {

struct PresetParams {
  std::string name;
  std::int32_t gpus_per_node = 1;
  std::optional<std::int32_t> gpus_per_domain;  // nullopt: the domain is the node
  std::optional<std::int32_t> nics_per_node;    // nullopt: one per GPU (rail-optimised)
  std::string nic_name;                         // empty: "rail<i>"
  BytesPerSecond nic;                           // effective, per direction
  BytesPerSecond nvlink;
  BytesPerSecond copy;
  QuantizeRates quantize{};             // per GPU, bf16 bytes/s per FP8 format; 0 where unmeasured
  std::optional<NcclCosts> nccl_costs;  // per GPU, refit's NCCL executor's; nullopt where unmeasured
  std::string copy_assumed;  // what `copy` assumes (hw::copy_assumption); empty when measured or given
  Bytes memory;              // per GPU; 0 when unknown
  Seconds latency;           // per network message
  Seconds nvlink_latency;
  Seconds chunk_overhead{};     // the sender's own time per chunk over the network: none measured
  Seconds transfer_overhead{};  // and per transfer: none measured
  double oversubscription = 1.0;
  std::optional<std::int32_t> nodes;  // nullopt: sized to the placement
  std::optional<std::int32_t> infer_offset;
  bool one_device_per_rank = false;  // cpu-host: as many devices as ranks

  std::int32_t domain_gpus() const { return gpus_per_domain.value_or(gpus_per_node); }
  // Each NIC serves gpus_per_node / node_nics() GPUs.
  std::int32_t node_nics() const { return nics_per_node.value_or(gpus_per_node); }
};

// (key, meaning) of every override key.
std::vector<std::pair<std::string, std::string>> override_keys();

// Applies "key=value,key=value"; errors name the key (unknown keys list the valid ones).
[[nodiscard]] Result<void> apply_overrides(PresetParams& params, std::string_view overrides);

// Checks that the sizes fit together (domains of whole nodes or nodes of whole domains, NICs
// that split a node's GPUs evenly); errors name the keys involved.
[[nodiscard]] Result<void> check_consistency(const PresetParams& params);

}  // namespace refit::detail
