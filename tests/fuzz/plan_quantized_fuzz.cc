// Fuzz target: a plan file with quantize steps, validated against the problem it claims to move:
// tests/data/manifests/landing_small.json quantized fp8-block128 at its landing ranks (a weight
// whose training layout cuts its blocks: bf16 to one engine, quantized there once, fp8 on to the
// other). validate() checks what the executors then index by: each step's values are what its
// `via`s brought, its scales are its values' blocks. Seeds: the plans refit plan writes for it
// (tests/data/fuzz/plan_quantized/).
#include "fuzz_input.h"
#include "refit/core/quantized_problem.h"
#include "refit/models/manifest.h"
#include "refit/planner/plan.h"
#include "refit/planner/plan_json.h"

namespace {

const refit::ReshardProblem& landing_problem() {
  static const auto problem = [] {
    const auto bf16 = refit::models::load_manifest(REFIT_FUZZ_DATA "/manifests/landing_small.json").value();
    const refit::QuantizeOptions q{.scheme = refit::QuantScheme::kFp8Block128,
                                   .site = refit::QuantSite::kLanding};
    return refit::quantize_problem(bf16, q, [](const refit::TensorSpec& t) { return t.shape.size() == 2; })
        .value();
  }();
  return problem;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto plan = refit::parse_plan_json(refit::fuzz::text_of(data, size));
  refit::fuzz::expect_clean(plan);
  if (plan) refit::fuzz::expect_clean(refit::validate(*plan, landing_problem()));
  return 0;
}
