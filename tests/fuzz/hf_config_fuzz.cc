// Fuzz target: a Hugging Face config.json (refit --model config.json), turned into a model spec
// and, when accepted, into the tensors of a small job (tp=2,pp=2 -> tp=2), as refit plan does.
// Models of many tensors (the cap is 2^20) are left at the spec: the job adds nothing to parse
// and would spend the fuzzing budget on one input.
#include "fuzz_input.h"
#include "refit/models/hf_config.h"
#include "refit/models/parallel_config.h"
#include "refit/models/problem_builder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace refit::models;
  const auto model = parse_hf_config(refit::fuzz::text_of(data, size));
  refit::fuzz::expect_clean(model);
  if (model && model->tensors.size() <= 4096)
    refit::fuzz::expect_clean(
        build_problem(*model, parse_megatron("tp=2,pp=2").value(), parse_vllm("tp=2").value()));
  return 0;
}
