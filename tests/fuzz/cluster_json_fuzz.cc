// Fuzz target: a cluster file (refit topo --cluster-file), read and, when accepted, written back
// as JSON and read again: what refit writes it must read.
#include <cstdlib>

#include "fuzz_input.h"
#include "refit/topology/cluster_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = refit::parse_cluster_json(refit::fuzz::text_of(data, size));
  refit::fuzz::expect_clean(file);
  if (!file) return 0;
  const auto ranks = file->ranks ? &*file->ranks : nullptr;
  const auto again = refit::parse_cluster_json(refit::cluster_to_json(file->cluster, ranks).dump());
  if (!again || again->cluster.spec() != file->cluster.spec()) std::abort();
  return 0;
}
