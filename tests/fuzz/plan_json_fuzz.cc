// Fuzz target: a plan file (refit simulate --plan plan.json), read and checked as every consumer
// checks it before indexing by it.
#include "fuzz_input.h"
#include "refit/planner/plan_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto plan = refit::parse_plan_json(refit::fuzz::text_of(data, size));
  refit::fuzz::expect_clean(plan);
  if (plan) refit::fuzz::expect_clean(refit::validate_structure(*plan));
  return 0;
}
