#include "refit/executors/quantizing_executor.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/agreement.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

// One weight box this rank quantises before every send: from the caller's buffer into its own.
struct Job {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  std::span<const std::byte> source;  // the box in the source dtype (bf16), row-major
  Shape shape;                        // the box's extent
  std::unique_ptr<HostAllocation> values;
  std::unique_ptr<HostAllocation> scales;
  bool sent = false;  // the rank sends some of it (a replica the plan does not send from skips it)
};

class Prepared final : public PreparedPlan {
 public:
  Prepared(std::vector<Job> jobs, std::unique_ptr<PreparedPlan> inner)
      : jobs_(std::move(jobs)), inner_(std::move(inner)) {}
  std::vector<Job> jobs_;
  std::unique_ptr<PreparedPlan> inner_;  // after jobs_: it may point into their memory
};

// For every weight of the plan quantised at the senders, the index of its scales tensor (or -1).
std::vector<std::int32_t> scales_of_each(const Plan& plan) {
  auto out = quantization_partners(plan.tensors);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (plan.tensors[i].quantization && plan.tensors[i].quantization->is_scales()) out[i] = -1;
  return out;
}

[[nodiscard]] Result<Job> make_job(const TensorSpec& weight, const ShardBuffer& given) {
  const auto& q = *weight.quantization;
  if (q.from != DType::kBF16)
    return unsupported(fmt::format("quantising from {}: refit's quantizer takes bf16", dtype_name(q.from)));
  if (!given.regions.empty())
    return unsupported("quantising a framework parameter's regions is not supported yet: pass the box");
  const std::int64_t expected = given.box.volume() * dtype_size(q.from);
  if (static_cast<std::int64_t>(given.bytes.size()) != expected)
    return mismatch(fmt::format("the source buffer has {} bytes; its box {} in {} takes {}",
                                given.bytes.size(), given.box.to_string(), dtype_name(q.from), expected));
  Job job{.scheme = q.scheme, .source = given.bytes, .shape = given.box.extent, .values = {}, .scales = {}};
  job.values = heap_allocation(Bytes{given.box.volume()});
  job.scales = heap_allocation(Bytes{scale_buffer_bytes(q.scheme, given.box.extent)});
  return job;
}

// The tensors `rank` sends some of from its own source boxes.
std::vector<bool> sent_from_source(const Plan& plan, Rank rank) {
  std::vector<bool> out(plan.tensors.size(), false);
  for (const auto& t : plan.transfers)
    if (t.sender == rank)
      for (const auto& s : t.segments)
        if (s.via == kFromSourceShard && s.tensor < out.size()) out[s.tensor] = true;
  return out;
}

// The buffers the inner executor sends from, and the jobs that fill them.
struct Derived {
  RankBuffers buffers;
  std::vector<Job> jobs;
};

[[nodiscard]] Result<Derived> derive(const Plan& plan, Rank rank, const RankBuffers& buffers,
                                     const std::vector<std::int32_t>& scales) {
  const auto sent = sent_from_source(plan, rank);
  Derived out{.buffers = buffers, .jobs = {}};
  out.buffers.sources.clear();
  for (const auto& given : buffers.sources) {
    const std::int32_t s = given.tensor < scales.size() ? scales[given.tensor] : -1;
    if (s < 0) {
      out.buffers.sources.push_back(given);
      continue;
    }
    const auto& weight = plan.tensors[given.tensor];
    const auto where = fmt::format("rank {}: tensor '{}'", rank.value, weight.name);
    if (buffers.memory != MemoryKind::kHost)
      return unsupported(where +
                         ": quantising in device memory needs the NCCL executor's kernel, which is not "
                         "wired in yet");
    auto job = REFIT_TRY_IN(make_job(weight, given), where);
    job.sent = sent[given.tensor] || sent[static_cast<std::size_t>(s)];
    out.buffers.sources.push_back(
        ShardBuffer{.tensor = given.tensor, .box = given.box, .bytes = job.values->bytes(), .regions = {}});
    out.buffers.sources.push_back(ShardBuffer{.tensor = static_cast<std::uint32_t>(s),
                                              .box = quant_scale_box(job.scheme, given.box),
                                              .bytes = job.scales->bytes(),
                                              .regions = {}});
    out.jobs.push_back(std::move(job));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<PreparedPlan>> QuantizingExecutor::prepare(const Plan& plan, Rank rank,
                                                                  const RankBuffers& buffers) {
  const auto scales = scales_of_each(plan);
  if (inner_->capabilities().quantizes_at_senders ||
      std::ranges::all_of(scales, [](std::int32_t s) { return s < 0; }))
    return std::make_unique<Prepared>(std::vector<Job>{}, REFIT_TRY(inner_->prepare(plan, rank, buffers)));
  // Every rank of the plan sees the same quantised tensors, so all take part in this agreement.
  auto derived = derive(plan, rank, buffers, scales);
  REFIT_TRY(agree(*bootstrap_,
                  derived ? Result<std::string>{""} : Result<std::string>{std::unexpected(derived.error())}));
  auto inner = REFIT_TRY(inner_->prepare(plan, rank, derived->buffers));
  return std::make_unique<Prepared>(std::move(derived->jobs), std::move(inner));
}

Result<ExecutionReport> QuantizingExecutor::execute(PreparedPlan& prepared) {
  auto* mine = dynamic_cast<Prepared*>(&prepared);
  if (mine == nullptr) return invalid("execute: the plan was prepared by another executor");
  auto& p = *mine;
  for (auto& job : p.jobs_) {
    if (!job.sent) continue;
    Shape strides(job.shape.size(), 1);
    for (std::size_t d = job.shape.size(); d-- > 1;) strides[d - 1] = strides[d] * job.shape[d];
    const Bf16View view{.data = reinterpret_cast<const std::uint16_t*>(job.source.data()),
                        .shape = job.shape,
                        .strides = std::move(strides)};
    const auto values = job.values->bytes();
    quantize(job.scheme, view, std::span(reinterpret_cast<std::uint8_t*>(values.data()), values.size()),
             job.scales->bytes());
  }
  return inner_->execute(*p.inner_);
}

}  // namespace refit
