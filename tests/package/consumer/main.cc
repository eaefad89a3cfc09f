// Uses the installed refit::core: 10 rows over 4 ranks split like torch.chunk into 3,3,3,1.
#include <cstdio>

#include <refit/core/layout.h>

int main() {
  auto mesh = refit::Mesh::make({4});
  auto layout = refit::Layout::make({10}, *mesh, {refit::Placement::shard(0)});
  if (!layout) return 1;
  std::printf("extent");
  for (int r = 0; r < 4; ++r) std::printf(" %lld", static_cast<long long>(layout->local_box(refit::Rank{r})->extent[0]));
  std::printf("\n");
  return 0;
}
