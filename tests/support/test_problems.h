#pragma once
// Builders for small reshard problems in tests.
#include <numeric>
#include <string>

#include "refit/core/problem.h"

namespace refit::testing {

inline std::vector<Rank> rank_range(std::int32_t first, std::int32_t count) {
  std::vector<Rank> out;
  for (std::int32_t i = 0; i < count; ++i) out.emplace_back(first + i);
  return out;
}

inline Layout make_layout(Shape shape, std::vector<std::int64_t> mesh, std::vector<Rank> ranks,
                          const char* placements) {
  return Layout::make(std::move(shape), Mesh::make(std::move(mesh), std::move(ranks)).value(),
                      parse_placements(placements).value())
      .value();
}

inline TensorReshard make_reshard(std::string name, Shape shape, Layout src, Layout dst,
                                  DType dtype = DType::kBF16) {
  return TensorReshard{.tensor = make_tensor_spec(std::move(name), std::move(shape), dtype).value(),
                       .source = std::move(src),
                       .destination = std::move(dst)};
}

}  // namespace refit::testing
