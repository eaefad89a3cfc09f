#include "refit/lowering/sender_quantize_order.h"
#include "refit/core/index.h"

#include <algorithm>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "refit/lowering/message_layout.h"

namespace refit::lowering {
namespace {

// One chunk reading (first) a weight box its sender quantizes.
struct Read {
  std::int32_t sender = 0;
  std::uint32_t weight = 0;
  std::int32_t transfer = 0;
  std::int64_t chunk = 0;
  double start = 0;
  std::int32_t box = 0;  // index into the boxes, once they are known
};

// The weight a tensor sent from a source shard is quantized with (itself, or the weight its
// scales scale), or -1: not quantized at the senders.
std::int64_t weight_of(const Plan& plan, std::span<const std::int32_t> partners, std::uint32_t tensor) {
  const auto partner = partners[tensor];
  if (partner < 0) return -1;
  return plan.tensors[tensor].quantization->is_scales() ? partner : static_cast<std::int64_t>(tensor);
}

std::vector<Read> reads_of(const Plan& plan, Bytes staging, const ChunkStart& start) {
  const auto partners = quantization_partners(plan.tensors);
  std::vector<Read> reads;
  for (const auto& t : plan.transfers) {
    const auto reads_a_box = [&](const Segment& s) {
      return s.via == kFromSourceShard && weight_of(plan, partners, s.tensor) >= 0;
    };
    if (t.quantizes() || std::ranges::none_of(t.segments, reads_a_box)) continue;
    const MessageLayout layout(plan, t, chunk_limit(t, staging));
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      if (!reads_a_box(t.segments[i])) continue;
      const auto byte = layout.segment_offset(static_cast<std::int32_t>(i));
      const auto chunk = layout.chunk_of(byte);
      reads.push_back(
          Read{.sender = t.sender.value,
               .weight = static_cast<std::uint32_t>(weight_of(plan, partners, t.segments[i].tensor)),
               .transfer = t.id,
               .chunk = chunk,
               .start = start(t.id, chunk, layout.chunk_begin(chunk))});
    }
  }
  return reads;
}

// A sender's box: when it is first read.
struct Box {
  std::int32_t sender = 0;
  std::uint32_t weight = 0;
  double first = 0;
};

// Each read's box, and the boxes; reads come sorted by (sender, weight).
std::vector<Box> boxes_of(std::vector<Read>& reads) {
  std::ranges::sort(reads, {}, [](const Read& r) { return std::tuple(r.sender, r.weight); });
  std::vector<Box> boxes;
  for (auto& r : reads) {
    if (boxes.empty() || boxes.back().sender != r.sender || boxes.back().weight != r.weight)
      boxes.push_back(Box{.sender = r.sender, .weight = r.weight, .first = r.start});
    boxes.back().first = std::min(boxes.back().first, r.start);
    r.box = static_cast<std::int32_t>(boxes.size() - 1);
  }
  return boxes;
}

// Per transfer, the running maximum of the boxes its chunks need, where it rises.
void add_waits(std::vector<Read>& reads, std::span<const std::int32_t> position, SenderQuantizeOrder& out) {
  std::ranges::sort(reads, {}, [](const Read& r) { return std::tuple(r.transfer, r.chunk); });
  for (const auto& r : reads) {
    auto& waits = out.waits[at(r.transfer)];
    const std::int32_t boxes = position[at(r.box)] + 1;
    if (!waits.empty() && waits.back().boxes >= boxes) continue;
    if (!waits.empty() && waits.back().chunk == r.chunk)
      waits.back().boxes = boxes;
    else
      waits.push_back(QuantizeWait{.chunk = r.chunk, .boxes = boxes});
  }
}

}  // namespace

std::int32_t SenderQuantizeOrder::needs(std::int32_t transfer, std::int64_t chunk) const {
  const auto& mine = waits[at(transfer)];
  const auto after = std::ranges::upper_bound(mine, chunk, {}, &QuantizeWait::chunk);
  return after == mine.begin() ? 0 : std::prev(after)->boxes;
}

SenderQuantizeOrder sender_quantize_order(const Plan& plan, Bytes staging, const ChunkStart& start) {
  SenderQuantizeOrder out{.weights = std::vector<std::vector<std::uint32_t>>(at(plan.world_size())),
                          .waits = std::vector<std::vector<QuantizeWait>>(plan.transfers.size())};
  auto reads = reads_of(plan, staging, start);
  const auto boxes = boxes_of(reads);
  std::vector<std::int32_t> order(boxes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  std::ranges::sort(order, {}, [&](std::int32_t b) {
    const auto& box = boxes[at(b)];
    return std::tuple(box.sender, box.first, box.weight);
  });
  std::vector<std::int32_t> position(boxes.size());
  for (const std::int32_t b : order) {
    auto& mine = out.weights[at(boxes[at(b)].sender)];
    position[at(b)] = static_cast<std::int32_t>(mine.size());
    mine.push_back(boxes[at(b)].weight);
  }
  add_waits(reads, position, out);
  return out;
}

ChunkStart paced_start(const Plan& plan) {
  // By (sender, receiver) pair that carries something: the bytes of all its transfers and of
  // those met so far. Keyed by the pairs a plan has, not indexed by every pair of its world,
  // which at 16,384 ranks a side would take 17 GB.
  struct Carried {
    std::int64_t total = 0;
    std::int64_t sent = 0;
  };
  std::unordered_map<std::uint64_t, Carried> pairs;
  const auto pair = [](const Transfer& t) {
    return static_cast<std::uint64_t>(t.sender.value) << 32 | static_cast<std::uint32_t>(t.receiver.value);
  };
  for (const auto& t : plan.transfers)
    if (!t.quantizes()) pairs[pair(t)].total += t.bytes.value;
  auto before = std::make_shared<std::vector<std::int64_t>>(plan.transfers.size(), 0);
  auto of_pair = std::make_shared<std::vector<std::int64_t>>(plan.transfers.size(), 1);
  for (const auto& t : plan.transfers) {
    if (t.quantizes()) continue;
    auto& p = pairs.at(pair(t));
    (*before)[at(t.id)] = p.sent;
    (*of_pair)[at(t.id)] = std::max<std::int64_t>(p.total, 1);
    p.sent += t.bytes.value;
  }
  return [before, of_pair](std::int32_t t, std::int64_t, std::int64_t first_byte) {
    return static_cast<double>((*before)[at(t)] + first_byte) / static_cast<double>((*of_pair)[at(t)]);
  };
}

ChunkStart scheduled_start(const StepSchedule& schedule) {
  return [&schedule](std::int32_t t, std::int64_t chunk, std::int64_t) {
    return static_cast<double>(schedule.step[at(t)][at(chunk)]);
  };
}

}  // namespace refit::lowering
