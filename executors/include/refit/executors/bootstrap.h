#pragma once
// How the processes of one refit find each other: rank, size, an allgather of byte strings and a
// barrier. Executors take it injected, so `refit run` can use MPI while a framework that already
// has its own process group can hand in an adaptor of its own.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"

namespace refit {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual std::int32_t rank() const = 0;
  virtual std::int32_t size() const = 0;
  // Every rank contributes `mine`; the result holds every rank's contribution, by rank.
  [[nodiscard]] virtual Result<std::vector<std::string>> allgather(std::string_view mine) = 0;
  [[nodiscard]] virtual Result<void> barrier() = 0;
};

}  // namespace refit
