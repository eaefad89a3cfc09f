// Uses the installed refit::core (10 rows over 4 ranks split like torch.chunk into 3,3,3,1) and
// the executor registry, whose backends pull in UCX, CUDA and NCCL where this build has them.
#include <cstdio>

#include <refit/core/layout.h>
#include <refit/executors/registry.h>

int main() {
  auto mesh = refit::Mesh::make({4});
  auto layout = refit::Layout::make({10}, *mesh, {refit::Placement::shard(0)});
  if (!layout) return 1;
  std::printf("extent");
  for (int r = 0; r < 4; ++r)
    std::printf(" %lld", static_cast<long long>(layout->local_box(refit::Rank{r})->extent[0]));
  std::printf("\nexecutors");
  for (const auto name : refit::executor_names())
    std::printf(" %.*s", static_cast<int>(name.size()), name.data());
  std::printf("\n");
  return 0;
}
