#pragma once
// The machines a refit runs on: GPUs grouped in NVLink domains, the NICs they reach the network
// through, and the fabric between domains. Hardware only: which GPU runs each rank of a job is a
// RankMap (rank_map.h).
// A Cluster is validated once at construction; afterwards every lookup is O(1).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/quant_scheme.h"
#include "refit/core/units.h"

namespace refit {

// A rate per FP8 format.
using QuantizeRates = PerScheme<BytesPerSecond>;
// `rate` for every format.
constexpr QuantizeRates every_scheme(BytesPerSecond rate) {
  QuantizeRates rates{};
  rates.fill(rate);
  return rates;
}

// What Cluster::make accepts (README "Robustness"): finite values in ranges that hold every real
// machine with a wide margin, so that no time or rate derived from them is zero, subnormal,
// infinite or nan. An NVLink bandwidth may also be 0 (a GPU without NVLink).
namespace cluster_limits {
inline constexpr BytesPerSecond kMinBandwidth{1e6};   // 0.001 GB/s
inline constexpr BytesPerSecond kMaxBandwidth{1e15};  // 1,000,000 GB/s
inline constexpr Seconds kMaxLatency{1.0};
inline constexpr double kMaxOversubscription = 1000.0;
}  // namespace cluster_limits

// refit's NCCL executor's own time on a GPU beyond the bytes it moves, as a fit over runs that
// differ only in chunks and steps measures it (bench/nccl_plan_bench, `refit topo --discover
// --measure`): paid one after the other by the rank's process, since one host thread issues a
// rank's operations and one stream runs them.
struct NcclCosts {
  Seconds per_op;    // per ncclSend or ncclRecv it posts (a chunk costs its sender and its receiver one)
  Seconds per_step;  // per step: one NCCL group with its copy kernels and its completion event
  bool operator==(const NcclCosts&) const = default;
};

struct GpuSpec {
  GpuId id;  // dense: gpus[i].id == i
  std::int32_t node = 0;
  std::int32_t domain = 0;          // NVLink domain index
  BytesPerSecond nvlink_bandwidth;  // per direction, effective, through the NVSwitch
  BytesPerSecond copy_bandwidth;    // device-to-device copy (pack/unpack), effective
  Bytes memory{};                   // device memory (datasheet capacity); 0 when unknown
  std::string pci_bus_id;           // empty when unknown
  // Per FP8 format, the bf16 bytes per second refit's quantizer reads on this device (refit
  // calibrate measures the CPU's; the presets carry the GPU kernels' measured rates); 0 for a
  // format unmeasured: the simulator then derives one from copy_bandwidth and says so.
  QuantizeRates quantize_bandwidth{};
  // refit's NCCL executor's costs on this device; nullopt when unmeasured: the simulator then
  // charges those of the reference run (refit/topology/measured_kernels.h) and says so.
  std::optional<NcclCosts> nccl_costs;
  bool operator==(const GpuSpec&) const = default;
};

struct NicSpec {
  std::int32_t id = 0;  // dense: nics[i].id == i
  std::string name;     // e.g. mlx5_0; may be empty
  std::int32_t node = 0;
  BytesPerSecond bandwidth;  // per direction, effective
  Seconds latency;           // per message, one way
  std::vector<GpuId> gpus;   // GPUs that send and receive through this NIC
  std::string pci_bus_id;    // empty when unknown
  // The sender's own time per chunk beyond its bytes (its put, flush and notice: LogGP's
  // overhead), paid before the chunk's bytes flow and not overlapped with the chunk before it;
  // refit calibrate measures it, 0 when unmeasured.
  Seconds chunk_overhead{};
  // The sender's own time per transfer beyond its chunks' (a transfer of its own to be granted,
  // announced and completed: refit's UCX executor wakes its receiver for each), paid as the chunk
  // overhead is, once per transfer; refit calibrate measures it, 0 when unmeasured.
  Seconds transfer_overhead{};
  bool operator==(const NicSpec&) const = default;
};

struct DomainSpec {
  std::int32_t id = 0;      // dense: domains[i].id == i
  std::vector<GpuId> gpus;  // all-to-all NVLink through NVSwitch; may span nodes
  bool operator==(const DomainSpec&) const = default;
};

struct FabricSpec {
  // 1 = non-blocking (rail-optimised fat tree). r > 1: traffic leaving or entering a domain
  // shares uplinks of (sum of the domain's NIC bandwidth) / r per direction.
  double oversubscription = 1.0;
  bool operator==(const FabricSpec&) const = default;
};

// A node's links while a refit's shards fit in its caches, as refit calibrate measures them: a
// copy between processes of one host reads and writes memory, and from the cache it runs faster
// and stalls less per chunk. A refit whose ranks on `node` hold at most `capacity` bytes of source
// and destination shards together runs that node's NICs and copies at these figures instead
// (cache_regime.h).
struct CacheSpec {
  std::int32_t node = 0;
  Bytes capacity;                 // the shards the node's ranks hold together, source and destination
  BytesPerSecond nic_bandwidth;   // each of the node's NICs, per direction
  Seconds nic_latency;            // per message
  Seconds chunk_overhead{};       // the sender's own time per chunk (NicSpec::chunk_overhead)
  Seconds transfer_overhead{};    // and per transfer (NicSpec::transfer_overhead)
  BytesPerSecond copy_bandwidth;  // each of the node's devices' copies (pack, unpack)
  bool operator==(const CacheSpec&) const = default;
};

struct ClusterSpec {
  std::string name;
  std::vector<GpuSpec> gpus;
  std::vector<NicSpec> nics;
  std::vector<DomainSpec> domains;
  FabricSpec fabric;
  Seconds nvlink_latency;         // per message over NVLink
  std::vector<CacheSpec> caches;  // at most one per node; none: every refit at the streaming figures
  // What the figures assume where nothing was measured (a GPU refit's kernels have not run on),
  // in words: every prediction on the cluster says it.
  std::vector<std::string> assumptions;
  bool operator==(const ClusterSpec&) const = default;
};

class Cluster {
 public:
  // Validates ids, domain membership (each GPU in exactly one domain, matching GpuSpec::domain),
  // NIC-to-GPU bindings and positive bandwidths; errors name the field.
  [[nodiscard]] static Result<Cluster> make(ClusterSpec spec);

  const ClusterSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  const std::vector<GpuSpec>& gpus() const { return spec_.gpus; }
  const std::vector<NicSpec>& nics() const { return spec_.nics; }
  const std::vector<DomainSpec>& domains() const { return spec_.domains; }
  const FabricSpec& fabric() const { return spec_.fabric; }
  Seconds nvlink_latency() const { return spec_.nvlink_latency; }
  std::int32_t node_count() const { return node_count_; }

  const GpuSpec& gpu(GpuId g) const { return spec_.gpus[static_cast<std::size_t>(g.value)]; }
  std::int32_t domain_of(GpuId g) const { return gpu(g).domain; }
  // The NIC a GPU uses for network traffic (the first NIC that lists it), if any.
  std::optional<std::int32_t> nic_of(GpuId g) const {
    const auto n = nic_of_gpu_[static_cast<std::size_t>(g.value)];
    return n < 0 ? std::nullopt : std::optional<std::int32_t>(n);
  }

  // Sum of the bandwidth of the NICs serving the domain's GPUs, per direction.
  BytesPerSecond domain_nic_bandwidth(std::int32_t domain) const;

  bool operator==(const Cluster& o) const { return spec_ == o.spec_; }

 private:
  explicit Cluster(ClusterSpec spec);
  ClusterSpec spec_;
  std::vector<std::int32_t> nic_of_gpu_;
  std::int32_t node_count_ = 0;
};

}  // namespace refit
