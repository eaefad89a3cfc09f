// Fuzz target: a tensor manifest (refit --manifest tensors.json), turned into a reshard problem.
#include "fuzz_input.h"
#include "refit/models/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  refit::fuzz::expect_clean(refit::models::parse_manifest(refit::fuzz::text_of(data, size)));
  return 0;
}
