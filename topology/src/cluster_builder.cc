#include "cluster_builder.h"

#include <algorithm>

#include "refit/core/checked.h"

namespace refit::detail {

void fill_domains(ClusterSpec& spec) {
  std::int32_t count = 0;
  for (const auto& g : spec.gpus) count = std::max(count, g.domain + 1);
  spec.domains.assign(static_cast<std::size_t>(count), DomainSpec{});
  for (std::int32_t d = 0; d < count; ++d) spec.domains[static_cast<std::size_t>(d)].id = d;
  for (const auto& g : spec.gpus) spec.domains[static_cast<std::size_t>(g.domain)].gpus.push_back(g.id);
}

ClusterSpec replicate_node(const ClusterSpec& node, std::int32_t count) {
  ClusterSpec out = node;
  out.gpus.clear();
  out.nics.clear();
  const auto gpus = static_cast<std::int32_t>(node.gpus.size());
  const auto domains = static_cast<std::int32_t>(node.domains.size());
  for (std::int32_t n = 0; n < count; ++n) {
    for (auto g : node.gpus) {
      g.id = GpuId{g.id.value + n * gpus};
      g.node = n;
      g.domain += n * domains;
      out.gpus.push_back(std::move(g));
    }
    for (auto nic : node.nics) {
      nic.id = static_cast<std::int32_t>(out.nics.size());
      nic.node = n;
      for (auto& g : nic.gpus) g = GpuId{g.value + n * gpus};
      out.nics.push_back(std::move(nic));
    }
  }
  fill_domains(out);
  return out;
}

std::int32_t nodes_for(std::int32_t gpus, std::int32_t gpus_per_node) {
  return static_cast<std::int32_t>(std::max<std::int64_t>(1, ceil_div(gpus, gpus_per_node)));
}

}  // namespace refit::detail
