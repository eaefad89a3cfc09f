#pragma once
// The notes of predictions on stderr, each distinct one once: a cluster's assumption, say, holds
// for every row of --compare and every point of a sweep.
#include <span>
#include <string_view>
#include <unordered_set>

#include "refit/facade/prediction.h"

namespace refit::cli {

class NotePrinter {
 public:
  // `command` names the command in each line ("simulate": "refit simulate: note: ...").
  explicit NotePrinter(std::string_view command) : command_(command) {}
  // Prints the notes of `rows` not printed before; the rows outlive the printer.
  void print(std::span<const Prediction> rows);

 private:
  std::string_view command_;
  std::unordered_set<std::string_view> said_;
};

}  // namespace refit::cli
