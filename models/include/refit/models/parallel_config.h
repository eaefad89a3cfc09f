#pragma once
// The parallel sizes of a training job (Megatron-Core) and of an inference engine (vLLM),
// parsed from the compact "key=value,..." notation users already write in their launch scripts.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "refit/core/error.h"

namespace refit::models {

// Megatron-LM's --make-vocab-size-divisible-by default (docs/frameworks.md, vocab padding).
inline constexpr std::int64_t kMegatronVocabDivisibleBy = 128;

// World = tp*cp*dp*pp = etp*ep*edp*pp.
struct MegatronConfig {
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t ep = 1;
  std::int64_t etp = 1;  // parse_megatron() sets it to tp unless given, as Megatron does
  std::int64_t cp = 1;
  std::int64_t dp = 1;
  // Megatron's --decoder-first/last-pipeline-num-layers: decoder layers of the first/last stage.
  std::optional<std::int64_t> pp_first;
  std::optional<std::int64_t> pp_last;
  // Virtual pipeline stages per stage (--num-virtual-stages-per-pipeline-rank): the decoder is cut
  // into pp*vp model chunks, chunk c on stage c % pp (the interleaved schedule).
  std::int64_t vp = 1;
  // Megatron's --pipeline-model-parallel-layout, e.g. "Et|(tt|)*30mL" (empty: none); it sets vp.
  std::string layout;
  // Megatron-LM's --make-vocab-size-divisible-by: the vocab is padded to a multiple of it times
  // tp. 0: not padded, as Megatron-Bridge builds models unless should_pad_vocab is set; tp must
  // then divide the vocab.
  std::int64_t vocab_divisible_by = kMegatronVocabDivisibleBy;
  // Megatron's local (Transformer-Engine-free) layer spec, spec=local: its MLA down projections
  // are column-parallel (rows split over tp) where the TE spec's are replicated.
  bool local_spec = false;
  // Megatron's moe_mlp_glu_interleave_size (glu_interleave=N; 0: none): routed experts' fc1 rows
  // as blocks of N gate rows and N up rows taking turns instead of [gate; up].
  std::int64_t glu_interleave = 0;

  std::int64_t world() const { return tp * cp * dp * pp; }
  std::int64_t stage_size() const { return tp * cp * dp; }
  std::int64_t edp() const { return stage_size() / (ep * etp); }
};

// vLLM's expert_placement_strategy (determine_expert_map; docs/frameworks.md, vLLM's "MoE"): with
// EP, rank r holds experts r*E/EP onwards (linear) or r, r+EP, r+2*EP, ... (round_robin). What a
// user asks for is not always what vLLM does: resolve_expert_placement (expert_placement.h).
enum class ExpertPlacement : std::uint8_t { kLinear, kRoundRobin };

// vLLM's all2all backends (ParallelConfig.all2all_backend, --all2all-backend), by name, with
// whether vLLM keeps a round-robin expert placement on it when its MoE layers exchange tokens
// all-to-all (needs_round_robin_routing_tables: the DeepEP low-latency and NIXL EP kernels), and
// whether it runs MoE layers sequence-parallel with EP, tp > 1 and dp > 1, which builds the
// shared experts without TP (ParallelConfig.use_sequence_parallel_moe; docs/frameworks.md, "MoE").
struct All2AllBackend {
  std::string_view name;
  bool keeps_round_robin = false;
  bool sequence_parallel_moe = false;
};
std::span<const All2AllBackend> all2all_backends();
// vLLM's default all2all backend (ParallelConfig.all2all_backend).
inline constexpr std::string_view kDefaultAll2All = "allgather_reducescatter";

// One vLLM engine runs tp*dp ranks: `dp` is its --data-parallel-size (internal data parallel,
// which FusedMoEParallelConfig.make flattens with TP for the MoE layers); `engines` separate
// engines (each its own vLLM instance, as RL frameworks launch generation replicas) hold
// copies of one another. Ranks: tp + TP*(dp + DP*engine).
struct VllmConfig {
  std::int64_t tp = 1;
  std::int64_t dp = 1;
  std::int64_t engines = 1;
  bool expert_parallel = false;  // experts split over EP = tp*dp ranks instead of TP-sharded
  ExpertPlacement placement = ExpertPlacement::kLinear;
  std::string all2all{kDefaultAll2All};  // one of all2all_backends()

  std::int64_t engine_size() const { return tp * dp; }
  std::int64_t world() const { return engine_size() * engines; }
  std::int64_t ep() const { return expert_parallel ? engine_size() : 1; }
};

// Keys tp, pp, ep, etp, cp, dp, pp_first, pp_last, vp (each at most once, values >= 1), layout
// (a pipeline layout string, without Megatron's cosmetic commas), vocab_divisible_by (>= 1, or
// 0/off for an unpadded vocab), spec (te, the default, or local) and glu_interleave (>= 1), e.g.
// "tp=4,pp=8,ep=16".
// Without etp: tp (Megatron's expert_tensor_parallel_size default). Without dp: the smallest dp
// that makes the expert layout valid (tp*cp*dp a multiple of ep*etp), so "pp=16,ep=16" is 256
// ranks.
[[nodiscard]] Result<MegatronConfig> parse_megatron(std::string_view text);
// Keys tp, dp, engines, pp (1 only), ep or expert_parallel (1/true/on, 0/false/off, or the EP
// size tp*dp), placement (linear or round_robin, with ep), all2all (a vLLM all2all backend),
// e.g. "tp=8,engines=16" or "tp=8,dp=16,ep=1,placement=round_robin,all2all=deepep_low_latency".
[[nodiscard]] Result<VllmConfig> parse_vllm(std::string_view text);

// Canonical forms with every size, e.g. "tp=4,pp=8,ep=16,etp=4,cp=1,dp=16" (",vp=N" and
// ",layout=..." when set) and
// "tp=8,dp=16,ep=off" (",engines=N" when there are several).
std::string to_string(const MegatronConfig& c);
std::string to_string(const VllmConfig& c);

}  // namespace refit::models
