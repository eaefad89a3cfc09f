#include "program_checks.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/lowering/arrays.h"
#include "refit/lowering/message_layout.h"

namespace refit::nccl_detail::testing {
namespace {

// A property the programs break: a fault of the translation.
std::unexpected<Error> broken(std::string message) { return fail(ErrorCode::kInternal, std::move(message)); }

std::vector<const P2p*> all_p2p(const Program& program) {
  std::vector<const P2p*> out;
  for (const auto& op : program.ops)
    if (const auto* p = std::get_if<P2p>(&op)) out.push_back(p);
  return out;
}

// The ranges [offset, offset + bytes) must tile [0, total) exactly.
[[nodiscard]] Result<void> tiles(std::vector<std::pair<std::int64_t, std::int64_t>> ranges,
                                 std::int64_t total) {
  std::ranges::sort(ranges);
  std::int64_t at = 0;
  for (const auto& [offset, bytes] : ranges) {
    if (offset != at)
      return broken(fmt::format("bytes [{}, {}) are {}", std::min(at, offset), std::max(at, offset),
                                offset > at ? "never moved" : "moved twice"));
    at += bytes;
  }
  if (at != total) return broken(fmt::format("{} of {} bytes moved", at, total));
  return {};
}

// Every byte a copy touches on one side, as (buffer kind, index, byte).
using ByteKey = std::tuple<int, std::int32_t, std::int64_t>;
std::vector<ByteKey> touched(const Address& at, const CopyGeometry& g, const std::int64_t* stride) {
  std::vector<ByteKey> out;
  for (auto e = g.first; e < g.first + g.count; ++e) {
    std::int64_t offset = 0;
    for (std::int64_t d = g.dims - 1, rest = e; d >= 0; rest /= g.extent[d], --d)
      offset += rest % g.extent[d] * stride[d];
    for (std::int64_t b = 0; b < g.element_size; ++b)
      out.emplace_back(static_cast<int>(at.kind), at.index, at.offset + offset * g.element_size + b);
  }
  return out;
}

}  // namespace

[[nodiscard]] Result<void> check_batches(const Processes& p) {
  for (std::size_t c = 0; c < p.programs.size(); ++c)
    for (const auto& op : p.programs[c].ops) {
      const auto* batch = std::get_if<CopyBatch>(&op);
      if (batch == nullptr) continue;
      std::map<ByteKey, std::size_t> writer;
      for (std::size_t k = 0; k < batch->copies.size(); ++k)
        for (const auto& b :
             touched(batch->copies[k].dst, batch->copies[k].geometry, batch->copies[k].geometry.dst_stride))
          if (!writer.emplace(b, k).second)
            return broken(fmt::format("communicator rank {}, batch {}: copies {} and {} write the same byte",
                                      c, batch->id, writer[b], k));
      for (std::size_t k = 0; k < batch->copies.size(); ++k)
        for (const auto& b :
             touched(batch->copies[k].src, batch->copies[k].geometry, batch->copies[k].geometry.src_stride))
          if (const auto it = writer.find(b); it != writer.end() && it->second != k)
            return broken(fmt::format("communicator rank {}, batch {}: copy {} reads what copy {} writes", c,
                                      batch->id, k, it->second));
    }
  return {};
}

[[nodiscard]] Result<void> check_coverage(const Plan& plan, const Processes& p) {
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> sent(plan.transfers.size()),
      received(sent.size());
  for (const auto& program : p.programs)
    for (const auto* op : all_p2p(program)) {
      const auto& t = plan.transfers[static_cast<std::size_t>(op->transfer)];
      const bool send = op->direction == Direction::kSend;
      if (op->self != (send ? t.sender : t.receiver) || op->peer != (send ? t.receiver : t.sender))
        return broken(fmt::format("transfer {}: rank {} {} rank {}", t.id, op->self.value,
                                  send ? "sends to" : "receives from", op->peer.value));
      (send ? sent : received)[static_cast<std::size_t>(t.id)].emplace_back(op->message_offset, op->bytes);
    }
  for (const auto& t : plan.transfers) {
    REFIT_TRY_IN(tiles(sent[static_cast<std::size_t>(t.id)], t.bytes.value),
                 fmt::format("transfer {} sent", t.id));
    REFIT_TRY_IN(tiles(received[static_cast<std::size_t>(t.id)], t.bytes.value),
                 fmt::format("transfer {} received", t.id));
  }
  return {};
}

[[nodiscard]] Result<void> check_pairing(const Processes& p) {
  using Key = std::tuple<std::int32_t, std::int32_t, std::int32_t>;    // step, from, to
  using Chunk = std::tuple<std::int32_t, std::int32_t, std::int64_t>;  // transfer, chunk, bytes
  std::map<Key, std::vector<Chunk>> sends, receives;
  for (std::size_t c = 0; c < p.programs.size(); ++c) {
    const auto me = static_cast<std::int32_t>(c);
    std::int32_t open = -1;
    std::int32_t last = -1;
    for (const auto& op : p.programs[c].ops) {
      if (const auto* g = std::get_if<GroupStart>(&op)) {
        if (open >= 0 || g->step <= last)
          return broken(fmt::format("communicator rank {}: group of step {} out of order", c, g->step));
        open = last = g->step;
      } else if (std::holds_alternative<GroupEnd>(op)) {
        open = -1;
      } else if (const auto* x = std::get_if<P2p>(&op)) {
        if (x->step != open)
          return broken(fmt::format("communicator rank {}: a send or receive outside its group", c));
        const bool send = x->direction == Direction::kSend;
        (send ? sends : receives)[Key{x->step, send ? me : x->peer_comm, send ? x->peer_comm : me}]
            .emplace_back(x->transfer, x->chunk, x->bytes);
      }
    }
  }
  if (sends != receives) return broken("the sends and receives of some step and pair differ");
  return {};
}

[[nodiscard]] Result<void> check_relays(const Plan& plan, const Processes& p) {
  // Where each transfer's bytes arrived: (offset, bytes, step) per receive.
  std::vector<std::vector<std::tuple<std::int64_t, std::int64_t, std::int32_t>>> arrivals(
      plan.transfers.size());
  std::vector<const P2p*> sends;
  for (const auto& program : p.programs)
    for (const auto* op : all_p2p(program)) {
      if (op->direction == Direction::kRecv)
        arrivals[static_cast<std::size_t>(op->transfer)].emplace_back(op->message_offset, op->bytes,
                                                                      op->step);
      else
        sends.push_back(op);
    }
  const auto segment_offsets = [&](const Transfer& t) {
    std::vector<std::int64_t> out{0};
    for (const auto& s : t.segments) out.push_back(out.back() + plan.segment_bytes(s).value);
    return out;
  };
  for (const auto* op : sends) {
    const auto& t = plan.transfers[static_cast<std::size_t>(op->transfer)];
    const auto offsets = segment_offsets(t);
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      const auto& s = t.segments[i];
      if (s.via == kFromSourceShard) continue;
      const auto es = dtype_size(plan.tensors[s.tensor].dtype);
      const auto& v = plan.transfers[static_cast<std::size_t>(s.via)];
      const auto v_offsets = segment_offsets(v);
      for (std::int64_t e = 0; e < s.box.volume(); ++e) {
        const auto byte = offsets[i] + e * es;
        if (byte < op->message_offset || byte >= op->message_offset + op->bytes) continue;
        Shape point = s.box.offset;
        for (std::size_t d = point.size(), rest = static_cast<std::size_t>(e); d-- > 0;
             rest /= static_cast<std::size_t>(s.box.extent[d]))
          point[d] += static_cast<std::int64_t>(rest % static_cast<std::size_t>(s.box.extent[d]));
        std::int64_t at = -1;
        for (std::size_t u = 0; u < v.segments.size() && at < 0; ++u)
          if (v.segments[u].tensor == s.tensor && v.segments[u].box.contains_point(point))
            at = v_offsets[u] + lowering::row_major_index(v.segments[u].box, point) * es;
        const auto arrived = std::ranges::find_if(
            arrivals[static_cast<std::size_t>(v.id)],
            [&](const auto& a) { return std::get<0>(a) <= at && at < std::get<0>(a) + std::get<1>(a); });
        if (at < 0 || arrived == arrivals[static_cast<std::size_t>(v.id)].end() ||
            std::get<2>(*arrived) >= op->step)
          return broken(
              fmt::format("transfer {} chunk {} (step {}) forwards an element of transfer {} that arrives {}",
                          t.id, op->chunk, op->step, v.id,
                          at < 0 ? "never" : fmt::format("in step {}", std::get<2>(*arrived))));
      }
    }
  }
  return {};
}

[[nodiscard]] Result<void> check_staging(const Processes& p, Bytes staging) {
  const std::int64_t half = staging.value / 2 / lowering::kAlign * lowering::kAlign;
  for (std::size_t c = 0; c < p.programs.size(); ++c) {
    const auto& program = p.programs[c];
    const auto& ranks = p.views[c].ranks;
    if (program.staging_bytes > static_cast<std::int64_t>(ranks.size()) * staging.value)
      return broken(fmt::format("communicator rank {} uses {} bytes of staging for {} ranks", c,
                                program.staging_bytes, ranks.size()));
    // Per step and staging region: the chunks' byte ranges.
    std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::pair<std::int64_t, std::int64_t>>>
        by_step;
    for (const auto* op : all_p2p(program)) {
      if (op->at.kind != BufferKind::kStaging) continue;
      const auto slot = std::ranges::find(ranks, op->self, &LocalRank::rank) - ranks.begin();
      if (op->at.index / 2 != slot || op->at.offset < 0 || op->at.offset + op->bytes > half)
        return broken(
            fmt::format("rank {}: staging region {} bytes [{}, {}), outside its own half of {} bytes",
                        op->self.value, op->at.index, op->at.offset, op->at.offset + op->bytes, half));
      by_step[{op->step, op->at.index}].emplace_back(op->at.offset, op->at.offset + op->bytes);
    }
    for (auto& [at, regions] : by_step) {
      std::ranges::sort(regions);
      for (std::size_t k = 1; k < regions.size(); ++k)
        if (regions[k].first < regions[k - 1].second)
          return broken(
              fmt::format("communicator rank {}: two chunks of step {} share staging", c, at.first));
    }
  }
  return {};
}

}  // namespace refit::nccl_detail::testing
