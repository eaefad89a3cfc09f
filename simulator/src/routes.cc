#include "routes.h"

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/topology/measured_kernels.h"

namespace refit::sim {
Routes::Routes(const PlacedCluster& cluster, Model& model) : c_(cluster) {
  for (std::uint32_t k = 0; k < kTaskKinds; ++k)
    model.name_category(k, std::string(time_kind_name(time_of(k))));
  add_gpus(model);
  add_nics(model);
  find_binding_copy_engines();
}

void Routes::add_gpus(Model& m) {
  for (const auto& g : c_.cluster().gpus()) {
    // A GPU without NVLink is alone in its domain (Cluster::make), so no transfer crosses its
    // NVLink; it gets no resource, which would have no capacity.
    const bool nvlink = g.nvlink_bandwidth.value > 0;
    links_.nvlink_out.push_back(
        nvlink ? m.add_resource(fmt::format("gpu {} nvlink out", g.id.value), g.nvlink_bandwidth)
               : ResourceId{});
    links_.nvlink_in.push_back(
        nvlink ? m.add_resource(fmt::format("gpu {} nvlink in", g.id.value), g.nvlink_bandwidth)
               : ResourceId{});
    links_.copy.push_back(m.add_resource(fmt::format("gpu {} copy", g.id.value), g.copy_bandwidth));
    gpu_track_.push_back(m.add_track(fmt::format("gpu {}", g.id.value)));
  }
}

void Routes::add_nics(Model& m) {
  for (const auto& n : c_.cluster().nics()) {
    links_.nic_tx.push_back(m.add_resource(fmt::format("nic {} tx", n.id), n.bandwidth));
    links_.nic_rx.push_back(m.add_resource(fmt::format("nic {} rx", n.id), n.bandwidth));
    nic_track_.push_back(m.add_track(fmt::format("nic {}", n.id)));
  }
  if (c_.cluster().fabric().oversubscription > 1.0)
    for (const auto& d : c_.cluster().domains()) {
      const auto bw =
          c_.cluster().domain_nic_bandwidth(d.id) * (1.0 / c_.cluster().fabric().oversubscription);
      links_.uplink_out.push_back(m.add_resource(fmt::format("domain {} uplink out", d.id), bw));
      links_.uplink_in.push_back(m.add_resource(fmt::format("domain {} uplink in", d.id), bw));
    }
}

// A copy engine faster than all the links of its GPU together can never be a bottleneck;
// leaving it out of the flows keeps the max-min problem small and its components apart.
void Routes::find_binding_copy_engines() {
  std::vector<double> links(c_.cluster().gpus().size(), 0.0);
  for (const auto& g : c_.cluster().gpus()) links[at(g.id.value)] = 2 * g.nvlink_bandwidth.value;
  for (const auto& n : c_.cluster().nics())
    for (auto g : n.gpus) links[at(g.value)] += 2 * n.bandwidth.value;
  for (const auto& g : c_.cluster().gpus())
    copy_can_bind_.push_back(g.copy_bandwidth.value < links[at(g.id.value)]);
}

void Routes::crossed(const Transfer& t, bool pack, bool unpack, std::vector<ResourceId>& r) const {
  r.clear();
  const auto s = gpu_index(t.sender), d = gpu_index(t.receiver);
  switch (t.link) {
    case LinkKind::kNetwork:
      if (auto n = c_.nic_of(t.sender)) r.push_back(links_.nic_tx[at(*n)]);
      if (auto n = c_.nic_of(t.receiver)) r.push_back(links_.nic_rx[at(*n)]);
      if (!links_.uplink_out.empty()) {
        r.push_back(links_.uplink_out[at(c_.domain_of(t.sender))]);
        r.push_back(links_.uplink_in[at(c_.domain_of(t.receiver))]);
      }
      break;
    case LinkKind::kNvlink:
      r.push_back(links_.nvlink_out[s]);
      r.push_back(links_.nvlink_in[d]);
      break;
    case LinkKind::kLocal:
      r.push_back(links_.copy[s]);
      break;
  }
  if (pack && copy_can_bind_[s]) r.push_back(links_.copy[s]);
  if (unpack && copy_can_bind_[d]) r.push_back(links_.copy[d]);
}

Seconds Routes::latency(const Transfer& t) const {
  if (t.link != LinkKind::kNetwork) return c_.cluster().nvlink_latency();
  const auto n = c_.nic_of(t.sender);
  return n ? c_.cluster().nics()[at(*n)].latency : c_.cluster().nvlink_latency();
}

Routes::SenderOverhead Routes::sender_overhead(const Transfer& t) const {
  if (t.link != LinkKind::kNetwork) return {};
  const auto n = c_.nic_of(t.sender);
  if (!n) return {};
  const NicSpec& nic = c_.cluster().nics()[at(*n)];
  return {.per_chunk = nic.chunk_overhead, .per_transfer = nic.transfer_overhead};
}

bool copied_by_sender(const Transfer& t, const PlacedCluster& cluster) {
  const Cluster& c = cluster.cluster();
  return t.link == LinkKind::kNetwork &&
         c.gpu(cluster.gpu_of(t.sender)).node == c.gpu(cluster.gpu_of(t.receiver)).node;
}

bool Routes::copied_by_sender(const Transfer& t) const { return sim::copied_by_sender(t, c_); }

TaskKind Routes::kind(LinkKind link) {
  return link == LinkKind::kNetwork  ? TaskKind::kNetwork
         : link == LinkKind::kNvlink ? TaskKind::kNvlink
                                     : TaskKind::kCopy;
}

std::int32_t Routes::track(const Transfer& t) const {
  if (t.link == LinkKind::kNetwork)
    if (auto n = c_.nic_of(t.sender)) return nic_track_[at(*n)];
  return gpu_track_[gpu_index(t.sender)];
}

Seconds Routes::copy_time(Bytes bytes, Rank r) const { return transfer_time(bytes, gpu(r).copy_bandwidth); }

NcclCosts Routes::nccl_costs(Rank r) const { return charged_nccl_costs(gpu(r)); }

}  // namespace refit::sim
