#include "component_resources.h"

#include <algorithm>

#include "refit/core/index.h"

namespace refit::sim {
ComponentResources::ComponentResources(const Plan& plan, const PlacedCluster& cluster)
    : plan_(plan), cluster_(cluster), routes_(cluster, model_), owners_(at(model_.resource_count())) {
  add_owners(&LinkResources::nvlink_out, Element::kGpu);
  add_owners(&LinkResources::nvlink_in, Element::kGpu);
  add_owners(&LinkResources::copy, Element::kGpu);
  add_owners(&LinkResources::nic_tx, Element::kNic);
  add_owners(&LinkResources::nic_rx, Element::kNic);
  add_owners(&LinkResources::uplink_out, Element::kDomain);
  add_owners(&LinkResources::uplink_in, Element::kDomain);
  for (std::int32_t r = 0; r < model_.resource_count(); ++r)
    by_name_.emplace(model_.resource_name(ResourceId{r}), ResourceId{r});
}

void ComponentResources::add_owners(std::vector<ResourceId> LinkResources::*list, Element element) {
  const auto& ids = routes_.links().*list;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    // A GPU without NVLink has no NVLink resources: its entries hold no resource of its own.
    if (element == Element::kGpu && list != &LinkResources::copy &&
        cluster_.cluster().gpus()[i].nvlink_bandwidth.value <= 0)
      continue;
    owners_[at(ids[i].value)] =
        Owner{.list = list, .element = element, .index = static_cast<std::int32_t>(i)};
  }
}

std::vector<Rank> ComponentResources::ranks_of(std::span<const std::int32_t> ids) const {
  std::vector<Rank> out;
  std::vector<bool> met(at(plan_.world_size()), false);
  for (const auto id : ids)
    for (const Rank r : {plan_.transfers[at(id)].sender, plan_.transfers[at(id)].receiver})
      if (!met[at(r.value)]) {
        met[at(r.value)] = true;
        out.push_back(r);
      }
  return out;
}

std::int32_t ComponentResources::element_of(Rank r, Element element) const {
  switch (element) {
    case Element::kGpu:
      return cluster_.gpu_of(r).value;
    case Element::kNic:
      return cluster_.nic_of(r).value_or(-1);
    case Element::kDomain:
      return cluster_.domain_of(r);
  }
  return -1;
}

void ComponentResources::add(std::span<const std::vector<std::int32_t>> parts,
                             std::span<const std::size_t> alike, std::span<const ResourceReport> reported) {
  // (element, its index) -> where its first user stands among the simulated component's ranks
  const auto key = [](Element e, std::int32_t index) {
    return (static_cast<std::int64_t>(e) << 32) | static_cast<std::uint32_t>(index);
  };
  std::unordered_map<std::int64_t, std::size_t> first_user;
  const auto ranks = ranks_of(parts[alike.front()]);
  for (std::size_t i = 0; i < ranks.size(); ++i)
    for (const Element e : {Element::kGpu, Element::kNic, Element::kDomain})
      first_user.try_emplace(key(e, element_of(ranks[i], e)), i);
  std::vector<Counterpart> counterparts;
  counterparts.reserve(reported.size());
  for (const auto& report : reported) {
    const Owner& owner = owners_[at(by_name_.at(report.name).value)];
    counterparts.push_back(Counterpart{
        .owner = owner, .position = first_user.at(key(owner.element, owner.index)), .bytes = report.bytes});
  }
  for (const auto c : alike) {
    const auto copy_ranks = ranks_of(parts[c]);
    for (const auto& r : counterparts) {
      const auto index = element_of(copy_ranks[r.position], r.owner.element);
      loaded_.emplace_back((routes_.links().*r.owner.list)[at(index)], r.bytes);
    }
  }
}

std::vector<ResourceReport> ComponentResources::reports(Seconds predicted) {
  std::ranges::sort(loaded_);
  std::vector<ResourceReport> out;
  out.reserve(loaded_.size());
  for (const auto& [id, bytes] : loaded_) {
    // As simulate() works it out (simulate.h: ResourceUsage::utilisation).
    const double possible = model_.capacity(id).value * predicted.value;
    out.push_back(
        ResourceReport{.name = model_.resource_name(id),
                       .bytes = bytes,
                       .utilisation = possible > 0.0 ? static_cast<double>(bytes.value) / possible : 0.0});
  }
  return out;
}

}  // namespace refit::sim
