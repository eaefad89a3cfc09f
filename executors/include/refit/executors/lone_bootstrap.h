#pragma once
// A process on its own: rank 0 of a job of one, for an executor whose plan ranks all run in this
// process (every plan rank on one GPU: refit topo --measure's timing, the GPU tests). A test may
// give a larger size to stand for peers that never answer: only size 1 then makes a communicator.
#include <string>
#include <vector>

#include "refit/executors/bootstrap.h"

namespace refit {

class LoneBootstrap final : public Bootstrap {
 public:
  explicit LoneBootstrap(std::int32_t size = 1) : size_(size) {}
  std::int32_t rank() const override { return 0; }
  std::int32_t size() const override { return size_; }
  [[nodiscard]] Result<std::vector<std::string>> allgather(std::string_view mine) override {
    std::vector<std::string> all(static_cast<std::size_t>(size_));
    all[0] = std::string(mine);
    return all;
  }
  [[nodiscard]] Result<void> barrier() override { return {}; }

 private:
  std::int32_t size_;
};

}  // namespace refit
