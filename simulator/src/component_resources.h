#pragma once
// The resources a plan's components load, as simulating the whole plan reports them, from one
// simulation per distinct component. Components with equal signatures (component_signature.h)
// are one another with ranks, GPUs, NICs and domains renamed in order of first appearance, and
// they build the same flow model up to those names: each resource the simulated one reported
// (routes.h: of one GPU, NIC or domain) has its counterpart in every copy, the same resource of
// the GPU (NIC, domain) of the rank that stands in the copy where the simulated one's user stands,
// carrying the same bytes. Components share no resource, so no resource is counted twice.
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "refit/planner/plan.h"
#include "refit/simulator/model.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/topology/rank_map.h"
#include "routes.h"

namespace refit::sim {

class ComponentResources {
 public:
  // `plan` and `cluster` outlive this.
  ComponentResources(const Plan& plan, const PlacedCluster& cluster);
  ComponentResources(const ComponentResources&) = delete;
  ComponentResources& operator=(const ComponentResources&) = delete;

  // Adds the resources of the components `alike` (indices into `parts`, transfer ids by
  // component, sim::plan_components) from `reported`, what simulating the first of them alone
  // reported: every one has its signature.
  void add(std::span<const std::vector<std::int32_t>> parts, std::span<const std::size_t> alike,
           std::span<const ResourceReport> reported);

  // Every resource added, in the flow model's order (as simulate_plan lists them), its
  // utilisation over the plan's `predicted` time.
  std::vector<ResourceReport> reports(Seconds predicted);

 private:
  // What a resource belongs to.
  enum class Element : std::uint8_t { kGpu, kNic, kDomain };
  struct Owner {
    std::vector<ResourceId> LinkResources::*list = nullptr;  // its kind: which of the links
    Element element = Element::kGpu;
    std::int32_t index = -1;  // of its GPU, NIC or domain
  };
  // A reported resource, by where its owner first appears in the simulated component.
  struct Counterpart {
    Owner owner;
    std::size_t position;  // into the component's ranks in order of first appearance
    Bytes bytes;
  };

  void add_owners(std::vector<ResourceId> LinkResources::*list, Element element);
  // The ranks of the component of transfers `ids` in order of first appearance, as its signature
  // numbers them.
  std::vector<Rank> ranks_of(std::span<const std::int32_t> ids) const;
  // The GPU, NIC or domain of rank r: -1 for a GPU with no NIC.
  std::int32_t element_of(Rank r, Element element) const;

  const Plan& plan_;
  const PlacedCluster& cluster_;
  Model model_;                // the cluster's resources alone, as simulating any plan on it adds them
  Routes routes_;              // which adds them
  std::vector<Owner> owners_;  // by resource
  std::unordered_map<std::string_view, ResourceId> by_name_;
  std::vector<std::pair<ResourceId, Bytes>> loaded_;
};

}  // namespace refit::sim
