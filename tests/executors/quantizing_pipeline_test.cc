// QuantizingExecutor in front of an executor that takes a SendGate: each weight box is quantized
// just before the first chunk that reads it is sent (refit/lowering/sender_quantize_order.h), so a
// transfer waits for its own box, not for every box its sender holds. A probe stands in for the executor
// behind: it fills the memory it is given to send from with 0xEE, then asks the gate for one
// transfer at a time and looks at what has been quantized.
#include <gtest/gtest.h>

#include <algorithm>

#include "refit/core/quantized_problem.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/quantizing_executor.h"
#include "refit/lowering/sender_quantize_order.h"
#include "refit/planner/strategy.h"
#include "refit/quantize/quantize.h"
#include "test_cluster.h"
#include "test_problems.h"
#include "thread_bootstrap.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

class GateProbe final : public Executor {
 public:
  std::string_view name() const override { return "probe"; }
  ExecutorCapabilities capabilities() const override { return {.host_memory = true}; }
  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank,
                                                              const RankBuffers& buffers) override {
    sending = buffers;
    for (auto& s : sending.sources)
      if (plan.tensors[s.tensor].quantization) std::ranges::fill(s.bytes, std::byte{0xEE});
    return std::make_unique<PreparedPlan>();
  }
  [[nodiscard]] Result<ExecutionReport> execute(PreparedPlan&) override {
    on_execute(*gate);
    return ExecutionReport{};
  }
  bool set_send_gate(SendGate* g) override {
    gate = g;
    return true;
  }

  std::function<void(SendGate&)> on_execute;
  SendGate* gate = nullptr;
  RankBuffers sending;
};

// Two [256, 512] bf16 weights whole on training rank 0, w1 needed on inference rank 1 only and w2
// on rank 2 only, each rank on a node of its own, quantized at the sender in fp8-block128.
ReshardProblem two_weights() {
  const Shape shape{256, 512};
  const auto layout = [&](std::int32_t first) { return make_layout(shape, {1}, rank_range(first, 1), "R"); };
  const auto bf16 = ReshardProblem::make({testing::make_reshard("w1", shape, layout(0), layout(1)),
                                          testing::make_reshard("w2", shape, layout(0), layout(2))},
                                         1, 2)
                        .value();
  return quantize_problem(bf16, {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kSender},
                          [](const TensorSpec&) { return true; })
      .value();
}

// What the quantizer makes of rank 0's bf16 box of `weight`: its fp8 values.
std::vector<std::byte> quantized(const RankBuffers& given, std::uint32_t weight) {
  const auto& s = *std::ranges::find(given.sources, weight, &ShardBuffer::tensor);
  std::vector<std::byte> values(static_cast<std::size_t>(s.box.volume()));
  std::vector<std::byte> scales(
      static_cast<std::size_t>(scale_buffer_bytes(QuantScheme::kFp8Block128, s.box.extent)));
  quantize(QuantScheme::kFp8Block128,
           Bf16View{.data = reinterpret_cast<const std::uint16_t*>(s.bytes.data()),
                    .shape = s.box.extent,
                    .strides = row_major_strides(s.box.extent)},
           std::span(reinterpret_cast<std::uint8_t*>(values.data()), values.size()), scales);
  return values;
}

std::vector<std::byte> values_sent(const RankBuffers& sending, std::uint32_t weight) {
  const auto& s = *std::ranges::find(sending.sources, weight, &ShardBuffer::tensor);
  return {s.bytes.begin(), s.bytes.end()};
}

// The one transfer from rank 0 to `receiver`.
std::int32_t transfer_to(const Plan& plan, std::int32_t receiver) {
  const auto t = std::ranges::find_if(
      plan.transfers, [&](const Transfer& x) { return x.sender == Rank{0} && x.receiver == Rank{receiver}; });
  EXPECT_NE(t, plan.transfers.end());
  return t->id;
}

TEST(QuantizingPipeline, ATransferWaitsOnlyForTheBoxItReads) {
  // Both pairs start at once, so rank 0 quantizes by tensor: w1 (tensor 0), then w2 (tensor 2).
  // Asked for the transfer to rank 1, which reads w1 only, it quantizes w1 and leaves w2 as it
  // was (0xEE); asked then for the transfer to rank 2, it quantizes w2. Bytes are exactly the
  // quantizer's.
  const auto problem = two_weights();
  const auto cluster = testing::make_test_cluster(3, 1, 1, 2);
  const auto plan = make_plan("refit", problem, cluster).value();
  const auto order =
      lowering::sender_quantize_order(plan, lowering::kDefaultStaging, lowering::paced_start(plan));
  ASSERT_EQ(order.weights[0], (std::vector<std::uint32_t>{0, 2}));
  auto shards = HostShards::allocate(problem, Rank{0});
  const std::vector<std::byte> untouched(256 * 512, std::byte{0xEE});
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  auto probe = std::make_unique<GateProbe>();
  GateProbe& seen = *probe;
  seen.on_execute = [&](SendGate& gate) {
    gate.before_send(transfer_to(plan, 1), 0);
    EXPECT_EQ(values_sent(seen.sending, 0), quantized(shards.buffers(), 0));
    EXPECT_EQ(values_sent(seen.sending, 2), untouched);
    gate.before_send(transfer_to(plan, 2), 0);
    EXPECT_EQ(values_sent(seen.sending, 2), quantized(shards.buffers(), 2));
  };
  QuantizingExecutor executor(std::move(probe), bootstrap, lowering::kDefaultStaging);
  auto prepared = executor.prepare(plan, Rank{0}, shards.buffers());
  ASSERT_TRUE(prepared) << prepared.error().message;
  const auto report = executor.execute(**prepared);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->work.quantize.has_value());
}

}  // namespace
}  // namespace refit
