// config.json -> HfFields: which fields each architecture needs, their defaults (those of the
// transformers config classes) and their consistency. Tensors are made in model_tensors.cc.
#include "refit/models/hf_config.h"
#include "refit/core/named_table.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hf_fields.h"
#include "refit/core/json_fields.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/core/utf8.h"

namespace refit::models {
namespace {

using json_fields::FieldReader;
using json_fields::Json;

// Far above any published model (vocabularies are below 300k), low enough that shapes and their
// products never overflow.
constexpr std::int64_t kMaxConfigValue = std::int64_t{1} << 20;

DType read_dtype(FieldReader& r, const HfOptions& options) {
  if (options.dtype) return *options.dtype;
  // transformers >= 4.56 writes "dtype"; older configs "torch_dtype".
  for (const std::string_view key : {"torch_dtype", "dtype"}) {
    if (!r.has(key)) continue;
    const std::string text = r.string(key);
    auto dtype = parse_dtype(text);
    if (dtype) return *dtype;
    r.fail(key, dtype.error().message, dtype.error().code);
    return DType::kBF16;
  }
  r.fail("torch_dtype", "missing (or give a dtype override)");
  return DType::kBF16;
}

void read_core(FieldReader& r, HfFields& f) {
  f.hidden = r.integer("hidden_size", 1);
  f.layers = r.integer("num_hidden_layers", 1);
  f.heads = r.integer("num_attention_heads", 1);
  f.kv_heads = r.optional_integer("num_key_value_heads", 1).value_or(f.heads);
  f.vocab = r.integer("vocab_size", 1);
  f.tied_embeddings = r.flag("tie_word_embeddings", false);
  if (f.heads % f.kv_heads != 0)
    r.fail("num_key_value_heads",
           fmt::format("{} does not divide num_attention_heads={}", f.kv_heads, f.heads));
}

void read_mla(FieldReader& r, HfFields& f) {
  MlaFields m;
  if (!r.contains("q_lora_rank")) r.fail("q_lora_rank", "missing (null means no query compression)");
  m.q_lora_rank = r.optional_integer("q_lora_rank", 1);
  m.kv_lora_rank = r.integer("kv_lora_rank", 1);
  m.qk_nope_head_dim = r.integer("qk_nope_head_dim", 1);
  m.qk_rope_head_dim = r.integer("qk_rope_head_dim", 1);
  m.v_head_dim = r.integer("v_head_dim", 1);
  if (r.flag("attention_bias", false))
    r.fail("attention_bias", "true is not supported for deepseek_v3", ErrorCode::kUnsupported);
  f.mla = m;
}

// Which biases an architecture's q/k/v and o projections have, as vLLM's model classes read
// the config (docs/models.md, "Attention biases").
enum class AttentionBias : std::uint8_t {
  kNone,       // none, and the config has no field for them (Mixtral)
  kLlama,      // o as attention_bias or bias says, q/k/v too unless qkv_bias says otherwise
  kQkvFlag,    // q/k/v as attention_bias says, o never (Qwen3, Qwen3-MoE)
  kQkvAlways,  // q/k/v always, o never (Qwen2)
};

// Grouped-query attention: q/k/v/o projections of head_dim per head.
struct GqaRules {
  AttentionBias attention_bias = AttentionBias::kNone;
  bool mlp_bias = false;  // the dense MLP's biases, as mlp_bias says (Llama)
  bool qk_norm = false;   // RMSNorm of q and k per head (Qwen3)
};

void read_attention_bias(FieldReader& r, AttentionBias rule, HfFields& f) {
  switch (rule) {
    case AttentionBias::kNone:
      return;
    case AttentionBias::kLlama: {
      // LlamaDecoderLayer: bias_o_proj = attention_bias or bias; a qkv_bias key, even false or
      // null (InternLM3), overrides it for q/k/v only.
      const bool flag = r.flag("attention_bias", false) || r.flag("bias", false);
      f.o_bias = flag;
      f.qkv_bias = r.contains("qkv_bias") ? r.flag("qkv_bias", false) : flag;
      return;
    }
    case AttentionBias::kQkvFlag:
      f.qkv_bias = r.flag("attention_bias", false);
      return;
    case AttentionBias::kQkvAlways:
      f.qkv_bias = true;
      return;
  }
}

void read_gqa(FieldReader& r, const GqaRules& rules, HfFields& f) {
  const auto head_dim = r.optional_integer("head_dim", 1);
  if (!head_dim && f.hidden % f.heads != 0)
    r.fail("head_dim", fmt::format("missing, and hidden_size={} is not a multiple of "
                                   "num_attention_heads={}",
                                   f.hidden, f.heads));
  f.head_dim = head_dim.value_or(f.hidden / f.heads);
  read_attention_bias(r, rules.attention_bias, f);
  f.mlp_bias = rules.mlp_bias && r.flag("mlp_bias", false);
  f.qk_norm = rules.qk_norm;
}

constexpr std::array<std::string_view, 3> kProjNames{"gate_proj", "up_proj", "down_proj"};

void read_qwen3_moe(FieldReader& r, HfFields& f) {
  const auto experts = r.integer("num_experts", 0);
  const auto step = r.optional_integer("decoder_sparse_step", 1).value_or(1);
  const auto mlp_only = r.optional_integers("mlp_only_layers", 0);
  if (experts == 0) return;
  f.moe = MoeFields{.num_experts = experts,
                    .intermediate = r.integer("moe_intermediate_size", 1),
                    .shared_intermediate = 0,
                    .score_correction_bias = false,
                    .expert_groups = 1,
                    .module = "mlp",
                    .names = kProjNames};
  for (std::int64_t i = 0; i < f.layers; ++i)
    f.moe_layer.push_back(std::ranges::find(mlp_only, i) == mlp_only.end() && (i + 1) % step == 0);
}

void read_mixtral(FieldReader& r, HfFields& f) {
  // Mixtral's intermediate_size is the size of each expert; it has no dense MLP.
  f.moe = MoeFields{.num_experts = r.integer("num_local_experts", 1),
                    .intermediate = r.integer("intermediate_size", 1),
                    .shared_intermediate = 0,
                    .score_correction_bias = false,
                    .expert_groups = 1,
                    .module = "block_sparse_moe",
                    .names = {"w1", "w3", "w2"}};
  f.moe_layer.assign(static_cast<std::size_t>(f.layers), true);
}

// DeepSeek-V3's MoE keys (docs/models.md, "DeepSeek-V3 defaults"). A missing one takes
// transformers' DeepseekV3Config default, which vLLM builds from; null n_routed_experts is a dense
// model, null n_shared_experts none. Two are refused when missing: n_routed_experts, whose
// default of 256 a config without experts hardly means, and topk_method, which decides the router
// bias and whose default differs between transformers releases.
void read_deepseek_moe(FieldReader& r, HfFields& f) {
  if (!r.contains("n_routed_experts"))
    r.fail("n_routed_experts",
           "missing (transformers would give 256 routed experts; null for a dense model)");
  if (!r.contains("topk_method"))
    r.fail("topk_method",
           "missing (noaux_tc gives the router an e_score_correction_bias; transformers' default for it "
           "differs between releases)");
  const auto experts = r.optional_integer("n_routed_experts", 1);
  if (!experts) return;
  const auto intermediate = r.integer("moe_intermediate_size", 1);
  const auto shared =
      r.contains("n_shared_experts") ? r.optional_integer("n_shared_experts", 0).value_or(0) : 1;
  const auto groups = r.contains("n_group") ? r.optional_integer("n_group", 1).value_or(1) : 8;
  // null here would make vLLM compare a layer index with None: refused as not an integer.
  const auto first_dense = r.contains("first_k_dense_replace") ? r.integer("first_k_dense_replace", 0) : 3;
  const auto frequency = r.contains("moe_layer_freq") ? r.integer("moe_layer_freq", 1) : 1;
  // vLLM's DeepseekV2MoE gives the router a bias only for noaux_tc routing (so has no expert_bias
  // to receive from Megatron otherwise).
  const auto method = r.string_or("topk_method", "");
  constexpr std::string_view kMethods[] = {"greedy", "group_limited_greedy", "noaux_tc"};
  if (r.has("topk_method") && std::ranges::find(kMethods, method) == std::end(kMethods))
    r.fail("topk_method",
           fmt::format("'{}' is none of DeepSeek's routings (greedy, group_limited_greedy, noaux_tc)",
                       escaped_line(method.substr(0, 40))));
  if (groups > 0 && *experts % groups != 0)
    r.fail("n_group", fmt::format("{} groups do not split the {} routed experts evenly", groups, *experts));
  const bool bias = method == "noaux_tc";
  f.moe = MoeFields{.num_experts = *experts,
                    .intermediate = intermediate,
                    .shared_intermediate = shared * intermediate,
                    .score_correction_bias = bias,
                    .expert_groups = groups,
                    .module = "mlp",
                    .names = kProjNames};
  for (std::int64_t i = 0; i < f.layers + f.mtp_layers; ++i)
    f.moe_layer.push_back(i >= first_dense && i % frequency == 0);
}

void read_mtp(FieldReader& r, bool has_mtp, const HfOptions& options, HfFields& f) {
  if (!options.include_mtp) return;
  f.mtp_layers = has_mtp ? r.optional_integer("num_nextn_predict_layers", 0).value_or(0) : 0;
  if (f.mtp_layers == 0) r.fail("num_nextn_predict_layers", "the config has no MTP layer to include");
}

// How an architecture's config.json reads, one entry per model_type, each carrying its own rules
// (those of its transformers config and modelling classes).
struct Architecture {
  std::string_view model_type;
  std::string_view canonical;  // the architecture refit names it by
  // Its attention: grouped-query by these rules, or (nullopt) DeepSeek's multi-head latent one.
  std::optional<GqaRules> gqa;
  void (*read_experts)(FieldReader&, HfFields&) = nullptr;  // null: a dense model
  bool has_mtp = false;  // multi-token-prediction layers (num_nextn_predict_layers)
};

constexpr GqaRules kLlamaRules{.attention_bias = AttentionBias::kLlama, .mlp_bias = true};
constexpr GqaRules kQwen3Rules{.attention_bias = AttentionBias::kQkvFlag, .qk_norm = true};
constexpr Architecture kDeepseekV3{.model_type = "deepseek_v3",
                                   .canonical = "deepseek_v3",
                                   .gqa = std::nullopt,
                                   .read_experts = &read_deepseek_moe,
                                   .has_mtp = true};

const std::array<Architecture, 7> kArchitectures{{
    {.model_type = "llama", .canonical = "llama", .gqa = kLlamaRules},
    {.model_type = "qwen2",
     .canonical = "qwen2",
     .gqa = GqaRules{.attention_bias = AttentionBias::kQkvAlways}},
    {.model_type = "qwen3", .canonical = "qwen3", .gqa = kQwen3Rules},
    {.model_type = "qwen3_moe",
     .canonical = "qwen3_moe",
     .gqa = kQwen3Rules,
     .read_experts = &read_qwen3_moe},
    {.model_type = "mixtral", .canonical = "mixtral", .gqa = GqaRules{}, .read_experts = &read_mixtral},
    kDeepseekV3,
    // Kimi-K2 is DeepSeek-V3's architecture.
    [] {
      auto kimi = kDeepseekV3;
      kimi.model_type = "kimi_k2";
      return kimi;
    }(),
}};

[[nodiscard]] Result<const Architecture*> find_architecture(FieldReader& r) {
  const std::string type = r.string("model_type");
  REFIT_TRY(r.status());
  if (const auto* a = find_named(kArchitectures, type, &Architecture::model_type)) return a;
  return unsupported(fmt::format("model_type: unknown architecture '{}' (refit reads {})", type,
                                 names_of(kArchitectures, &Architecture::model_type)));
}

void read_dense_intermediate(FieldReader& r, HfFields& f) {
  const bool any_dense = !f.moe || std::ranges::find(f.moe_layer, false) != f.moe_layer.end();
  if (any_dense) f.intermediate = r.integer("intermediate_size", 1);
}

[[nodiscard]] Result<HfFields> read_fields(const Json& j, const HfOptions& options) {
  FieldReader r(j, "", kMaxConfigValue);
  const Architecture& arch = *REFIT_TRY(find_architecture(r));
  HfFields f;
  f.architecture = std::string(arch.canonical);
  f.dtype = read_dtype(r, options);
  read_core(r, f);
  if (arch.gqa)
    read_gqa(r, *arch.gqa, f);
  else
    read_mla(r, f);
  read_mtp(r, arch.has_mtp, options, f);
  if (arch.read_experts != nullptr) arch.read_experts(r, f);
  read_dense_intermediate(r, f);
  REFIT_TRY(r.status());
  return f;
}

// A checkpoint that ships quantized (DeepSeek-V3's fp8 in 128x128 blocks) is served so by vLLM,
// while refit moves the weights in their dtype unless --quantize says otherwise: a sentence that
// says which, or nothing when the config has no quantization_config.
std::optional<std::string> quantization_note(const Json& j, const std::string& name, DType dtype) {
  const auto it = j.find("quantization_config");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  const auto method = it->contains("quant_method") && (*it)["quant_method"].is_string()
                          ? (*it)["quant_method"].get<std::string>()
                          : std::string("not named");
  const auto block = it->value("weight_block_size", Json());
  if (method == "fp8" && block == Json::array({128, 128}))
    return fmt::format(
        "{}: quantization_config ships the weights in fp8 with 128x128 blocks, as vLLM serves them: "
        "--quantize fp8-block128 moves them so; planned in {} without it",
        name, dtype_name(dtype));
  return fmt::format(
      "{}: quantization_config (quant_method {:.40}, weight_block_size {:.40}) is not modelled: "
      "planned in {}",
      name, printable(method), printable(block.dump()), dtype_name(dtype));
}

}  // namespace

Result<ModelSpec> parse_hf_config(std::string_view json_text, const HfOptions& options, std::string name) {
  const auto j = REFIT_TRY(json_fields::parse_object(json_text, name));
  const auto fields = REFIT_TRY_IN(read_fields(j, options), name);
  auto note = quantization_note(j, name, fields.dtype);
  auto spec = REFIT_TRY(make_model_spec(fields, options, std::move(name)));
  if (note) spec.notes.push_back(std::move(*note));
  return spec;
}

std::filesystem::path hf_config_file(const std::filesystem::path& path) {
  std::error_code unknown;  // read_text_file says why
  return std::filesystem::is_directory(path, unknown) ? path / "config.json" : path;
}

Result<ModelSpec> load_hf_config(const std::filesystem::path& path, const HfOptions& options) {
  const auto file = hf_config_file(path);
  const auto text = REFIT_TRY(read_text_file(file));
  return parse_hf_config(text, options, file.string());
}

}  // namespace refit::models
