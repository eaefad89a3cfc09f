#include "refit/models/parallel_config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipeline_layout.h"
#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit::models {
namespace {

using limits::kMaxRanks;

struct Setting {
  std::string_view key;
  std::string_view value;
};

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(' ');
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(' ') - first + 1);
}

// "tp=4, pp=8" -> {tp: 4, pp: 8}; every key known and given once.
[[nodiscard]] Result<std::vector<Setting>> split_settings(std::string_view text,
                                                          std::span<const std::string_view> keys) {
  std::vector<Setting> out;
  if (trim(text).empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    const auto item = trim(text.substr(start, end - start));
    start = end + 1;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) return parse_error(fmt::format("'{}': expected key=value", item));
    const Setting s{.key = trim(item.substr(0, eq)), .value = trim(item.substr(eq + 1))};
    if (std::ranges::find(keys, s.key) == keys.end())
      return not_found(fmt::format("unknown key '{}' (expected {})", s.key, fmt::join(keys, ", ")));
    if (std::ranges::find(out, s.key, &Setting::key) != out.end())
      return invalid(fmt::format("{}: given twice", s.key));
    out.push_back(s);
  }
  return out;
}

[[nodiscard]] Result<std::int64_t> size_value(const Setting& s) {
  std::int64_t v = 0;
  const auto* end = s.value.data() + s.value.size();
  const auto [ptr, ec] = std::from_chars(s.value.data(), end, v);
  if (!s.value.empty() && ec == std::errc::result_out_of_range && ptr == end)  // too large for int64
    return out_of_range(fmt::format("{}={}: not an integer", s.key, s.value));
  if (s.value.empty() || ec != std::errc{} || ptr != end)
    return parse_error(fmt::format("{}={}: not an integer", s.key, s.value));
  if (v < 1 || v > kMaxRanks)
    return out_of_range(fmt::format("{}={}: must be between 1 and {}", s.key, s.value, kMaxRanks));
  return v;
}

[[nodiscard]] Result<void> check_world(std::int64_t world, std::string_view formula) {
  if (world > kMaxRanks)
    return out_of_range(fmt::format("{} = {} ranks is more than {}", formula, world, kMaxRanks));
  return {};
}

// ep / expert_parallel: on, true, 1 -> 1; off, false, 0 -> 0; or the EP size.
[[nodiscard]] Result<std::int64_t> expert_parallel_value(const Setting& s) {
  if (s.value == "on" || s.value == "true") return 1;
  if (s.value == "off" || s.value == "false" || s.value == "0") return 0;
  return size_value(s);
}

constexpr std::array<std::string_view, 13> kMegatronKeys{"tp",
                                                         "pp",
                                                         "ep",
                                                         "etp",
                                                         "cp",
                                                         "dp",
                                                         "pp_first",
                                                         "pp_last",
                                                         "vp",
                                                         "layout",
                                                         "vocab_divisible_by",
                                                         "spec",
                                                         "glu_interleave"};

// vocab_divisible_by: a size, or 0/off for a vocab that is not padded.
[[nodiscard]] Result<std::int64_t> vocab_divisible_value(const Setting& s) {
  if (s.value == "off" || s.value == "0") return 0;
  return size_value(s);
}

// The sizes given, dp and the pipeline split still as the user wrote them.
[[nodiscard]] Result<MegatronConfig> read_megatron(std::span<const Setting> settings, bool& has_dp,
                                                   bool& has_etp) {
  MegatronConfig c;
  std::int64_t MegatronConfig::*const fields[] = {&MegatronConfig::tp, &MegatronConfig::pp,
                                                  &MegatronConfig::ep, &MegatronConfig::etp,
                                                  &MegatronConfig::cp, &MegatronConfig::dp};
  for (const auto& s : settings) {
    if (s.key == "layout") {
      c.layout = std::string(s.value);
      continue;
    }
    if (s.key == "vocab_divisible_by") {
      c.vocab_divisible_by = REFIT_TRY(vocab_divisible_value(s));
      continue;
    }
    if (s.key == "spec") {
      if (s.value != "te" && s.value != "local")
        return parse_error(
            fmt::format("spec={}: expected te (Transformer Engine layer spec) or local", s.value));
      c.local_spec = s.value == "local";
      continue;
    }
    const auto v = REFIT_TRY(size_value(s));
    const auto k = static_cast<std::size_t>(std::ranges::find(kMegatronKeys, s.key) - kMegatronKeys.begin());
    if (k < std::size(fields)) c.*fields[k] = v;
    if (s.key == "pp_first") c.pp_first = v;
    if (s.key == "pp_last") c.pp_last = v;
    if (s.key == "vp") c.vp = v;
    if (s.key == "glu_interleave") c.glu_interleave = v;
    has_dp = has_dp || s.key == "dp";
    has_etp = has_etp || s.key == "etp";
  }
  return c;
}

// A layout string sets vp (stages / pp) and excludes pp_first/pp_last, as Megatron's
// TransformerConfig.__post_init__ ("pipeline_model_parallel_layout cannot be set with other
// pipeline layout arguments") and argument checks (vp from get_num_stages_from_str) do
// (docs/frameworks.md, "Pipeline placement").
[[nodiscard]] Result<void> read_layout(MegatronConfig& c, bool has_vp) {
  if (c.pp_first || c.pp_last)
    return invalid(fmt::format("layout={}: cannot be combined with {} (Megatron refuses both)", c.layout,
                               c.pp_first ? "pp_first" : "pp_last"));
  const auto stages = static_cast<std::int64_t>(REFIT_TRY(parse_pipeline_layout(c.layout)).size());
  if (stages % c.pp != 0)
    return invalid(
        fmt::format("layout={}: {} virtual stages are not a multiple of pp={}", c.layout, stages, c.pp));
  if (has_vp && c.vp != stages / c.pp)
    return invalid(fmt::format("vp={}: layout={} has {} stages over pp={}, so vp = {}", c.vp, c.layout,
                               stages, c.pp, stages / c.pp));
  c.vp = stages / c.pp;
  return {};
}

// The interleaved schedule runs on pp >= 2 (Megatron's argument checks); get_num_layers_to_build
// splits the first/last stage's layers evenly over its virtual stages, and with pp=2 and both
// ends given get_transformer_layer_offset divides by the zero middle stages (docs/frameworks.md,
// "Pipeline placement").
[[nodiscard]] Result<void> check_virtual_stages(const MegatronConfig& c) {
  if (c.vp == 1) return {};
  if (c.pp < 2)
    return invalid(fmt::format("vp={}: virtual pipeline stages need pp >= 2 (pp={})", c.vp, c.pp));
  for (const auto& [name, n] : {std::pair{"pp_first", c.pp_first}, std::pair{"pp_last", c.pp_last}})
    if (n && *n % c.vp != 0)
      return invalid(fmt::format("{}={}: not a multiple of vp={} (each virtual stage takes {}/vp layers)",
                                 name, *n, c.vp, name));
  if (c.pp == 2 && c.pp_first && c.pp_last)
    return unsupported(
        fmt::format("vp={} with pp=2, pp_first and pp_last: no middle stage (Megatron's "
                    "get_transformer_layer_offset divides by their number)",
                    c.vp));
  return {};
}

}  // namespace

Result<MegatronConfig> parse_megatron(std::string_view text) {
  const auto settings = REFIT_TRY(split_settings(text, kMegatronKeys));
  bool has_dp = false;
  bool has_etp = false;
  auto c = REFIT_TRY(read_megatron(settings, has_dp, has_etp));
  if (!c.layout.empty())
    REFIT_TRY(read_layout(c, std::ranges::find(settings, "vp", &Setting::key) != settings.end()));
  // Megatron's expert_tensor_parallel_size defaults to the tensor-parallel size
  // (parallel_state.initialize_model_parallel, ModelParallelConfig.__post_init__).
  if (!has_etp) c.etp = c.tp;
  const auto dense = c.tp * c.cp;
  const auto expert = c.ep * c.etp;
  REFIT_TRY(check_world(dense, "tp*cp"));
  REFIT_TRY(check_world(expert, "ep*etp"));
  // Each stage holds tp*cp*dp ranks for dense weights and ep*etp*edp for experts.
  if (!has_dp) c.dp = std::lcm(dense, expert) / dense;
  if ((dense * c.dp) % expert != 0)
    return invalid(
        fmt::format("dp={}: tp*cp*dp = {} is not a multiple of ep*etp = {}, so the "
                    "experts cannot fill the ranks (leave dp out for the smallest "
                    "that fits)",
                    c.dp, dense * c.dp, expert));
  REFIT_TRY(check_world(dense * c.dp, "tp*cp*dp"));
  REFIT_TRY(check_world(c.world(), "tp*cp*dp*pp"));
  if ((c.pp_first || c.pp_last) && c.pp < 2)
    return invalid(fmt::format("{}: needs pp >= 2 (pp={})", c.pp_first ? "pp_first" : "pp_last", c.pp));
  REFIT_TRY(check_virtual_stages(c));
  return c;
}

std::span<const All2AllBackend> all2all_backends() {
  // vLLM 0.34's All2AllBackend (ParallelConfig.all2all_backend; docs/frameworks.md); naive and
  // pplx are still accepted there (and taken as allgather_reducescatter). Sequence-parallel MoE
  // as ParallelConfig.use_sequence_parallel_moe lists the backends in 0.33.0 (mori as the
  // releases that had it list it).
  static constexpr All2AllBackend kBackends[] = {
      {.name = "allgather_reducescatter", .sequence_parallel_moe = true},
      {.name = "naive", .sequence_parallel_moe = true},
      {.name = "pplx", .sequence_parallel_moe = true},
      {.name = "deepep_high_throughput", .sequence_parallel_moe = true},
      {.name = "deepep_low_latency", .keeps_round_robin = true, .sequence_parallel_moe = true},
      {.name = "deepep_v2", .sequence_parallel_moe = true},
      {.name = "mori", .sequence_parallel_moe = true},
      {.name = "mori_high_throughput", .sequence_parallel_moe = true},
      {.name = "mori_low_latency", .sequence_parallel_moe = true},
      {.name = "moonep"},
      {.name = "nixl_ep", .keeps_round_robin = true, .sequence_parallel_moe = true},
      {.name = "flashinfer_all2allv"},
      {.name = "flashinfer_nvlink_two_sided"},
      {.name = "flashinfer_nvlink_one_sided", .sequence_parallel_moe = true},
      {.name = "passthrough", .sequence_parallel_moe = true}};
  return kBackends;
}

namespace {

[[nodiscard]] Result<std::string> all2all_value(std::string_view value) {
  std::vector<std::string_view> names;
  for (const auto& b : all2all_backends()) {
    if (b.name == value) return std::string(value);
    names.push_back(b.name);
  }
  return parse_error(
      fmt::format("all2all={}: expected one of vLLM's all2all backends ({})", value, fmt::join(names, ", ")));
}

}  // namespace

Result<VllmConfig> parse_vllm(std::string_view text) {
  static constexpr std::array<std::string_view, 8> kKeys{
      "tp", "dp", "engines", "pp", "ep", "expert_parallel", "placement", "all2all"};
  const auto settings = REFIT_TRY(split_settings(text, kKeys));
  VllmConfig c;
  std::int64_t ep = 0;  // 0 off, 1 on, or the EP size the user wrote, checked against tp*dp
  bool seen_ep = false;
  for (const auto& s : settings) {
    if (s.key == "placement") {
      if (s.value != "linear" && s.value != "round_robin")
        return parse_error(fmt::format("placement={}: expected linear or round_robin", s.value));
      c.placement = s.value == "linear" ? ExpertPlacement::kLinear : ExpertPlacement::kRoundRobin;
      continue;
    }
    if (s.key == "all2all") {
      c.all2all = REFIT_TRY(all2all_value(s.value));
      continue;
    }
    const bool is_ep = s.key == "ep" || s.key == "expert_parallel";
    if (is_ep && seen_ep)
      return parse_error(fmt::format("{}: ep and expert_parallel are one setting, given twice", s.key));
    seen_ep = seen_ep || is_ep;
    const auto v = REFIT_TRY(is_ep ? expert_parallel_value(s) : size_value(s));
    if (s.key == "tp") c.tp = v;
    if (s.key == "dp") c.dp = v;
    if (s.key == "engines") c.engines = v;
    if (s.key == "pp" && v != 1)
      return unsupported(fmt::format("pp={}: only pp=1 is supported on the inference side", v));
    if (is_ep) ep = v;
  }
  REFIT_TRY(check_world(c.tp * c.dp, "tp*dp"));
  REFIT_TRY(check_world(c.world(), "tp*dp*engines"));
  if (ep > 1 && ep != c.engine_size())
    return invalid(
        fmt::format("ep={}: vLLM's expert-parallel size is tp*dp = {} (write ep=on "
                    "to turn it on)",
                    ep, c.engine_size()));
  c.expert_parallel = ep >= 1;
  if (c.placement == ExpertPlacement::kRoundRobin && !c.expert_parallel)
    return invalid("placement=round_robin: places experts over expert-parallel ranks (add ep=on)");
  return c;
}

std::string to_string(const MegatronConfig& c) {
  std::string s = fmt::format("tp={},pp={},ep={},etp={},cp={},dp={}", c.tp, c.pp, c.ep, c.etp, c.cp, c.dp);
  if (c.pp_first) s += fmt::format(",pp_first={}", *c.pp_first);
  if (c.pp_last) s += fmt::format(",pp_last={}", *c.pp_last);
  if (c.vp > 1) s += fmt::format(",vp={}", c.vp);
  if (!c.layout.empty()) s += ",layout=" + c.layout;
  if (c.vocab_divisible_by == 0) s += ",vocab_divisible_by=off";
  if (c.vocab_divisible_by > 0 && c.vocab_divisible_by != kMegatronVocabDivisibleBy)
    s += fmt::format(",vocab_divisible_by={}", c.vocab_divisible_by);
  if (c.local_spec) s += ",spec=local";
  if (c.glu_interleave > 0) s += fmt::format(",glu_interleave={}", c.glu_interleave);
  return s;
}

std::string to_string(const VllmConfig& c) {
  auto s = fmt::format("tp={},dp={},ep={}", c.tp, c.dp, c.expert_parallel ? "on" : "off");
  if (c.engines > 1) s += fmt::format(",engines={}", c.engines);
  if (c.placement == ExpertPlacement::kRoundRobin) s += ",placement=round_robin";
  return c.all2all == kDefaultAll2All ? s : s + ",all2all=" + c.all2all;
}

}  // namespace refit::models
