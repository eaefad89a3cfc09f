#include "refit/executors/quantizing_executor.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/agreement.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

// A run of whole blocks of a weight box, read where the caller holds it (a framework
// parameter's region, or the box's own buffer) and quantised into its place in the box's values
// and scales (row-major over the box).
struct Part {
  Bf16View source;
  std::int64_t values_at = 0;  // bytes into the values
  std::int64_t scales_at = 0;  // bytes into the scales
};

// One weight box this rank quantises before every send: from the caller's memory into its own.
struct Job {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  std::vector<Part> parts;
  Shape shape;  // the box's extent
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

Shape row_major_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Rows [a, b) of the box lie in a region: their values and scales are runs of the box's, and
// the quantizer reads them through the region's strides in place (a column of Megatron's
// interleaved linear_qkv, the up half of linear_fc1), with no copy of the parameter. A region
// that cuts a block (or the box along another dim) would need the block gathered first: refused.
[[nodiscard]] Result<Part> region_part(const Quantization& q, const Shape& weight, const Box& box,
                                       const lowering::Region& r, std::span<const std::byte> parameter) {
  const auto block = quant_block(q.scheme, box.rank());
  for (std::size_t d = 1; d < box.rank(); ++d)
    if (r.box.offset[d] != box.offset[d] || r.box.extent[d] != box.extent[d])
      return unsupported(
          fmt::format("region {} of the box {} splits it along dim {}: only runs of rows are "
                      "quantised in place",
                      r.box.to_string(), box.to_string(), d));
  if (!quant_block_aligned(q.scheme, r.box, weight))
    return unsupported(fmt::format("region {} of the box {} cuts a {} block", r.box.to_string(),
                                   box.to_string(), quant_scheme_name(q.scheme)));
  std::int64_t last = r.offset / 2;  // bf16 elements
  for (std::size_t d = 0; d < r.box.rank(); ++d) last += (r.box.extent[d] - 1) * r.strides[d];
  if (r.offset % 2 != 0 || (last + 1) * 2 > static_cast<std::int64_t>(parameter.size()))
    return mismatch(
        fmt::format("region {} reaches past its parameter's {} bytes", r.box.to_string(), parameter.size()));
  const auto row = r.box.offset[0] - box.offset[0];
  const auto scale_shape = quant_scale_shape(q.scheme, box.extent);
  return Part{.source = Bf16View{.data = reinterpret_cast<const std::uint16_t*>(parameter.data() + r.offset),
                                 .shape = r.box.extent,
                                 .strides = r.strides},
              .values_at = row * row_major_strides(box.extent)[0],
              .scales_at = row / block[0] * row_major_strides(scale_shape)[0] *
                           dtype_size(quant_scale_dtype(q.scheme))};
}

[[nodiscard]] Result<Job> make_job(const TensorSpec& weight, const ShardBuffer& given,
                                   const std::vector<std::span<std::byte>>& parameters) {
  const auto& q = *weight.quantization;
  if (q.from != DType::kBF16)
    return unsupported(fmt::format("quantising from {}: refit's quantizer takes bf16", dtype_name(q.from)));
  Job job{.scheme = q.scheme, .parts = {}, .shape = given.box.extent, .values = {}, .scales = {}};
  for (const auto& r : given.regions) {
    if (r.buffer < 0 || static_cast<std::size_t>(r.buffer) >= parameters.size())
      return mismatch(fmt::format("region {} names parameter {}, the side has {}", r.box.to_string(),
                                  r.buffer, parameters.size()));
    job.parts.push_back(REFIT_TRY(
        region_part(q, weight.shape, given.box, r, parameters[static_cast<std::size_t>(r.buffer)])));
  }
  if (given.regions.empty()) {
    const std::int64_t expected = given.box.volume() * dtype_size(q.from);
    if (static_cast<std::int64_t>(given.bytes.size()) != expected)
      return mismatch(fmt::format("the source buffer has {} bytes; its box {} in {} takes {}",
                                  given.bytes.size(), given.box.to_string(), dtype_name(q.from), expected));
    job.parts.push_back(
        Part{.source = Bf16View{.data = reinterpret_cast<const std::uint16_t*>(given.bytes.data()),
                                .shape = given.box.extent,
                                .strides = row_major_strides(given.box.extent)},
             .values_at = 0,
             .scales_at = 0});
  }
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

// A box the inner executor sends from `bytes` (row-major): a buffer of its own, or where the side
// is a framework's parameters (which every shard of a side must then be), one more parameter.
ShardBuffer held(RankBuffers& buffers, std::uint32_t tensor, const Box& box, std::span<std::byte> bytes) {
  if (buffers.source_parameters.empty())
    return ShardBuffer{.tensor = tensor, .box = box, .bytes = bytes, .regions = {}};
  buffers.source_parameters.push_back(bytes);
  return ShardBuffer{
      .tensor = tensor,
      .box = box,
      .bytes = {},
      .regions = {lowering::Region{.box = box,
                                   .buffer = static_cast<std::int32_t>(buffers.source_parameters.size() - 1),
                                   .offset = 0,
                                   .strides = row_major_strides(box.extent)}}};
}

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
    auto job = REFIT_TRY_IN(make_job(weight, given, buffers.source_parameters), where);
    job.sent = sent[given.tensor] || sent[static_cast<std::size_t>(s)];
    out.buffers.sources.push_back(held(out.buffers, given.tensor, given.box, job.values->bytes()));
    out.buffers.sources.push_back(held(out.buffers, static_cast<std::uint32_t>(s),
                                       quant_scale_box(job.scheme, given.box), job.scales->bytes()));
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
    const auto values = job.values->bytes();
    const auto scales = job.scales->bytes();
    for (const auto& part : job.parts) {
      const auto count = element_count(part.source.shape);
      quantize(job.scheme, part.source,
               std::span(reinterpret_cast<std::uint8_t*>(values.data()) + part.values_at,
                         static_cast<std::size_t>(count)),
               scales.subspan(static_cast<std::size_t>(part.scales_at),
                              static_cast<std::size_t>(scale_buffer_bytes(job.scheme, part.source.shape))));
    }
  }
  return inner_->execute(*p.inner_);
}

}  // namespace refit
