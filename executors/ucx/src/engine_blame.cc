// What an execution is waiting for, in words, so that a timeout names the peer, the transfer
// and the tensor.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine.h"

namespace refit::ucx_detail {
namespace {

constexpr std::size_t kTensorsNamed = 2;

}  // namespace

std::string Engine::describe(const Transfer& t) const {
  std::vector<std::string> names;
  for (const auto& s : t.segments) {
    auto name = fmt::format("'{}'", c_.plan.tensors[s.tensor].name);
    if (std::ranges::find(names, name) == names.end()) names.push_back(std::move(name));
  }
  const auto shown = std::min(names.size(), kTensorsNamed);
  const auto more = names.size() > shown ? fmt::format(" and {} more", names.size() - shown) : std::string();
  return fmt::format("transfer {} ({} {}{})", t.id, names.size() == 1 ? "tensor" : "tensors",
                     fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     more);
}

std::string Engine::describe_send_wait(const ChunkRef& c) const {
  const Send& s = c_.program.sends()[static_cast<std::size_t>(c.first)];
  const auto& t = c_.plan.transfers[static_cast<std::size_t>(s.transfer)];
  if (!sending_.granted(c))
    return fmt::format("rank {} to grant chunk {} of {}", s.peer.value, c.second, describe(t));
  for (const ChunkWait& w :
       c_.program.waits[static_cast<std::size_t>(c.first)][static_cast<std::size_t>(c.second)]) {
    const auto landed = receiving_.landed_prefix(static_cast<std::size_t>(w.receive));
    if (landed >= w.chunks) continue;
    if (static_cast<std::size_t>(w.receive) >= c_.program.receives().size())
      return fmt::format(
          "its quantize step (transfer {}), which chunk {} of transfer {} forwards, to run",
          c_.program.steps()[static_cast<std::size_t>(w.receive) - c_.program.receives().size()].transfer,
          c.second, t.id);
    const Receive& r = c_.program.receives()[static_cast<std::size_t>(w.receive)];
    return fmt::format("chunk {} of {} from rank {}, which chunk {} of transfer {} forwards", landed,
                       describe(c_.plan.transfers[static_cast<std::size_t>(r.transfer)]), r.peer.value,
                       c.second, t.id);
  }
  return fmt::format("a free pack slot for chunk {} of {}", c.second, describe(t));
}

std::string Engine::waiting_for() const {
  for (std::size_t i = 0; i < c_.program.receives().size(); ++i) {
    const Receive& r = c_.program.receives()[i];
    if (const auto landed = receiving_.landed_prefix(i); landed < static_cast<std::int64_t>(r.chunks.size()))
      return fmt::format("chunk {} of {} from rank {}", landed,
                         describe(c_.plan.transfers[static_cast<std::size_t>(r.transfer)]), r.peer.value);
  }
  for (std::size_t p = 0; p < sending_.pairs(); ++p)
    if (const auto head = sending_.head(p)) return describe_send_wait(*head);
  if (sending_.chunks_left() > 0) return "puts to complete";
  if (everyone_finished()) return "its last messages to leave";
  std::vector<std::int32_t> missing;
  for (std::int32_t r = 0; r < c_.plan.world_size(); ++r)
    if (r != me_.value && !done_from_[static_cast<std::size_t>(r)]) missing.push_back(r);
  return fmt::format("{} {} to finish", missing.size() == 1 ? "rank" : "ranks", fmt::join(missing, ", "));
}

std::string Engine::waiting_for_from(Rank peer) const {
  for (std::size_t i = 0; i < c_.program.receives().size(); ++i) {
    const Receive& r = c_.program.receives()[i];
    const auto landed = receiving_.landed_prefix(i);
    if (r.peer == peer && landed < static_cast<std::int64_t>(r.chunks.size()))
      return fmt::format("chunk {} of {} from it", landed,
                         describe(c_.plan.transfers[static_cast<std::size_t>(r.transfer)]));
  }
  if (const auto head = sending_.head(static_cast<std::size_t>(peer.value))) return describe_send_wait(*head);
  return "its notice that it had finished";
}

}  // namespace refit::ucx_detail
