#include "writable_memory.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <optional>

#include <fmt/format.h>

namespace refit::python {
namespace {

// [begin, end) address ranges of the writable mappings, sorted and merged where they touch.
using Ranges = std::vector<std::pair<std::uintptr_t, std::uintptr_t>>;

// A line of /proc/self/maps: "begin-end perms offset dev inode path", addresses in hex.
std::optional<std::pair<std::uintptr_t, std::uintptr_t>> writable_range(std::string_view line) {
  std::uintptr_t begin = 0, end = 0;
  const auto* p = line.data();
  const auto* last = line.data() + line.size();
  auto r = std::from_chars(p, last, begin, 16);
  if (r.ec != std::errc{} || r.ptr == last || *r.ptr != '-') return std::nullopt;
  r = std::from_chars(r.ptr + 1, last, end, 16);
  if (r.ec != std::errc{} || last - r.ptr < 3 || r.ptr[2] != 'w') return std::nullopt;
  return std::pair(begin, end);
}

std::optional<Ranges> writable_ranges() {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return std::nullopt;
  Ranges out;
  for (std::string line; std::getline(maps, line);)
    if (const auto range = writable_range(line)) out.push_back(*range);
  std::ranges::sort(out);
  Ranges merged;
  for (const auto& r : out)
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  return merged;
}

bool covered(const Ranges& ranges, std::uintptr_t begin, std::uintptr_t end) {
  const auto it =
      std::ranges::upper_bound(ranges, begin, {}, &std::pair<std::uintptr_t, std::uintptr_t>::first);
  return it != ranges.begin() && std::prev(it)->second >= end;
}

}  // namespace

Result<void> check_writable(const std::vector<std::pair<std::span<std::byte>, std::string>>& buffers,
                            Rank rank) {
  if (std::ranges::all_of(buffers, [](const auto& b) { return b.first.empty(); })) return {};
  const auto ranges = writable_ranges();
  if (!ranges) return {};
  for (const auto& [memory, name] : buffers) {
    if (memory.empty()) continue;
    const auto begin = reinterpret_cast<std::uintptr_t>(memory.data());
    if (!covered(*ranges, begin, begin + memory.size()))
      return invalid(
          fmt::format("buffer '{}' (rank {}): its memory is read-only (e.g. a read-only memmap "
                      "under a torch tensor), but an inference rank's buffers are written",
                      name, rank.value));
  }
  return {};
}

}  // namespace refit::python
