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
  return {};
}

}  // namespace refit
