#include "receive_book.h"

#include <algorithm>

namespace refit::ucx_detail {

ReceiveBook::ReceiveBook(const UcxProgram& program, std::int32_t world, std::int64_t window)
    : program_(program),
      window_(window),
      receive_of_transfer_(program.lowered->plan().transfers.size(), -1),
      in_place_(static_cast<std::size_t>(world)),
      next_in_place_(static_cast<std::size_t>(world), 0),
      in_place_granted_(static_cast<std::size_t>(world), 0),
      slots_(program.receive_staging.slots),
      dropped_(program.receives().size(), false),
      released_(program.receives().size(), false) {
  for (std::size_t i = 0; i < program.receives().size(); ++i) {
    const Receive& r = program.receives()[i];
    receive_of_transfer_[static_cast<std::size_t>(r.transfer)] = static_cast<std::int32_t>(i);
    arrived_.emplace_back(r.chunks.size(), false);
    slot_of_.emplace_back(r.chunks.size(), -1);
    granted_.emplace_back(r.chunks.size(), false);
    for (std::size_t k = 0; k < r.chunks.size(); ++k) {
      const bool staged = r.chunks[k].path == lowering::CopyPath::kStaged;
      auto& list = staged ? staged_ : in_place_[static_cast<std::size_t>(r.peer.value)];
      list.emplace_back(i, static_cast<std::int64_t>(k));
    }
    chunks_left_ += static_cast<std::int64_t>(r.chunks.size());
  }
  prefix_.assign(program.receives().size() + program.steps().size(), 0);
}

void ReceiveBook::start(std::vector<Grant>& out) {
  for (std::size_t sender = 0; sender < in_place_.size(); ++sender) grant_in_place(sender, out);
  grant_staged(out);
}

std::optional<std::size_t> ReceiveBook::receive_of(std::int64_t transfer) const {
  if (transfer < 0 || static_cast<std::size_t>(transfer) >= receive_of_transfer_.size()) return std::nullopt;
  const auto i = receive_of_transfer_[static_cast<std::size_t>(transfer)];
  return i < 0 ? std::nullopt : std::optional<std::size_t>(static_cast<std::size_t>(i));
}

std::optional<std::size_t> ReceiveBook::receive_from(std::int64_t transfer, std::int32_t from) const {
  const auto i = receive_of(transfer);
  return i && program_.receives()[*i].peer.value == from ? i : std::nullopt;
}

bool ReceiveBook::awaits(std::size_t receive, std::int64_t chunk) const {
  const auto& arrived = arrived_[receive];
  if (chunk < 0 || chunk >= static_cast<std::int64_t>(arrived.size())) return false;
  const auto k = static_cast<std::size_t>(chunk);
  return !arrived[k] && (dropped_[receive] || granted_[receive][k] || slot_of_[receive][k] >= 0);
}

std::int64_t ReceiveBook::slot(std::size_t receive, std::int64_t chunk) const {
  return slot_of_[receive][static_cast<std::size_t>(chunk)];
}

void ReceiveBook::land(std::size_t receive, std::int64_t chunk, std::vector<Grant>& out) {
  const auto k = static_cast<std::size_t>(chunk);
  auto& arrived = arrived_[receive];
  arrived[k] = true;
  auto& prefix = prefix_[receive];
  while (prefix < static_cast<std::int64_t>(arrived.size()) && arrived[static_cast<std::size_t>(prefix)])
    ++prefix;
  --chunks_left_;
  if (auto& slot = slot_of_[receive][k]; slot >= 0) {
    slots_.give(slot);
    slot = -1;
    return grant_staged(out);
  }
  granted_[receive][k] = false;
  --in_place_granted_[sender(receive)];
  grant_in_place(sender(receive), out);
}

void ReceiveBook::discard(std::size_t receive, std::int64_t chunk, std::vector<Grant>& out) {
  free_chunk(receive, chunk);
  grant_in_place(sender(receive), out);
  grant_staged(out);
}

void ReceiveBook::step_ran(std::size_t step) {
  prefix_[program_.receives().size() + step] = program_.layout(program_.steps()[step].transfer).chunks();
}

bool ReceiveBook::landed(const std::vector<ChunkWait>& waits) const {
  return std::ranges::all_of(
      waits, [&](const ChunkWait& w) { return prefix_[static_cast<std::size_t>(w.receive)] >= w.chunks; });
}

void ReceiveBook::drop(std::size_t receive) {
  if (dropped_[receive]) return;
  dropped_[receive] = true;
  chunks_left_ -= std::ranges::count(arrived_[receive], false);
}

void ReceiveBook::release(std::size_t receive, std::vector<Grant>& out) {
  released_[receive] = true;
  for (std::size_t k = 0; k < arrived_[receive].size(); ++k)
    if (!arrived_[receive][k]) free_chunk(receive, static_cast<std::int64_t>(k));
  grant_in_place(sender(receive), out);
  grant_staged(out);
}

void ReceiveBook::grant_in_place(std::size_t sender, std::vector<Grant>& out) {
  auto& next = next_in_place_[sender];
  for (; next < in_place_[sender].size() && in_place_granted_[sender] < window_; ++next) {
    const auto [i, chunk] = in_place_[sender][next];
    if (dropped_[i]) continue;
    granted_[i][static_cast<std::size_t>(chunk)] = true;
    out.push_back(Grant{
        .receive = i, .chunk = chunk, .runs = program_.receive_runs[i][static_cast<std::size_t>(chunk)]});
    ++in_place_granted_[sender];
  }
}

// Staged chunks are granted strictly in plan order, as slots come free.
void ReceiveBook::grant_staged(std::vector<Grant>& out) {
  const auto& staging = program_.receive_staging;
  while (next_staged_ < staged_.size() && slots_.available()) {
    const auto [i, chunk] = staged_[next_staged_++];
    if (dropped_[i]) continue;
    const auto slot = slots_.take();
    slot_of_[i][static_cast<std::size_t>(chunk)] = slot;
    const auto bytes = program_.layout(program_.receives()[i].transfer).chunk_bytes(chunk);
    out.push_back(Grant{.receive = i,
                        .chunk = chunk,
                        .runs = {Run{.stream = 0,
                                     .region = program_.receive_staging_region,
                                     .offset = slot * staging.slot_bytes,
                                     .length = bytes}}});
  }
}

void ReceiveBook::free_chunk(std::size_t receive, std::int64_t chunk) {
  const auto k = static_cast<std::size_t>(chunk);
  if (auto& slot = slot_of_[receive][k]; slot >= 0) {
    slots_.give(slot);
    slot = -1;
  }
  if (granted_[receive][k]) {
    granted_[receive][k] = false;
    --in_place_granted_[sender(receive)];
  }
}

std::size_t ReceiveBook::sender(std::size_t receive) const {
  return static_cast<std::size_t>(program_.receives()[receive].peer.value);
}

}  // namespace refit::ucx_detail
