#include "prediction_notes.h"

#include <fmt/format.h>

#include "refit/core/utf8.h"
#include "say.h"

namespace refit::cli {

void NotePrinter::print(std::span<const Prediction> rows) {
  for (const auto& r : rows)
    for (const auto& note : r.notes)
      if (said_.insert(note).second) say("refit {}: note: {}\n", command_, escaped_line(note));
}

}  // namespace refit::cli
