#include "change_scan.h"

#include "element_types.h"
#include "runs.h"

namespace refit::delta {

ChangeScan scan_changes(std::span<const std::byte> baseline, std::span<const std::byte> current,
                        std::int64_t element_bytes, Checksum base) {
  ChangeScan scan{.stats = {.elements = static_cast<std::int64_t>(current.size()) / element_bytes,
                            .element_bytes = element_bytes},
                  .result = base};
  RunBuilder runs([&](const Run& run) { scan.stats.run_position_bytes += run_position_bytes(run); });
  with_element_type(element_bytes, [&]<class T>(T) {
    for_each_changed_word(baseline, current, [&](std::int64_t word, std::uint64_t a, std::uint64_t b) {
      scan.result = replace_word(scan.result, static_cast<std::uint64_t>(word), a, b);
      for_each_changed_in_word<T>(word, a ^ b, [&](std::int64_t index, T) {
        ++scan.stats.changed;
        runs.add(index);
      });
    });
  });
  runs.finish();
  return scan;
}

}  // namespace refit::delta
