#pragma once
// FP8 in flight on the sending side, in front of any executor. A plan of a problem quantized at
// the senders (core/quantization.h) moves a weight's fp8 values and scales, but a training rank
// holds the weight in its source dtype (bf16). This executor takes the training rank's bf16 box
// as that weight's source buffer, keeps an fp8 box and a scales box of its own, quantizes the
// first into the others at every execute() (the CPU quantizer, refit/quantize/quantize.h), and
// has the executor behind it send those. Where that executor takes a SendGate (UCX), each box is
// quantized just before the first chunk that reads it is sent, box by box in the order of
// refit/lowering/sender_quantize_order.h, so the first bytes leave after one box's quantization
// rather than all of them (the simulator charges the same order); otherwise all go first. Inference ranks,
// and plans without quantization at the senders, pass straight through, as do all plans when the executor
// behind quantizes on its own (ExecutorCapabilities::quantizes_at_senders: the NCCL executor, on the GPU).
//
// A weight quantized at the receiver needs nothing here: the plan moves it in its source dtype
// and the inference engine quantizes what landed, as engines do today.
#include <memory>

#include "refit/executors/bootstrap.h"
#include "refit/executors/executor.h"

namespace refit {

class QuantizingExecutor final : public Executor {
 public:
  // `bootstrap` (the inner executor's) must outlive it: a rank that refuses its buffers tells the
  // others, so that every rank refuses together. `staging`: the inner executor's
  // (ExecutorOptions::staging), which cuts the chunks whose order the quantization follows.
  QuantizingExecutor(std::unique_ptr<Executor> inner, Bootstrap& bootstrap, Bytes staging)
      : inner_(std::move(inner)), bootstrap_(&bootstrap), staging_(staging) {}

  std::string_view name() const override { return inner_->name(); }
  ExecutorCapabilities capabilities() const override { return inner_->capabilities(); }
  // Besides the inner executor's checks: a source buffer of a weight quantized here must hold its
  // box in the source dtype, in host memory and contiguous (framework regions are refused); the
  // rank passes no buffer for the scales. Errors name the tensor.
  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                              const RankBuffers& buffers) override;
  // Several plan ranks in this process: the inner executor's, for plans whose quantizing it does
  // itself or that quantize nothing at the senders; refused (kUnsupported) otherwise.
  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare_ranks(
      const Plan& plan, std::span<const LocalRankBuffers> ranks) override;
  [[nodiscard]] Result<ExecutionReport> execute(PreparedPlan& prepared) override;
  // Quantizing is local to each rank, so the inner executor's elastic refit holds as it is.
  [[nodiscard]] Result<void> set_membership(const EngineMembership& membership) override {
    return inner_->set_membership(membership);
  }

 private:
  [[nodiscard]] Result<std::unique_ptr<HostAllocation>> allocate(Bytes bytes) override {
    return inner_->allocate_host(bytes);
  }

  std::unique_ptr<Executor> inner_;
  Bootstrap* bootstrap_;
  Bytes staging_;
};

}  // namespace refit
