#include "program.h"

namespace refit::nccl_detail {

std::int64_t Program::staging_start(std::int32_t index) const {
  std::int64_t start = 0;
  for (std::int32_t i = 0; i < index; ++i) start += staging_regions[static_cast<std::size_t>(i)];
  return start;
}

}  // namespace refit::nccl_detail
