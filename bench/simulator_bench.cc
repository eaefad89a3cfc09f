// Cost of simulating refit-sized transfers.
//
// BM_SimulateAllToAll: the shape of a DeepSeek-V3 plan (refit simulate --model deepseek-v3
// --train pp=16,ep=16 --infer tp=32,engines=8 --cluster dgx-h100): 256 sender NICs each send their
// messages in order to all 256 receiver NICs, keeping `window` in flight (message k waits for
// message k - window of the same sender), or all at once (window 0: plan simulations stream
// every (sender, receiver) pair at the same time, one message per pair as refit coalesces them).
// Every flow crosses a NIC tx and a NIC rx, so all flows form one contended component and each
// completion shifts the rates of dozens of others; exact, and with the rate tolerance plan
// simulations use (SimulateOptions::rate_tolerance).
//
// BM_SimulateRelayChains: 256 sender GPUs, each behind its own NIC, send two
// messages each to 256 receiver GPUs in 32 NVLink domains of 8 (1,536 resources). Every message
// is cut into 512 KiB chunks that travel a 4-hop relay chain: sender NIC -> landing GPU, landing
// GPU -> a GPU of another domain (forwarding), NVLink to a peer, copy-engine unpack there.
// Chunk k of hop j waits for chunk k of hop j-1 and for chunk k-1 of hop j (in-order link).
// Landing and forwarding GPUs are spread so that NIC receive ports carry flows of several
// chains at once: the network flows form one large contended component, the hard case for
// incremental max-min. About 98,000 tasks.
#include <array>
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "refit/simulator/simulate.h"

namespace {

using refit::Bytes;
using refit::BytesPerSecond;
using refit::Seconds;
using refit::sim::Model;
using refit::sim::ResourceId;
using refit::sim::TaskId;
using refit::sim::TaskSpec;

constexpr std::int32_t kSenders = 256;
constexpr std::int32_t kReceivers = 256;
constexpr std::int32_t kDomainSize = 8;
constexpr std::int64_t kChunk = 512 * 1024;
constexpr std::int32_t kHops = 4;

struct Receiver {
  ResourceId rx, tx, nvlink_out, nvlink_in, copy;
};

// Deterministic message lengths between 1 and 2 times `chunks`, so chains drift out of lockstep.
std::int32_t chunks_of(std::int32_t sender, std::int32_t message, std::int32_t chunks) {
  const auto h =
      static_cast<std::uint32_t>(sender) * 2654435761u + static_cast<std::uint32_t>(message) * 40503u;
  return chunks + static_cast<std::int32_t>((h >> 7) % static_cast<std::uint32_t>(chunks + 1));
}

void add_chain(Model& model, const std::array<std::vector<ResourceId>, kHops>& hops, std::int32_t chunks) {
  const std::array<Seconds, kHops> latency{Seconds{15e-6}, Seconds{15e-6}, Seconds{5e-6}, Seconds{3e-6}};
  std::array<TaskId, kHops> previous_chunk{};
  TaskSpec spec;
  for (std::int32_t k = 0; k < chunks; ++k) {
    for (std::int32_t j = 0; j < kHops; ++j) {
      spec.bytes = Bytes{k + 1 == chunks ? kChunk / 3 : kChunk};
      spec.latency = latency[static_cast<std::size_t>(j)];
      spec.resources = hops[static_cast<std::size_t>(j)];
      spec.category = static_cast<std::uint32_t>(j);
      spec.deps.clear();
      if (j > 0) spec.deps.push_back(TaskId{model.task_count() - 1});
      if (k > 0) spec.deps.push_back(previous_chunk[static_cast<std::size_t>(j)]);
      previous_chunk[static_cast<std::size_t>(j)] = model.add_task(spec);
    }
  }
}

Model relay_model(std::int32_t messages_per_sender, std::int32_t chunks) {
  Model model;
  model.reserve_tasks(100'000, 2, 2);
  const auto nic = BytesPerSecond::from_gbps(48);
  std::vector<ResourceId> sender_tx;
  for (std::int32_t s = 0; s < kSenders; ++s) sender_tx.push_back(model.add_resource("tx", nic));
  std::vector<Receiver> recv;
  for (std::int32_t g = 0; g < kReceivers; ++g)
    recv.push_back({.rx = model.add_resource("rx", nic),
                    .tx = model.add_resource("tx", nic),
                    .nvlink_out = model.add_resource("nvl out", BytesPerSecond::from_gbps(370)),
                    .nvlink_in = model.add_resource("nvl in", BytesPerSecond::from_gbps(370)),
                    .copy = model.add_resource("copy", BytesPerSecond::from_gbps(1400))});
  for (std::int32_t s = 0; s < kSenders; ++s)
    for (std::int32_t m = 0; m < messages_per_sender; ++m) {
      const std::int32_t land = (37 * s + 29 * m) % kReceivers;
      const std::int32_t fwd = (land + kDomainSize * (1 + s % 31)) % kReceivers;  // other domain
      const std::int32_t peer = fwd / kDomainSize * kDomainSize + (fwd + 1 + m) % kDomainSize;
      const auto& a = recv[static_cast<std::size_t>(land)];
      const auto& b = recv[static_cast<std::size_t>(fwd)];
      const auto& c = recv[static_cast<std::size_t>(peer)];
      add_chain(model,
                {{{sender_tx[static_cast<std::size_t>(s)], a.rx},
                  {a.tx, b.rx},
                  {b.nvlink_out, c.nvlink_in},
                  {c.copy}}},
                chunks_of(s, m, chunks));
    }
  return model;
}

constexpr std::int32_t kNics = 256;

// Receivers cycle through all NICs (101 is odd, so m -> 101 m is a permutation mod 256) with a
// little jitter, and sizes vary between 1 and 2 times 64 MiB, so senders drift out of lockstep.
Model all_to_all_model(std::int32_t messages_per_sender, std::int32_t window) {
  Model model;
  model.reserve_tasks(static_cast<std::size_t>(kNics * messages_per_sender), 2, 1);
  const auto nic = BytesPerSecond::from_gbps(50);
  std::vector<ResourceId> tx, rx;
  for (std::int32_t n = 0; n < kNics; ++n) {
    tx.push_back(model.add_resource("tx", nic));
    rx.push_back(model.add_resource("rx", nic));
  }
  TaskSpec spec;
  spec.latency = Seconds{10e-6};
  for (std::int32_t s = 0; s < kNics; ++s) {
    std::vector<TaskId> sent;
    for (std::int32_t m = 0; m < messages_per_sender; ++m) {
      const auto h = static_cast<std::uint32_t>(s) * 2654435761u + static_cast<std::uint32_t>(m) * 40503u;
      const auto jitter = static_cast<std::int32_t>((h >> 11) % 5);
      const std::int32_t receiver = (37 * s + 101 * m + jitter) % kNics;
      spec.bytes = Bytes{(64 << 20) + static_cast<std::int64_t>((h >> 7) % (64 << 20))};
      spec.resources = {tx[static_cast<std::size_t>(s)], rx[static_cast<std::size_t>(receiver)]};
      spec.deps.clear();
      if (window > 0 && m >= window) spec.deps.push_back(sent[static_cast<std::size_t>(m - window)]);
      sent.push_back(model.add_task(spec));
    }
  }
  return model;
}

// Simulates `model` once per iteration; events/s is per second of process CPU time.
void run_simulation(benchmark::State& state, const Model& model, const refit::sim::SimulateOptions& options) {
  std::uint64_t events = 0;
  double makespan = 0;
  for (auto _ : state) {
    auto result = refit::sim::simulate(model, options);
    if (!result) {
      state.SkipWithError(result.error().message.c_str());
      return;
    }
    events += result->events;
    makespan = result->makespan.value;
    benchmark::DoNotOptimize(result);
  }
  state.counters["tasks"] = model.task_count();
  state.counters["resources"] = model.resource_count();
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["makespan_ms"] = makespan * 1e3;
}

void BM_SimulateAllToAll(benchmark::State& state) {
  const Model model =
      all_to_all_model(static_cast<std::int32_t>(state.range(0)), static_cast<std::int32_t>(state.range(1)));
  refit::sim::SimulateOptions options;
  options.rate_tolerance = static_cast<double>(state.range(2)) * 1e-6;
  run_simulation(state, model, options);
}
BENCHMARK(BM_SimulateAllToAll)
    ->ArgNames({"messages", "window", "tolerance_ppm"})
    ->Args({128, 8, 0})
    ->Args({128, 8, 10'000})
    ->Args({128, 16, 0})
    ->Args({128, 16, 10'000})
    ->Args({32, 0, 10'000})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

void BM_SimulateRelayChains(benchmark::State& state) {
  const Model model =
      relay_model(static_cast<std::int32_t>(state.range(0)), static_cast<std::int32_t>(state.range(1)));
  run_simulation(state, model, {});
}
BENCHMARK(BM_SimulateRelayChains)
    ->ArgNames({"messages", "chunks"})
    ->Args({2, 32})
    ->Args({8, 8})
    ->Args({32, 2})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
