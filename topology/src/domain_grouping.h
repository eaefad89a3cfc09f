#pragma once
// NVLink domains from NVLink connectivity, shared by the NCCL XML importer and discovery.
// GPUs linked directly share a domain; all GPUs linked to the node's NVSwitches share one (the
// switches give all-to-all NVLink between them).
#include <cstdint>
#include <vector>

namespace refit::detail {

class DomainGrouping {
 public:
  explicit DomainGrouping(std::int32_t gpus);

  void join(std::int32_t a, std::int32_t b);
  void join_switch(std::int32_t gpu);

  // Per GPU its domain, numbered densely in order of each domain's lowest GPU.
  std::vector<std::int32_t> domains();

 private:
  std::int32_t root(std::int32_t g);

  std::vector<std::int32_t> parent_;
  std::int32_t first_switch_gpu_ = -1;
};

}  // namespace refit::detail
