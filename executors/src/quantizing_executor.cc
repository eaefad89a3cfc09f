#include "refit/executors/quantizing_executor.h"
#include "refit/core/elapsed.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/agreement.h"
#include "refit/executors/sender_quantization.h"
#include "refit/lowering/sender_quantize_order.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

// One part of a weight box (sender_quantization.h), read in place.
struct Part {
  Bf16View source;
  std::int64_t values_at = 0;  // bytes into the values
  std::int64_t scales_at = 0;  // bytes into the scales
};

// One weight box this rank quantizes before every send: from the caller's memory into its own.
struct Job {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  std::vector<Part> parts;
  std::unique_ptr<HostAllocation> values;
  std::unique_ptr<HostAllocation> scales;
  bool sent = false;
};

void run_job(Job& job) {
  const QuantizedMemory memory{.values = job.values->bytes(), .scales = job.scales->bytes()};
  for (const auto& part : job.parts)
    quantize_part(job.scheme, part.source, part.values_at, part.scales_at, memory);
}

// The jobs in the order this rank quantizes them (lowering/sender_quantize_order.h, under the
// pair pacing refit's UCX executor sends in), and which of them each chunk waits for.
struct Order {
  std::vector<std::size_t> jobs;
  lowering::SenderQuantizeOrder plan;
};

class Prepared final : public PreparedPlan {
 public:
  Prepared(std::vector<Job> jobs, Order order, std::unique_ptr<PreparedPlan> inner)
      : jobs_(std::move(jobs)), order_(std::move(order)), inner_(std::move(inner)) {}
  std::vector<Job> jobs_;
  Order order_;
  std::unique_ptr<PreparedPlan> inner_;  // after jobs_: it may point into their memory
};

// One execution's quantization, job by job as the inner executor's sends need them.
class Pipeline final : public SendGate {
 public:
  explicit Pipeline(Prepared& p) : p_(p) {}
  void before_send(std::int32_t transfer, std::int64_t chunk) override {
    if (transfer >= 0 && static_cast<std::size_t>(transfer) < p_.order_.plan.waits.size())
      run_through(static_cast<std::size_t>(p_.order_.plan.needs(transfer, chunk)));
  }
  void before_any_send() override { run_through(p_.order_.jobs.size()); }
  Seconds time() const { return time_; }

 private:
  void run_through(std::size_t n) {
    if (done_ >= n) return;
    const auto start = std::chrono::steady_clock::now();
    for (; done_ < n; ++done_) run_job(p_.jobs_[p_.order_.jobs[done_]]);
    time_ += seconds_since(start);
  }

  Prepared& p_;
  std::size_t done_ = 0;  // of order_.jobs
  Seconds time_{0};
};

// Some weight moves as fp8 values and scales its training ranks make (it has a scales partner).
bool quantizes_at_senders(const Plan& plan) {
  return std::ranges::any_of(quantization_partners(plan.tensors), [](std::int32_t s) { return s >= 0; });
}

Job make_job(const RankBuffers& buffers, const SenderQuantization& q) {
  Job job{.scheme = q.scheme,
          .parts = {},
          .values = heap_allocation(q.values_bytes()),
          .scales = heap_allocation(q.scales_bytes()),
          .sent = q.sent};
  for (const auto& part : q.parts)
    job.parts.push_back(Part{.source = Bf16View{.data = reinterpret_cast<const std::uint16_t*>(
                                                    part_source(buffers, q, part).data()),
                                                .shape = part.shape,
                                                .strides = part.strides},
                             .values_at = part.values_at,
                             .scales_at = part.scales_at});
  return job;
}

// The buffers the inner executor sends from, the jobs that fill them and their order.
struct Derived {
  RankBuffers buffers;
  std::vector<Job> jobs;
  Order order;
};

Order order_of(const Plan& plan, Bytes staging, Rank rank, std::span<const SenderQuantization> found) {
  Order out{.jobs = {}, .plan = lowering::sender_quantize_order(plan, staging, lowering::paced_start(plan))};
  for (const std::uint32_t weight : out.plan.weights[static_cast<std::size_t>(rank.value)]) {
    const auto it = std::ranges::find(found, weight, &SenderQuantization::weight);
    if (it != found.end()) out.jobs.push_back(static_cast<std::size_t>(it - found.begin()));
  }
  return out;
}

[[nodiscard]] Result<Derived> derive(const Plan& plan, Bytes staging, Rank rank, const RankBuffers& buffers) {
  const auto found = REFIT_TRY(sender_quantizations(plan, rank, buffers));
  if (!found.empty() && buffers.memory != MemoryKind::kHost)
    return unsupported(
        fmt::format("rank {}: tensor '{}': quantizing in device memory takes the NCCL executor", rank.value,
                    plan.tensors[found.front().weight].name));
  Derived out;
  std::vector<QuantizedMemory> memory;
  for (const auto& q : found) {
    auto& job = out.jobs.emplace_back(make_job(buffers, q));
    memory.push_back(QuantizedMemory{.values = job.values->bytes(), .scales = job.scales->bytes()});
  }
  out.buffers = sending_buffers(buffers, found, memory).buffers;
  out.order = order_of(plan, staging, rank, found);
  return out;
}

}  // namespace

Result<std::unique_ptr<PreparedPlan>> QuantizingExecutor::prepare(const Plan& plan, Rank rank,
                                                                  const RankBuffers& buffers) {
  if (inner_->capabilities().quantizes_at_senders || !quantizes_at_senders(plan))
    return std::make_unique<Prepared>(std::vector<Job>{}, Order{},
                                      REFIT_TRY(inner_->prepare(plan, rank, buffers)));
  // Every rank of the plan sees the same quantized tensors, so all take part in this agreement.
  auto derived = derive(plan, staging_, rank, buffers);
  REFIT_TRY(agree(*bootstrap_,
                  derived ? Result<std::string>{""} : Result<std::string>{std::unexpected(derived.error())}));
  auto inner = REFIT_TRY(inner_->prepare(plan, rank, derived->buffers));
  return std::make_unique<Prepared>(std::move(derived->jobs), std::move(derived->order), std::move(inner));
}

Result<std::unique_ptr<PreparedPlan>> QuantizingExecutor::prepare_ranks(
    const Plan& plan, std::span<const LocalRankBuffers> ranks) {
  if (!inner_->capabilities().quantizes_at_senders && quantizes_at_senders(plan))
    return unsupported(fmt::format(
        "prepare_ranks: the {} executor quantizes at the senders one plan rank per process", name()));
  return std::make_unique<Prepared>(std::vector<Job>{}, Order{},
                                    REFIT_TRY(inner_->prepare_ranks(plan, ranks)));
}

// Where the inner executor takes a gate, each box is quantized just before the first send that
// reads it (in the order of sender_quantize_order, which the simulator charges), so the first
// bytes leave after one box's quantization instead of all of them; otherwise all go first.
Result<ExecutionReport> QuantizingExecutor::execute(PreparedPlan& prepared) {
  auto* mine = dynamic_cast<Prepared*>(&prepared);
  if (mine == nullptr) return invalid("execute: the plan was prepared by another executor");
  auto& p = *mine;
  Pipeline pipeline(p);
  const bool gated = !p.jobs_.empty() && inner_->set_send_gate(&pipeline);
  if (!gated) pipeline.before_any_send();
  auto report = inner_->execute(*p.inner_);
  if (gated) inner_->set_send_gate(nullptr);
  if (!report) return std::unexpected(std::move(report).error());
  if (!p.jobs_.empty()) report->work.quantize = report->work.quantize.value_or(Seconds{0}) + pipeline.time();
  return report;
}

}  // namespace refit
