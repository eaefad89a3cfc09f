#include "prediction_notes.h"

#include <fmt/format.h>

namespace refit::cli {

void NotePrinter::print(std::span<const Prediction> rows) {
  for (const auto& r : rows)
    for (const auto& note : r.notes)
      if (said_.insert(note).second) fmt::print(stderr, "refit {}: note: {}\n", command_, note);
}

}  // namespace refit::cli
