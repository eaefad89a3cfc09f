#pragma once
// The flow model's resources of a cluster, and the route of each transfer over them: which
// resources its flow crosses, its per-message latency, the kind of time it spends and the trace
// track it is drawn on.
#include <cstdint>
#include <string_view>
#include <vector>

#include "collective_flows.h"
#include "refit/planner/plan.h"
#include "refit/simulator/model.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

// Engine categories: what a task's flow time is spent on.
enum class TaskKind : std::uint32_t {
  kNetwork = 0,   // a transfer or collective through NICs
  kNvlink = 1,    // a transfer or collective over NVLink only
  kCopy = 2,      // a transfer between two ranks of one GPU
  kPack = 3,      // a call's device copies (pack, unpack, stack, concatenate)
  kFixed = 4,     // a call's fixed costs: no bytes, only latency
  kQuantize = 5,  // FP8 in flight: a rank quantizing weights (no bytes, only its time)
};
inline constexpr std::uint32_t kTaskKinds = static_cast<std::uint32_t>(TaskKind::kQuantize) + 1;

// By TaskKind: the kind of time a task's flow spends, as a prediction's breakdown names it (and
// the trace its category), and how a contributor's line says it ("pack time of ... calls").
struct TaskKindInfo {
  TimeKind time;
  std::string_view phrase;
};
inline constexpr TaskKindInfo kTaskKindInfo[kTaskKinds] = {
    {TimeKind::kNetwork, "network"}, {TimeKind::kNvlink, "nvlink"}, {TimeKind::kCopy, "copy"},
    {TimeKind::kPackUnpack, "pack"}, {TimeKind::kFixed, "fixed"},   {TimeKind::kQuantize, "quantize"}};
inline TimeKind time_of(std::uint32_t task_kind) { return kTaskKindInfo[task_kind].time; }
inline std::string_view phrase_of(std::uint32_t task_kind) { return kTaskKindInfo[task_kind].phrase; }

// Whether t's bytes are copied by its sender's own thread: a network transfer between ranks of
// one node goes through shared memory (UCX's cma and mm transports), not through a NIC. That holds
// for host memory, the only memory refit's UCX executor quantizes in; between GPUs of one node
// without NVLink, UCX's cuda_ipc would copy on the copy engine instead.
bool copied_by_sender(const Transfer& t, const PlacedCluster& cluster);

class Routes {
 public:
  // Names the categories and adds, per GPU, its NVLink out and in (none without NVLink), its copy
  // engine and its track; per NIC its send and receive sides and its track; per domain its
  // uplinks when the fabric is oversubscribed. `cluster` outlives the routes.
  Routes(const PlacedCluster& cluster, Model& model);

  const LinkResources& links() const { return links_; }
  // The resources transfer t crosses: network: sender NIC tx, receiver NIC rx (and the domains'
  // uplinks); nvlink: sender NVLink out, receiver NVLink in; local: the GPU's copy engine; and a
  // packing sender's (unpacking receiver's) copy engine where it can be a bottleneck.
  void crossed(const Transfer& t, bool pack, bool unpack, std::vector<ResourceId>& out) const;
  // Per message: the sender NIC's latency over the network, NVLink's otherwise.
  Seconds latency(const Transfer& t) const;
  // The sender's own time beyond its bytes, per chunk and per transfer: the sender NIC's measured
  // overheads over the network (NicSpec::chunk_overhead, transfer_overhead), none otherwise (no
  // calibration measures NVLink's).
  struct SenderOverhead {
    Seconds per_chunk{};
    Seconds per_transfer{};
  };
  SenderOverhead sender_overhead(const Transfer& t) const;
  // copied_by_sender(t, cluster) on this cluster.
  bool copied_by_sender(const Transfer& t) const;
  static TaskKind kind(LinkKind link);
  // The sender NIC's track for a network transfer, the sender GPU's otherwise.
  std::int32_t track(const Transfer& t) const;
  std::int32_t gpu_track(Rank r) const { return gpu_track_[gpu_index(r)]; }
  ResourceId copy_engine(Rank r) const { return links_.copy[gpu_index(r)]; }
  Seconds copy_time(Bytes bytes, Rank r) const;
  // charged_nccl_costs (measured_kernels.h) of r's GPU.
  NcclCosts nccl_costs(Rank r) const;
  const GpuSpec& gpu(Rank r) const { return c_.cluster().gpu(c_.gpu_of(r)); }

 private:
  std::size_t gpu_index(Rank r) const { return static_cast<std::size_t>(c_.gpu_of(r).value); }
  void add_gpus(Model& m);
  void add_nics(Model& m);
  void find_binding_copy_engines();

  const PlacedCluster& c_;
  LinkResources links_;
  std::vector<std::int32_t> gpu_track_, nic_track_;
  std::vector<bool> copy_can_bind_;  // per GPU
};

}  // namespace refit::sim
