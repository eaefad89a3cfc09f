#include "translate.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/lowering/sender_quantize_order.h"
#include "refit/planner/execution_model.h"

namespace refit::nccl_detail {
namespace {

struct Item {
  std::int32_t step = 0;
  std::int32_t transfer = 0;
  std::int32_t chunk = 0;
};

// The chunks this process sends or receives, by step, then in plan order.
std::vector<Item> local_items(const Plan& plan, const lowering::StepSchedule& schedule,
                              const ChunkSides& sides) {
  std::vector<Item> items;
  for (const auto& t : plan.transfers) {
    if (sides.slot_of(t.sender) < 0 && sides.slot_of(t.receiver) < 0) continue;
    const auto& steps = schedule.step[static_cast<std::size_t>(t.id)];
    for (std::size_t k = 0; k < steps.size(); ++k)
      items.push_back(Item{.step = steps[k], .transfer = t.id, .chunk = static_cast<std::int32_t>(k)});
  }
  std::ranges::stable_sort(items, {}, &Item::step);
  return items;
}

// The ops of one step, before they are laid out on the streams.
struct StepOps {
  std::vector<P2p> p2p;
  std::vector<CopyOp> early_packs;        // read nothing the previous step delivers
  std::vector<CopyOp> late_packs;         // forward what the previous step delivered
  std::vector<CopyOp> unpacks;            // run after this step's traffic
  std::vector<Quantize> quantize;         // quantize steps, once earlier steps' data is unpacked
  std::vector<Quantize> sender_quantize;  // the boxes the step's sends read first, before its packs
  bool forwards_previous = false;         // some send (packed or in place) needs the previous step's data
};

class Translator {
 public:
  Translator(const lowering::LoweredPlan& lowered, const lowering::StepSchedule& schedule,
             const LocalView& view, const ChunkSides& sides, std::span<const QuantizedBox> boxes)
      : lowered_(lowered),
        plan_(lowered.plan()),
        schedule_(schedule),
        view_(view),
        sides_(sides),
        boxes_(boxes),
        order_(boxes.empty() ? lowering::SenderQuantizeOrder{}
                             : lowering::sender_quantize_order(plan_, lowered.staging(),
                                                               lowering::scheduled_start(schedule))),
        quantized_(static_cast<std::size_t>(plan_.world_size()), 0) {
    program_.staging_regions.assign(2 * view.ranks.size(), 0);
  }

  [[nodiscard]] Result<Program> run(const std::vector<Item>& items) {
    std::vector<CopyOp> pending_unpacks;
    for (std::size_t begin = 0; begin < items.size();) {
      std::size_t end = begin;
      while (end < items.size() && items[end].step == items[begin].step) ++end;
      auto ops = REFIT_TRY(step_ops(std::span(items).subspan(begin, end - begin)));
      emit(items[begin].step, std::move(ops), pending_unpacks);
      begin = end;
    }
    finish(std::move(pending_unpacks));
    return std::move(program_);
  }

 private:
  std::int32_t block() const { return static_cast<std::int32_t>(program_.blocks.size()); }
  static std::int32_t packed_event(std::int32_t block) { return 2 * block; }
  static std::int32_t done_event(std::int32_t block) { return 2 * block + 1; }

  // Staging of one slot in this step's half, handed out from the start of that region.
  StagingAllocator staging_of(std::int32_t slot, std::vector<std::int64_t>& used) {
    const auto region = static_cast<std::size_t>(2 * slot + block() % 2);
    return [this, slot, region, &used](std::int64_t bytes) {
      auto& u = used[static_cast<std::size_t>(slot)];
      const Address at{.kind = BufferKind::kStaging, .index = static_cast<std::int32_t>(region), .offset = u};
      u += lowering::align_up(bytes);
      program_.staging_regions[region] = std::max(program_.staging_regions[region], u);
      return at;
    };
  }

  // The boxes the sender of transfer t quantizes up to the last one its chunk `chunk` reads,
  // those not yet quantized, in their order.
  void quantize_for(const Transfer& t, std::int64_t chunk, std::vector<Quantize>& out) {
    if (order_.waits.empty()) return;
    const auto r = static_cast<std::size_t>(t.sender.value);
    for (auto& done = quantized_[r]; done < order_.needs(t.id, chunk); ++done) {
      const auto weight = order_.weights[r][static_cast<std::size_t>(done)];
      const auto box = std::ranges::find_if(
          boxes_, [&](const QuantizedBox& b) { return b.rank == t.sender && b.weight == weight; });
      if (box != boxes_.end()) out.insert(out.end(), box->parts.begin(), box->parts.end());
    }
  }

  P2p p2p(Direction d, Rank self, Rank peer, const Item& item, Address at) const {
    const auto& layout = lowered_.layout(item.transfer);
    return P2p{.direction = d,
               .self = self,
               .peer = peer,
               .peer_comm = view_.comm_rank_of[static_cast<std::size_t>(peer.value)],
               .at = at,
               .bytes = layout.chunk_bytes(item.chunk),
               .transfer = item.transfer,
               .chunk = item.chunk,
               .message_offset = layout.chunk_begin(item.chunk),
               .step = item.step};
  }

  [[nodiscard]] Result<StepOps> step_ops(std::span<const Item> items) {
    StepOps ops;
    std::vector<std::int64_t> used(view_.ranks.size(), 0);
    const std::int32_t previous = block() > 0 ? program_.blocks.back().step : -1;
    for (const auto& item : items) {
      const auto& t = plan_.transfers[static_cast<std::size_t>(item.transfer)];
      const auto& layout = lowered_.layout(item.transfer);
      if (t.quantizes()) {
        if (item.chunk == 0) {
          const auto launches = REFIT_TRY(sides_.quantize(sides_.slot_of(t.sender), t.id));
          ops.quantize.insert(ops.quantize.end(), launches.begin(), launches.end());
        }
        continue;
      }
      if (const auto slot = sides_.slot_of(t.sender); slot >= 0) {
        quantize_for(t, item.chunk, ops.sender_quantize);
        const auto side = REFIT_TRY(sides_.send(slot, t.id, item.chunk, staging_of(slot, used)));
        const bool late =
            previous >= 0 &&
            schedule_.upstream[static_cast<std::size_t>(t.id)][static_cast<std::size_t>(item.chunk)] ==
                previous;
        ops.forwards_previous = ops.forwards_previous || late;
        auto& packs = late ? ops.late_packs : ops.early_packs;
        packs.insert(packs.end(), side.copies.begin(), side.copies.end());
        ops.p2p.push_back(p2p(Direction::kSend, t.sender, t.receiver, item, side.at));
        program_.bytes_sent += layout.chunk_bytes(item.chunk);
        if (item.chunk == 0) ++program_.messages;
      }
      if (const auto slot = sides_.slot_of(t.receiver); slot >= 0) {
        auto side = sides_.receive(slot, t.id, item.chunk, staging_of(slot, used));
        ops.unpacks.insert(ops.unpacks.end(), side.copies.begin(), side.copies.end());
        ops.p2p.push_back(p2p(Direction::kRecv, t.receiver, t.sender, item, side.at));
        program_.bytes_received += layout.chunk_bytes(item.chunk);
      }
    }
    return ops;
  }

  void batch(BatchKind kind, std::int32_t step, std::vector<CopyOp> copies) {
    if (copies.empty()) return;
    program_.ops.emplace_back(
        CopyBatch{.id = program_.batches++, .kind = kind, .step = step, .copies = std::move(copies)});
  }

  void emit(std::int32_t step, StepOps ops, std::vector<CopyOp>& pending_unpacks) {
    const std::int32_t i = block();
    const std::int32_t previous = i > 0 ? program_.blocks.back().step : 0;
    program_.blocks.push_back(
        Block{.step = step, .first_op = program_.ops.size(), .done_event = done_event(i)});
    program_.ops.insert(program_.ops.end(), ops.sender_quantize.begin(), ops.sender_quantize.end());
    batch(BatchKind::kPack, step, std::move(ops.early_packs));
    // Unless this step forwards what the previous one delivered, its traffic may start while the
    // previous step is still being unpacked (they use different staging halves and bytes).
    if (!ops.forwards_previous)
      program_.ops.emplace_back(Record{.stream = StreamKind::kCopy, .event = packed_event(i)});
    if (i > 0) {
      program_.ops.emplace_back(Wait{.stream = StreamKind::kCopy, .event = done_event(i - 1)});
      batch(BatchKind::kUnpack, previous, std::move(pending_unpacks));
    }
    program_.ops.insert(program_.ops.end(), ops.quantize.begin(), ops.quantize.end());
    batch(BatchKind::kPack, step, std::move(ops.late_packs));
    if (ops.forwards_previous)
      program_.ops.emplace_back(Record{.stream = StreamKind::kCopy, .event = packed_event(i)});
    program_.ops.emplace_back(Wait{.stream = StreamKind::kComm, .event = packed_event(i)});
    program_.ops.emplace_back(GroupStart{.step = step});
    for (auto& p : ops.p2p) program_.ops.emplace_back(std::move(p));
    program_.ops.emplace_back(GroupEnd{.step = step});
    program_.ops.emplace_back(Record{.stream = StreamKind::kComm, .event = done_event(i)});
    pending_unpacks = std::move(ops.unpacks);
  }

  void finish(std::vector<CopyOp> pending_unpacks) {
    const std::int32_t n = block();
    if (n > 0) {
      program_.ops.emplace_back(Wait{.stream = StreamKind::kCopy, .event = done_event(n - 1)});
      batch(BatchKind::kUnpack, program_.blocks.back().step, std::move(pending_unpacks));
    }
    program_.final_event = 2 * n;
    program_.events = 2 * n + 1;
    program_.ops.emplace_back(Record{.stream = StreamKind::kCopy, .event = program_.final_event});
    for (const auto bytes : program_.staging_regions) program_.staging_bytes += bytes;
    program_.scratch_bytes = sides_.scratch_bytes();
  }

  const lowering::LoweredPlan& lowered_;
  const Plan& plan_;
  const lowering::StepSchedule& schedule_;
  const LocalView& view_;
  const ChunkSides& sides_;
  std::span<const QuantizedBox> boxes_;
  lowering::SenderQuantizeOrder order_;
  std::vector<std::int32_t> quantized_;  // per plan rank: boxes of its order quantized so far
  Program program_;
};

}  // namespace

Result<Program> translate(const lowering::LoweredPlan& lowered, const lowering::StepSchedule& schedule,
                          const ChunkSides& sides, const LocalView& view,
                          std::span<const QuantizedBox> quantize) {
  Translator translator(lowered, schedule, view, sides, quantize);
  return REFIT_TRY_IN(translator.run(local_items(lowered.plan(), schedule, sides)), "nccl translation");
}

Result<Program> build_program(const lowering::LoweredPlan& lowered, const LocalView& view,
                              std::span<const QuantizedBox> quantize) {
  const auto sides = REFIT_TRY(ChunkSides::make(lowered, view));
  const auto schedule = REFIT_TRY(
      lowering::make_step_schedule(lowered, execution_model(ExecutionModelId::kRefitNccl).step_chunks));
  return translate(lowered, schedule, sides, view, quantize);
}

}  // namespace refit::nccl_detail
