// `--discover --measure`: a discovered cluster's GPUs take the rates refit's kernels were timed
// at on them (facade/src/timed_kernels.h). The timer here is a stand-in that records what it was
// asked; tests/gpu/kernel_timing_gpu_test.cc times the kernels themselves on a GPU.
#include "timed_kernels.h"

#include <gtest/gtest.h>

#include "refit/topology/presets.h"

namespace refit {
namespace {

// Two nodes of two H200s, as discovery would repeat one machine for a job of four GPUs: the
// copies share the machine's bus ids.
ClusterSpec two_h200_nodes() {
  auto spec = make_preset_cluster("dgx-h200:gpus_per_node=2,nodes=2").value().spec();
  for (auto& g : spec.gpus) g.pci_bus_id = g.id.value % 2 == 0 ? "0000:18:00.0" : "0000:2a:00.0";
  return spec;
}

// Copies at `copy_gbps`, the NCCL executor at 1.5 us per send or receive and copy_gbps / 100 us
// per step.
KernelSpeeds speeds(double copy_gbps) {
  KernelSpeeds s{.gpu = "NVIDIA H200",
                 .copy = BytesPerSecond::from_gbps(copy_gbps),
                 .quantize = {},
                 .nccl = {.per_op = Seconds{1.5e-6}, .per_step = Seconds{copy_gbps / 100 * 1e-6}}};
  of_scheme(s.quantize, QuantScheme::kFp8Block128) = BytesPerSecond::from_gbps(2 * copy_gbps);
  of_scheme(s.quantize, QuantScheme::kMxfp8) = BytesPerSecond::from_gbps(1.5 * copy_gbps);
  return s;
}

TEST(TimedKernels, EachBusIdIsTimedOnceAndItsRatesReplaceTheAssumedOnes) {
  // Bus 0000:18:00.0 times at 1500 GB/s of copies, 0000:2a:00.0 at 1400; quantize at 2x and
  // 1.5x; the NCCL executor's steps at 15 and 14 us. Four GPUs, two bus ids: two timings. The preset's note
  // that its copy rate was scaled from an H100 goes: nothing is assumed any more.
  const auto spec = two_h200_nodes();
  ASSERT_EQ(spec.assumptions.size(), 1u);
  std::vector<std::string> asked, notes;
  const KernelTimer timer = [&](std::string_view bus) -> Result<KernelSpeeds> {
    asked.emplace_back(bus);
    return speeds(bus == "0000:18:00.0" ? 1500 : 1400);
  };
  const auto timed = with_timed_kernels(spec, timer, notes);
  ASSERT_TRUE(timed) << timed.error().message;
  EXPECT_EQ(asked, (std::vector<std::string>{"0000:18:00.0", "0000:2a:00.0"}));
  for (const auto& g : timed->gpus) {
    const double copy = g.pci_bus_id == "0000:18:00.0" ? 1500 : 1400;
    EXPECT_DOUBLE_EQ(g.copy_bandwidth.gbps(), copy);
    EXPECT_DOUBLE_EQ(of_scheme(g.quantize_bandwidth, QuantScheme::kFp8Block128).gbps(), 2 * copy);
    EXPECT_DOUBLE_EQ(of_scheme(g.quantize_bandwidth, QuantScheme::kMxfp8).gbps(), 1.5 * copy);
    ASSERT_TRUE(g.nccl_costs.has_value());
    EXPECT_DOUBLE_EQ(g.nccl_costs->per_op.value, 1.5e-6);
    EXPECT_DOUBLE_EQ(g.nccl_costs->per_step.value, copy / 100 * 1e-6);
  }
  EXPECT_TRUE(timed->assumptions.empty());
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0],
            "timed refit's kernels on GPU 0 (0000:18:00.0, NVIDIA H200): copies 1500 GB/s, quantize 3000 "
            "GB/s of bf16 (fp8-block128) and 2250 (mxfp8); the NCCL executor 1.50 us per send or receive "
            "and 15.00 us per step");
  EXPECT_TRUE(Cluster::make(*timed).has_value());
}

TEST(TimedKernels, AGpuWithoutABusIdOrATimerThatFailsIsNamed) {
  std::vector<std::string> notes;
  const KernelTimer never = [](std::string_view) -> Result<KernelSpeeds> {
    return fail(ErrorCode::kRuntime, "cudaDeviceGetByPCIBusId: no CUDA-capable device is detected");
  };
  // The cpu-host model of a machine without NVIDIA GPUs: nothing to time.
  const auto host = with_timed_kernels(make_preset_cluster("cpu-host").value().spec(), never, notes);
  ASSERT_FALSE(host);
  EXPECT_EQ(host.error().message,
            "GPU 0 has no PCI bus id: no NVIDIA GPU was found on this machine, so there is nothing to time");
  const auto failed = with_timed_kernels(two_h200_nodes(), never, notes);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message,
            "GPU 0 (0000:18:00.0): cudaDeviceGetByPCIBusId: no CUDA-capable device is detected");
  EXPECT_TRUE(notes.empty());
}

}  // namespace
}  // namespace refit
