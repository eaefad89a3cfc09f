#include "refit/executors/framework_buffers.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/try.h"
#include "refit/executors/pattern.h"
#include "refit/executors/streaming_stores.h"
#include "refit/lowering/arrays.h"
#include "refit/models/storage_check.h"

namespace refit {
namespace {

lowering::Region lowered(const models::StoredRegion& r, std::int64_t element_size) {
  return lowering::Region{
      .box = r.box, .buffer = r.parameter, .offset = r.offset * element_size, .strides = r.strides};
}

// Copies a region between its parameter and a row-major buffer of its box, run by run.
void copy_region(const lowering::Region& r, std::byte* parameter, std::byte* packed,
                 std::int64_t element_size, bool into_parameter) {
  const lowering::Array strided{.offset = r.offset, .box = &r.box, .strides = &r.strides};
  const lowering::Array plain{.offset = 0, .box = &r.box, .strides = nullptr};
  const lowering::Walk w(strided, plain, r.box, element_size);
  w.for_each_run(0, r.box.volume(), [&](std::int64_t index, std::int64_t elements) {
    std::byte* at = parameter + w.offset_of(0, index);
    std::byte* row = packed + w.offset_of(1, index);
    const auto n = static_cast<std::size_t>(elements * element_size);
    into_parameter ? std::memcpy(at, row, n) : std::memcpy(row, at, n);
  });
}

// Marks the bytes a region covers.
void cover(const lowering::Region& r, std::int64_t element_size, std::vector<bool>& covered) {
  const lowering::Array strided{.offset = r.offset, .box = &r.box, .strides = &r.strides};
  const lowering::Walk w(strided, r.box, element_size);
  w.for_each_run(0, r.box.volume(), [&](std::int64_t index, std::int64_t elements) {
    const auto at = static_cast<std::size_t>(w.offset_of(0, index));
    std::fill_n(covered.begin() + static_cast<std::ptrdiff_t>(at), elements * element_size, true);
  });
}

// The part `part` of a row-major buffer of `whole`, row-major.
void copy_part(const Box& whole, const std::byte* data, const Box& part, std::byte* out,
               std::int64_t element_size) {
  const lowering::Array from{.offset = 0, .box = &whole, .strides = nullptr};
  const lowering::Array to{.offset = 0, .box = &part, .strides = nullptr};
  const lowering::Walk w(from, to, part, element_size);
  w.for_each_run(0, part.volume(), [&](std::int64_t index, std::int64_t elements) {
    std::memcpy(out + w.offset_of(1, index), data + w.offset_of(0, index),
                static_cast<std::size_t>(elements * element_size));
  });
}

// What a destination shard of a weight quantized at the senders (or of its scales) must hold,
// row-major over its box; nothing for other tensors, which hold the plain pattern.
std::optional<std::vector<std::byte>> quantized_box(const ReshardProblem& problem,
                                                    const std::vector<ShardBuffer>& destinations,
                                                    const ShardBuffer& shard) {
  const auto& spec = problem.tensors()[shard.tensor].tensor;
  const auto& q = spec.quantization;
  if (!q || q->site != QuantSite::kSender) return std::nullopt;
  if (!q->is_scales()) return quantized_pattern(shard.tensor, spec, shard.box).values;
  // The scales of the weight's box on this rank, which lies next to them.
  for (const auto& w : destinations)
    if (const auto& weight = problem.tensors()[w.tensor].tensor; weight.name == q->scales_of)
      return quantized_pattern(w.tensor, weight, w.box).scales;
  return std::nullopt;
}

}  // namespace

Result<const models::RankStorage*> rank_storage(const models::StorageMap& side, Rank rank) {
  const auto at = rank.value - side.first_rank;
  if (at < 0 || static_cast<std::size_t>(at) >= side.ranks.size())
    return out_of_range(fmt::format("rank {} is not one of the {} ranks of the {} storage map", rank.value,
                                    side.ranks.size(), side.framework));
  return &side.of(rank);
}

Result<RankBuffers> framework_rank_buffers(const ReshardProblem& problem, const models::StorageMap& side,
                                           Rank rank, std::vector<std::span<std::byte>> parameters,
                                           MemoryKind memory) {
  const auto& storage = *REFIT_TRY(rank_storage(side, rank));
  REFIT_TRY(models::check_rank_storage(side, static_cast<std::size_t>(rank.value - side.first_rank), problem,
                                       problem.is_source(rank), fmt::format("{} storage", side.framework)));
  if (parameters.size() != storage.parameters.size())
    return mismatch(fmt::format("rank {}: {} parameter buffers for the {} {} parameters of the rank",
                                rank.value, parameters.size(), storage.parameters.size(), side.framework));
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const auto& p = storage.parameters[i];
    const auto need = p.elements() * dtype_size(p.dtype);
    if (static_cast<std::int64_t>(parameters[i].size()) != need ||
        (need > 0 && parameters[i].data() == nullptr))
      return mismatch(fmt::format("rank {}: {} parameter '{}' is {} bytes, its buffer holds {}", rank.value,
                                  side.framework, p.name, need, parameters[i].size()));
  }
  const bool source = problem.is_source(rank);
  std::map<std::uint32_t, ShardBuffer> shards;  // by tensor, in problem order
  for (const auto& r : storage.regions) {
    const auto& t = problem.tensors()[r.tensor];
    auto [it, fresh] =
        shards.try_emplace(r.tensor, ShardBuffer{.tensor = r.tensor, .box = {}, .bytes = {}, .regions = {}});
    if (fresh) it->second.box = REFIT_TRY((source ? t.source : t.destination).local_box(rank));
    it->second.regions.push_back(lowered(r, dtype_size(held_dtype(t.tensor, source))));
  }
  RankBuffers out{.memory = memory};
  auto& side_shards = source ? out.sources : out.destinations;
  for (auto& [tensor, shard] : shards) side_shards.push_back(std::move(shard));
  (source ? out.source_parameters : out.destination_parameters) = std::move(parameters);
  return out;
}

Result<FrameworkBuffers> FrameworkBuffers::allocate(const ReshardProblem& problem,
                                                    const models::StorageMap& side, Rank rank,
                                                    const HostAllocator& allocator) {
  const auto& storage = *REFIT_TRY(rank_storage(side, rank));
  FrameworkBuffers out;
  out.source_ = problem.is_source(rank);
  out.parameters_ = &storage.parameters;
  out.regions_ = &storage.regions;
  REFIT_TRY(models::check_rank_storage(side, static_cast<std::size_t>(rank.value - side.first_rank), problem,
                                       problem.is_source(rank), fmt::format("{} storage", side.framework)));
  std::vector<Bytes> sizes;
  for (const auto& p : storage.parameters) sizes.push_back(Bytes{p.elements() * dtype_size(p.dtype)});
  out.storage_ = REFIT_TRY(allocate_pooled(
      allocator, sizes, fmt::format("allocating the {} parameters of rank {}", side.framework, rank.value)));
  std::vector<std::span<std::byte>> spans;
  for (const auto& memory : out.storage_) {
    streaming_zero(memory->bytes().data(), memory->bytes().size());
    spans.push_back(memory->bytes());
  }
  store_fence();
  out.buffers_ = REFIT_TRY(framework_rank_buffers(problem, side, rank, std::move(spans)));
  return out;
}

void FrameworkBuffers::fill_pattern(const ReshardProblem& problem) {
  std::vector<std::byte> packed;
  for (const auto& s : buffers_.sources) {
    const auto& spec = problem.tensors()[s.tensor].tensor;
    const auto held = held_dtype(spec, true);
    const auto es = dtype_size(held);
    for (const auto& r : s.regions) {
      packed.assign(static_cast<std::size_t>(r.box.volume() * es), std::byte{0});
      if (held != spec.dtype)  // a weight its sender quantizes, as HostShards fills it
        fill_bf16_weight_pattern(s.tensor, spec.shape, r.box, packed);
      else
        refit::fill_pattern(s.tensor, spec.shape, r.box, es, packed);
      copy_region(r, bytes(static_cast<std::size_t>(r.buffer)).data(), packed.data(), es, true);
    }
  }
}

Result<void> FrameworkBuffers::verify(const ReshardProblem& problem) const {
  if (source_) return {};  // a rank is on one side: its parameters are sources, filled by the caller
  std::vector<std::byte> packed;
  std::vector<std::byte> want;
  std::vector<std::vector<bool>> covered(storage_.size());
  for (std::size_t i = 0; i < storage_.size(); ++i) covered[i].assign(bytes(i).size(), false);
  for (const auto& s : buffers_.destinations) {
    const auto& spec = problem.tensors()[s.tensor].tensor;
    const auto es = dtype_size(spec.dtype);
    const auto quantized = quantized_box(problem, buffers_.destinations, s);
    for (const auto& r : s.regions) {
      const auto p = static_cast<std::size_t>(r.buffer);
      packed.resize(static_cast<std::size_t>(r.box.volume() * es));
      copy_region(r, bytes(p).data(), packed.data(), es, false);
      const auto where = fmt::format("parameter '{}', tensor '{}' box {}", (*parameters_)[p].name, spec.name,
                                     r.box.to_string());
      if (quantized) {
        want.resize(packed.size());
        copy_part(s.box, quantized->data(), r.box, want.data(), es);
        if (packed != want)
          return fail(ErrorCode::kRuntime, where + ": not what the quantizer makes of the pattern");
      } else {
        REFIT_TRY_IN(verify_pattern(s.tensor, spec.shape, r.box, es, packed), where);
      }
      cover(r, es, covered[p]);
    }
  }
  for (std::size_t p = 0; p < storage_.size(); ++p) {
    const auto data = bytes(p);
    for (std::size_t b = 0; b < data.size(); ++b)
      if (!covered[p][b] && data[b] != std::byte{0})
        return mismatch(fmt::format("parameter '{}': padding byte {} is {}, not zero", (*parameters_)[p].name,
                                    b, static_cast<int>(data[b])));
  }
  return {};
}

void FrameworkBuffers::clear_destinations() {
  if (source_) return;
  for (const auto& s : storage_) streaming_zero(s->bytes().data(), s->bytes().size());
  store_fence();
}

}  // namespace refit
