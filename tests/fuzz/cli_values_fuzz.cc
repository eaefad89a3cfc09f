// Fuzz target: the values of refit's command-line options. The first byte picks the option, the
// rest is its value: --train, --infer, --cluster (a preset with overrides), --placements,
// --shape and --mesh.
#include "../../cli/parse.h"
#include "fuzz_input.h"
#include "refit/core/placement.h"
#include "refit/models/parallel_config.h"
#include "refit/topology/presets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using refit::fuzz::expect_clean;
  if (size == 0) return 0;
  const auto value = refit::fuzz::text_of(data + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      expect_clean(refit::models::parse_megatron(value));
      break;
    case 1:
      expect_clean(refit::models::parse_vllm(value));
      break;
    case 2:
      expect_clean(refit::make_preset_cluster(value, 16));
      break;
    case 3:
      expect_clean(refit::parse_placements(value));
      break;
    case 4:
      expect_clean(refit::cli::parse_int_list(value, "--shape", 0));
      break;
    default:
      expect_clean(refit::cli::parse_mesh_shape(value, "--mesh"));
      break;
  }
  return 0;
}
