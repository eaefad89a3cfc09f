#include "pci_pairing.h"

#include <algorithm>
#include <cctype>

namespace refit::detail {

std::int32_t pci_proximity(const PciLocation& a, const PciLocation& b) {
  const auto limit = std::min(a.chain.size(), b.chain.size());
  std::size_t shared = 0;
  while (shared < limit && a.chain[shared] == b.chain[shared]) ++shared;
  if (shared > 0) return 1 + static_cast<std::int32_t>(shared);
  return !a.socket.empty() && a.socket == b.socket ? 1 : 0;
}

std::vector<std::int32_t> pair_gpus_with_nics(const std::vector<PciLocation>& gpus,
                                              const std::vector<PciLocation>& nics) {
  std::vector<std::int32_t> load(nics.size(), 0);
  std::vector<std::int32_t> pairing;
  for (const auto& gpu : gpus) {
    std::int32_t best = -1;
    std::int32_t best_proximity = -1;
    for (std::size_t n = 0; n < nics.size(); ++n) {
      const auto p = pci_proximity(gpu, nics[n]);
      const bool closer = p > best_proximity;
      const bool as_close_less_loaded = p == best_proximity && load[n] < load[static_cast<std::size_t>(best)];
      if (closer || as_close_less_loaded) {
        best = static_cast<std::int32_t>(n);
        best_proximity = p;
      }
    }
    if (best >= 0) ++load[static_cast<std::size_t>(best)];
    pairing.push_back(best);
  }
  return pairing;
}

std::string normalize_bus_id(std::string_view bus_id) {
  std::string out;
  for (const char c : bus_id) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto colon = out.find(':');
  // Only a domain made longer by leading zeros is shortened; anything else is kept as given.
  if (colon != std::string::npos && colon > 4 && out.find_first_not_of('0') >= colon - 4)
    out.erase(0, colon - 4);
  return out;
}

}  // namespace refit::detail
