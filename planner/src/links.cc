#include "refit/planner/links.h"

#include <fmt/format.h>

namespace refit {

LinkKind link_between(const PlacedCluster& cluster, Rank a, Rank b) {
  if (cluster.gpu_of(a) == cluster.gpu_of(b)) return LinkKind::kLocal;
  return cluster.domain_of(a) == cluster.domain_of(b) ? LinkKind::kNvlink : LinkKind::kNetwork;
}

Result<void> check_links(const Plan& plan, const PlacedCluster& cluster) {
  for (const Transfer& t : plan.transfers) {
    const LinkKind actual = link_between(cluster, t.sender, t.receiver);
    if (t.link != actual)
      return mismatch(
          fmt::format("transfer #{}: link '{}', but ranks {} and {} are joined by '{}' on this cluster", t.id,
                      link_kind_name(t.link), t.sender.value, t.receiver.value, link_kind_name(actual)));
  }
  return check_network_ends(plan, cluster);
}

Result<void> check_network_ends(const Plan& plan, const PlacedCluster& cluster) {
  for (const Transfer& t : plan.transfers) {
    if (t.link != LinkKind::kNetwork) continue;
    for (const Rank r : {t.sender, t.receiver})
      if (!cluster.nic_of(r))
        return mismatch(
            fmt::format("transfer #{} crosses the network, but rank {}'s GPU {} has no NIC on this "
                        "cluster (give it one in the cluster's nics)",
                        t.id, r.value, cluster.gpu_of(r).value));
  }
  return {};
}

}  // namespace refit
