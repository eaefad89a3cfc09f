// Fuzz target: a version 2 manifest with both sides' storage maps (refit run --manifest F --storage
// framework), read and checked as refit run reads it (check_storage: regions that tile each box in
// disjoint memory, sizes without overflow) before any memory is touched. Seeds: manifests that
// refit models --storage --write-manifest wrote (tests/data/fuzz/manifest_storage/).
#include "fuzz_input.h"
#include "refit/models/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  refit::fuzz::expect_clean(refit::models::parse_manifest_with_storage(refit::fuzz::text_of(data, size)));
  return 0;
}
