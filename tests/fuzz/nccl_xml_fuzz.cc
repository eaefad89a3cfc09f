// Fuzz target: an NCCL topology dump (refit topo --nccl-topo-xml), imported and, when accepted,
// written as a cluster file that must read back.
#include <cstdlib>

#include "fuzz_input.h"
#include "refit/topology/cluster_json.h"
#include "refit/topology/nccl_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto cluster = refit::import_nccl_topology(refit::fuzz::text_of(data, size), "fuzz.xml");
  refit::fuzz::expect_clean(cluster);
  if (!cluster) return 0;
  if (!refit::parse_cluster_json(refit::cluster_to_json(*cluster).dump())) std::abort();
  return 0;
}
