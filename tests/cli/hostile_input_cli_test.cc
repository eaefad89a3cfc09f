// Hostile inputs through the real binary, one per defect class of issue 18's campaign: each exits
// 2 with "refit <cmd>: error:" and a message naming the culprit (the defects were aborts, stack
// overflows, gigabytes and runs past 10 s; the last are refused by checks before the work, which
// their messages name).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

const std::string kData = std::string(REFIT_TEST_DATA_DIR);

// A file in the temporary folder holding `text`, removed with the object.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("refit_hostile_" + std::to_string(::getpid()) + "_" + name)) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

struct Hostile {
  const char* name;
  std::string args;  // each {file} is replaced by the path of a file holding `file_text`
  std::string file_text;
  const char* must_mention;
  friend void PrintTo(const Hostile& h, std::ostream* os) { *os << h.name; }
};

class HostileCli : public ::testing::TestWithParam<Hostile> {};

// Refused before the work a hostile size would cost: where that matters the message names the
// early check (a chunk refused before planning), rather than the test timing the command.
TEST_P(HostileCli, ExitsTwoNamingTheCulprit) {
  const auto& h = GetParam();
  const TempFile file(h.name, h.file_text);
  auto args = h.args;
  for (auto at = args.find("{file}"); at != std::string::npos; at = args.find("{file}"))
    args.replace(at, 6, file.path());
  const auto r = run_refit(args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(": error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(h.must_mention), std::string::npos) << r.err;
}

const std::string kModel = "--model " + kData + "/models/tiny-llama.json --train tp=2 --infer tp=2";

INSTANTIATE_TEST_SUITE_P(
    Cases, HostileCli,
    ::testing::Values(
        Hostile{"cluster_1e309", "topo --cluster-file {file}",
                R"({"gpus": [{"node": 0, "domain": 0, "nvlink_gbps": 1e309, "copy_gbps": 1}]})",
                "refit topo: error: "},
        Hostile{"cluster_deep", "topo --cluster-file {file}",
                R"({"name": )" + std::string(200000, '[') + std::string(200000, ']') + "}", "name[0][0]"},
        Hostile{"cluster_duplicate", "topo --cluster-file {file}", R"({"gpus": [], "gpus": []})",
                "gpus: key appears twice"},
        Hostile{"xml_not_utf8", "topo --nccl-topo-xml {file} --json",
                "<system version=\"1\"><cpu numaid=\"\xff\"/></system>", "not valid UTF-8"},
        Hostile{"preset_nodes", "topo --cluster dgx-h100:nodes=2000000000", "",
                "nodes=2000000000: must be <= 1048576"},
        Hostile{"measure_a_preset", "topo --cluster dgx-h100 --measure", "", "--measure requires --discover"},
        // No NVML: the machine is modelled as cpu-host, whose processes have no GPU to time.
        Hostile{"measure_no_gpu", "topo --discover --measure --nvml-library /nonexistent/libnvidia-ml.so.1",
                "", "--discover: --measure: GPU 0 has no PCI bus id: no NVIDIA GPU was found"},
        Hostile{"config_1e309", "plan --model {file} --train tp=1 --infer tp=1 --cluster dgx-h100",
                R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 1e309})", "not valid JSON"},
        Hostile{"manifest_duplicate", "plan --manifest {file} --cluster dgx-h100",
                R"({"format": "refit-manifest", "format": "refit-manifest"})", "format: key appears twice"},
        Hostile{"plan_1e309", "simulate " + kModel + " --cluster dgx-h100 --plan {file}",
                R"({"format": "refit-plan", "version": 1e309})", "not valid JSON"},
        // Once 4.5 GB and over 30 s: 2^28 chunks at most for a plan refit's executors run (a
        // 16-byte chunk once took 1.2 GB and 54 s to plan, then could not be simulated), 2^34 for
        // one the collectives run, described without being lowered.
        Hostile{"chunk_one_byte",
                "plan --model qwen3-8b --train tp=8 --infer tp=4,dp=2 --cluster dgx-h100 --chunk 16", "",
                "chunk: 16 bytes cut the plan into more than 268435456 chunks (counted up to tensor"},
        Hostile{
            "chunk_one_byte_collectives",
            "plan --model qwen3-8b --train tp=8 --infer tp=4,dp=2 --cluster dgx-h100 --chunk 1 --strategy "
            "gather-broadcast",
            "", "chunk: 1 bytes cut the plan into more than 17179869184 chunks (counted up to tensor"},
        // Once predicted 0.03x of the lower bound: every transfer said to be a device copy.
        Hostile{
            "plan_links_not_the_clusters",
            "simulate --manifest " + kData + "/manifests/two_tensors.json --cluster dgx-h100 --plan {file}",
            R"({"destination_ranks":2,"execution_model":"refit-ucx","format":"refit-plan","source_ranks":4,"strategy":"refit","tensors":[{"dtype":"bf16","name":"model.layers.0.mlp.down_proj.weight","shape":[64,128]},{"dtype":"fp32","name":"w","shape":[8,4]}],"transfers":[{"bytes":4128,"chunk":8388608,"from":0,"id":0,"link":"local","segments":[{"extent":[32,64],"offset":[0,0],"tensor":0,"via":-1},{"extent":[4,2],"offset":[0,0],"tensor":1,"via":-1}],"to":4},{"bytes":4128,"chunk":8388608,"from":1,"id":1,"link":"local","segments":[{"extent":[32,64],"offset":[32,64],"tensor":0,"via":-1},{"extent":[4,2],"offset":[4,2],"tensor":1,"via":-1}],"to":5},{"bytes":4128,"chunk":8388608,"from":0,"id":2,"link":"local","segments":[{"extent":[32,64],"offset":[32,0],"tensor":0,"via":-1},{"extent":[4,2],"offset":[0,2],"tensor":1,"via":-1}],"to":5},{"bytes":4128,"chunk":8388608,"from":1,"id":3,"link":"local","segments":[{"extent":[32,64],"offset":[0,64],"tensor":0,"via":-1},{"extent":[4,2],"offset":[4,0],"tensor":1,"via":-1}],"to":4}],"version":1})",
            "does not fit the cluster: transfer #0: link 'local', but ranks 0 and 4 are joined by 'nvlink'"},
        // Once read until memory ran out (/dev/zero) or forever (a pipe).
        Hostile{"manifest_dev_zero", "plan --manifest /dev/zero --cluster cpu-host", "",
                "--manifest: /dev/zero: not a regular file"},
        // The JSON parser stopped at a NUL and took what preceded it.
        Hostile{
            "manifest_nul", "plan --manifest {file} --cluster cpu-host",
            std::string(R"({"source_ranks": 1, "destination_ranks": 1, "tensors": []})") + '\0' + "garbage",
            "not valid JSON: a NUL byte at offset 58"},
        // A name from the input once wrote a line of its own into the error output.
        Hostile{
            "name_with_a_newline", "plan --manifest {file} --cluster cpu-host",
            R"({"format": "refit-manifest", "version": 1, "source_ranks": 2, "destination_ranks": 2, "tensors": [{"name": "x\nrefit plan: error: fake", "shape": [8, 4], "dtype": "bf16", "source": {"mesh": [2], "ranks": [0, 1], "placements": ["S0"]}, "destination": {"mesh": [2], "ranks": [3, 2], "placements": ["S1"]}}, {"name": "x\nrefit plan: error: fake", "shape": [8, 4], "dtype": "bf16", "source": {"mesh": [2], "ranks": [0, 1], "placements": ["S0"]}, "destination": {"mesh": [2], "ranks": [3, 2], "placements": ["S1"]}}]})",
            "tensor 'x\\nrefit plan: error: fake': name appears twice"},
        // An empty name read as the option left out: the default preset, a missing --model.
        Hostile{"cluster_empty", "plan " + kModel + " --cluster ''", "", "--cluster: is empty"},
        Hostile{"manifest_empty", "plan --manifest '' --cluster cpu-host", "", "--manifest: is empty"},
        Hostile{"timeout_not_a_number", "run " + kModel + " --timeout abc", "",
                "--timeout: expected a number"},
        Hostile{"timeout_inf", "run " + kModel + " --timeout inf", "", "--timeout: expected a number"},
        // A deadline past 2^63 ns wrapped: every wait failed at once.
        Hostile{"timeout_huge", "run " + kModel + " --timeout 1e300", "",
                "--timeout: must be >= 0.1 and <= 1e+06, got 1e300"},
        Hostile{"cli11_unknown_option", "plan " + kModel + " --cluster dgx-h100 --bogus", "",
                "refit plan: error: The following argument was not expected: --bogus"}));

// The third campaign's classes (issue 29) that one command shows.
const std::string kTwoTensorsPlan =
    R"({"destination_ranks":2,"execution_model":"refit-ucx","format":"refit-plan","source_ranks":4,"strategy":"refit","tensors":[{"dtype":"bf16","name":"model.layers.0.mlp.down_proj.weight","shape":[64,128]},{"dtype":"fp32","name":"w","shape":[8,4]}],"transfers":[{"bytes":4128,"chunk":8388608,"from":0,"id":0,"link":"local","segments":[{"extent":[32,64],"offset":[0,0],"tensor":0,"via":-1},{"extent":[4,2],"offset":[0,0],"tensor":1,"via":-1}],"to":4},{"bytes":4128,"chunk":8388608,"from":1,"id":1,"link":"local","segments":[{"extent":[32,64],"offset":[32,64],"tensor":0,"via":-1},{"extent":[4,2],"offset":[4,2],"tensor":1,"via":-1}],"to":5},{"bytes":4128,"chunk":8388608,"from":0,"id":2,"link":"local","segments":[{"extent":[32,64],"offset":[32,0],"tensor":0,"via":-1},{"extent":[4,2],"offset":[0,2],"tensor":1,"via":-1}],"to":5},{"bytes":4128,"chunk":8388608,"from":1,"id":3,"link":"local","segments":[{"extent":[32,64],"offset":[0,64],"tensor":0,"via":-1},{"extent":[4,2],"offset":[4,0],"tensor":1,"via":-1}],"to":4}],"version":1})";

const std::string kSimulateWithPlan =
    "simulate --manifest " + kData + "/manifests/two_tensors.json --cluster dgx-h100 --plan {file}";

// `text` with its first `from` replaced by `to` (an input edited into a hostile one).
std::string replaced(std::string text, std::string_view from, std::string_view to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

// This test runs the binary and links no refit library: the file read as a stream.
std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

INSTANTIATE_TEST_SUITE_P(
    ThirdCampaign, HostileCli,
    ::testing::Values(
        // Once exit 1 after the whole simulation.
        Hostile{"trace_folder", "simulate " + kModel + " --trace /tmp", "", "--trace: '/tmp' is a folder"},
        Hostile{"out_no_folder", "plan " + kModel + " --out /refit-no-such-folder/plan.json", "",
                "no folder '/refit-no-such-folder'"},
        // Once silently ignored.
        Hostile{"explain_empty", "plan " + kModel + " --explain ''", "", "--explain: is empty"},
        Hostile{"quantize_at_alone", "plan " + kModel + " --quantize-at sender", "",
                "--quantize-at requires --quantize"},
        // Once 'internal error: strategy refit made an invalid plan': relay slices of 4 chunks wrapped.
        Hostile{"chunk_near_2_63",
                "plan --model " + kData +
                    "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2 "
                    "--cluster dgx-h100:gpus_per_node=2 --chunk 9223372036854775807",
                "", "chunk must be > 0 and at most 2^56 bytes"},
        // An edited dtype was reported as a byte count that did not add up.
        Hostile{"plan_dtype_edited", kSimulateWithPlan,
                replaced(kTwoTensorsPlan, "\"dtype\":\"bf16\"", "\"dtype\":\"fp16\""),
                "tensors[0] 'model.layers.0.mlp.down_proj.weight': plan has dtype fp16, the problem bf16"}));

// The fourth campaign's classes that one command shows.
const std::string kMoe = "--model " + kData +
                         "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,engines=3 "
                         "--cluster dgx-h100";

INSTANTIATE_TEST_SUITE_P(
    FourthCampaign, HostileCli,
    ::testing::Values(
        // Once read as S0:32: the overflowing start was left at 0.
        Hostile{"placement_start_overflow",
                "layout --shape 64 --mesh 2 --placements 'S0:32@-99999999999999999999'", "",
                "placement 'S0:32@-99999999999999999999' is not"},
        // Once accepted as the largest 64-bit integer.
        Hostile{"staging_overflow",
                "simulate " + kModel + " --cluster dgx-h100 --staging 99999999999999999999", "",
                "--staging: must be >= 32 and fit 64 bits, got 99999999999999999999"},
        // Once ignored: planned from scratch.
        Hostile{"plan_empty", "simulate " + kModel + " --cluster dgx-h100 --plan ''", "", "--plan: is empty"},
        // Once accepted without the option it qualifies, and up to 1e308 s with it.
        Hostile{"timeout_alone", "simulate " + kModel + " --cluster dgx-h100 --timeout 5", "",
                "--timeout requires --fail"},
        Hostile{"timeout_huge_fail", "simulate " + kModel + " --cluster dgx-h100 --fail 0 --timeout 1e308",
                "", "--timeout: must be >= 0.1 and <= 1e+06"},
        // Names with escapes once reached the terminal raw through topo's and simulate's tables.
        Hostile{
            "cluster_name_escape", "topo --cluster-file {file}",
            replaced(text_of(kData + "/topology/cluster_small.json"), "two-small-nodes", "two\\u001b[31m"),
            "name: a control character (a line break or an escape) in a name refit prints"},
        Hostile{"plan_strategy_escape", kSimulateWithPlan,
                replaced(kTwoTensorsPlan, "\"strategy\":\"refit\"", "\"strategy\":\"r\\u001b[2J\""),
                "strategy: a control character"},
        // Once blamed on training stages the user never mentioned.
        Hostile{"join_as_nemo_rl", "simulate " + kMoe + " --join 0 --strategy m2n-ring --deployment nemo-rl",
                "", "--deployment nemo-rl: it refits every engine from the training ranks"}));

INSTANTIATE_TEST_SUITE_P(
    FifthCampaign, HostileCli,
    ::testing::Values(
        // nan compares false to both ends of a range: refit run once went through a delta refit with
        // a change fraction of nan and reported it as null.
        Hostile{"run_delta_nan", "run " + kModel + " --delta nan", "",
                "--delta: expected a number in [0, 1]"},
        Hostile{"run_delta_rebalance_nan", "run " + kModel + " --delta 0.1 --delta-rebalance nan", "",
                "--delta-rebalance: expected a number in [0, 1]"},
        Hostile{"simulate_delta_nan", "simulate " + kModel + " --cluster dgx-h100 --delta nan", "",
                "--delta: expected a number in [0, 1]"},
        // Once refused by the cluster's own check as 1,175,000 GB/s, a field the user never wrote.
        Hostile{"nic_line_rate_past_the_cap", "simulate " + kModel + " --cluster dgx-h100:nic_gbps=1e7", "",
                "nic_gbps=1e7: must be <= 8000000"},
        // Once named as nics_per_node, the key it becomes.
        Hostile{"sweep_nics_per_domain", "sweep " + kModel + " --cluster dgx-h100 --vary nics_per_domain=3",
                "", "--vary nics_per_domain=3 (nics_per_node=3"},
        // Once loaded the program itself as NVML ("has no nvmlInit_v2").
        Hostile{"nvml_library_empty", "topo --discover --nvml-library ''", "", "--nvml-library: is empty"},
        // Once prefixed with --infer alone, and with it for a misspelt --quantize-at too.
        Hostile{"quantize_cuts_blocks",
                "simulate --model " + kData +
                    "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2 --cluster dgx-h100 "
                    "--quantize mxfp8",
                "", "--quantize with --train tp=2,ep=2,etp=1 --infer tp=2: tensor"},
        // CLI11 reads a leading 0 as octal once a check passes: --chunk 010 planned 8-byte chunks.
        Hostile{"chunk_with_a_leading_zero", "plan " + kModel + " --chunk 010", "",
                "--chunk: expected a decimal number > 0 without leading zeros, got '010'"},
        // Once unchecked: 0x10 was rank 16.
        Hostile{"explain_in_hex", "plan " + kModel + " --explain 0x10", "",
                "--explain: expected a number >= 0"},
        // Once named as the field, not the option.
        Hostile{"window_of_a_step_paced_executor",
                "simulate " + kModel + " --cluster dgx-h100 --deployment refit-nccl --window 4", "",
                "--window: execution model 'refit-nccl' paces chunks by its step schedule"},
        Hostile{"quantize_at_misspelt",
                "simulate " + kModel + " --cluster dgx-h100 --quantize mxfp8 --quantize-at x", "",
                "error: --quantize-at: unknown quantization site 'x'"}));

// Each once taken as the option left out (exit 0), or a grid built whole before any prediction.
INSTANTIATE_TEST_SUITE_P(
    SeventhCampaign, HostileCli,
    ::testing::Values(
        Hostile{"quantize_empty", "simulate " + kModel + " --cluster dgx-h100 --quantize ''", "",
                "--quantize: is empty"},
        Hostile{"dtype_empty", "plan " + kModel + " --dtype ''", "", "--dtype: is empty"},
        Hostile{"quantize_at_empty", "plan " + kModel + " --quantize mxfp8 --quantize-at ''", "",
                "--quantize-at: is empty"},
        Hostile{"deployment_empty", "simulate " + kModel + " --cluster dgx-h100 --deployment ''", "",
                "--deployment: is empty"},
        Hostile{
            "sweep_grid_too_large",
            "sweep " + kModel +
                " --cluster dgx-h100 --vary nic_gbps=1,2,3,4,5,6,7,8,9,10 --vary "
                "nvlink_gbps=1,2,3,4,5,6,7,8,9,10 --vary copy_gbps=1,2,3,4,5,6,7,8,9,10 --vary "
                "nodes=1,2,3,4,5,6,7,8,9,10 --vary latency_us=1,2",
            "",
            "--vary: 10 nic_gbps x 10 nvlink_gbps x 10 copy_gbps x 10 nodes x 2 latency_us make more than "
            "10000 points"},
        // Once read as a plan of no strategy, and as the strategy's execution model.
        Hostile{"plan_strategy_empty", kSimulateWithPlan,
                replaced(kTwoTensorsPlan, "\"strategy\":\"refit\"", "\"strategy\":\"\""),
                "strategy: is empty"},
        Hostile{"plan_execution_model_empty", kSimulateWithPlan,
                replaced(kTwoTensorsPlan, "\"execution_model\":\"refit-ucx\"", "\"execution_model\":\"\""),
                "execution_model: is empty (leave it out for the strategy's own)"}));

// Each once taken as the option left out: the sources' verification pattern ran instead of the
// user's weights, or nothing was saved.
INSTANTIATE_TEST_SUITE_P(
    EighthCampaign, HostileCli,
    ::testing::Values(Hostile{"load_sources_empty",
                              "run " + kModel + " --storage framework --load-sources ''", "",
                              "--load-sources: is empty"},
                      // A library that loads but is not NVML: exit 1, as if the machine had failed.
                      Hostile{"nvml_library_not_nvml", "topo --discover --nvml-library libc.so.6", "",
                              "libc.so.6: has no nvmlInit_v2: not NVML"},
                      Hostile{"timeout_tiny", "run " + kModel + " --timeout 1e-9", "",
                              "--timeout: must be >= 0.1 and <= 1e+06, got 1e-9"},
                      Hostile{"save_destinations_empty",
                              "run " + kModel + " --storage framework --save-destinations '' --overwrite", "",
                              "--save-destinations: is empty"}));

// tiny-deepseek-v3.json with `from` replaced by `to` (the whole "key": value text).
std::string deepseek_with(const std::string& from, const std::string& to) {
  std::ifstream in(kData + "/models/tiny-deepseek-v3.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text.replace(text.find(from), from.size(), to);
  return text;
}

const std::string kDeepseekRun = " --train tp=2,ep=2 --infer tp=2 --cluster dgx-h100";

INSTANTIATE_TEST_SUITE_P(
    NinthCampaign, HostileCli,
    ::testing::Values(
        Hostile{"model_name_too_long",
                "simulate --model " + std::string(300, 'a') + " --train tp=1 --infer tp=1 --cluster dgx-h100",
                "", "cannot be looked up: File name too long"},
        Hostile{"infer_offset_twice",
                "topo --cluster dgx-h100:infer_offset=0 --train-ranks 4 --infer-ranks 4 --infer-offset 2", "",
                "infer_offset=0 and a placement option (--infer-offset 2) both place the inference ranks"},
        Hostile{"ep_alias_twice",
                "models " + kData +
                    "/models/tiny-qwen3-moe.json --train tp=2,ep=2 --infer tp=2,ep=on,expert_parallel=off",
                "", "ep and expert_parallel are one setting, given twice"},
        Hostile{"job_past_the_gpu_limit", "topo --cluster dgx-h100 --train-ranks 1048576 --infer-ranks 1", "",
                "from GPU 1048576 need 1048577 GPUs, more than the 1048576"},
        Hostile{"integer_past_64_bits", "simulate --model {file}" + kDeepseekRun,
                deepseek_with("\"q_lora_rank\": 32", "\"q_lora_rank\": 1000000000000000000000000000000"),
                "q_lora_rank: must be between 1 and"},
        Hostile{"topk_method_unknown", "simulate --model {file}" + kDeepseekRun,
                deepseek_with("\"noaux_tc\"", "\"noaux-tc\""),
                "topk_method: 'noaux-tc' is none of DeepSeek's routings"},
        Hostile{"n_group_uneven", "simulate --model {file}" + kDeepseekRun,
                deepseek_with("\"n_group\": 1", "\"n_group\": 3"), "n_group: 3 groups do not split the 8"},
        Hostile{"glu_interleave_uneven",
                "simulate --model " + kData +
                    "/models/tiny-deepseek-v3.json --train tp=2,ep=2,glu_interleave=3 "
                    "--infer tp=2 --cluster dgx-h100",
                "", "glu_interleave=3 does not divide the 16 gate rows"},
        Hostile{"glu_interleave_dense",
                "simulate --model " + kData +
                    "/models/tiny-llama.json --train tp=2,glu_interleave=2 --infer tp=2 "
                    "--cluster dgx-h100",
                "", "interleaves the gate and up rows of routed experts, and model"}));

// A manifest of one tensor more than the 2^20 a problem may have; the entries are not looked at
// before the count is refused.
std::string manifest_of_too_many_tensors() {
  std::string tensors;
  tensors.reserve(2 * ((1 << 20) + 1));
  for (int i = 0; i <= 1 << 20; ++i) tensors += i == 0 ? "0" : ",0";
  return R"({"format": "refit-manifest", "version": 1, "source_ranks": 1, "destination_ranks": 1, "tensors": [)" +
         tensors + "]}";
}

INSTANTIATE_TEST_SUITE_P(
    TenthCampaign, HostileCli,
    ::testing::Values(
        Hostile{"manifest_written_over_its_model",
                "models {file} --train tp=2 --infer tp=2 --write-manifest {file}",
                text_of(kData + "/models/tiny-llama.json"), "is the file MODEL reads from"},
        Hostile{"delta_of_a_join",
                "simulate --model " + kData + "/models/tiny-llama.json --train tp=2 --infer tp=2,engines=2 " +
                    "--cluster dgx-h100 --join 1 --delta 0.1",
                "", "--delta: refit's executors run a delta refit over every engine only"},
        Hostile{"xml_attribute_twice", "topo --nccl-topo-xml {file}",
                replaced(text_of(kData + "/topology/node_4gpu_2nic.xml"), "speed=\"200000\"",
                         "speed=\"200000\" speed=\"10\""),
                "attribute 'speed' given twice"},
        Hostile{"sweep_empty_value", "sweep " + kModel + " --cluster dgx-h100 --vary nic_gbps=400,,800", "",
                "--vary nic_gbps: an empty value"},
        Hostile{"manifest_too_many_tensors", "plan --manifest {file} --cluster dgx-h100",
                manifest_of_too_many_tensors(), "tensors: 1048577 tensors, more than the 1048576"},
        Hostile{"out_dash", "plan " + kModel + " --cluster dgx-h100 --out -", "",
                "standard output is /dev/stdout here"},
        // An integer option given a fraction or an exponent failed CLI11's conversion with a message
        // that said neither what is wanted nor why ("Could not convert: --chunk = 1.5").
        Hostile{"chunk_a_fraction", "plan " + kModel + " --cluster dgx-h100 --chunk 1.5", "",
                "--chunk: expected a whole number > 0, got '1.5'"},
        Hostile{"window_an_exponent", "simulate " + kModel + " --cluster dgx-h100 --window 1e3", "",
                "--window: expected a whole number >= 0, got '1e3'"}));

TEST(HostileCli, StandardErrorClosedOrFullStillGivesTheExitCode) {
  // The tenth campaign's H1: printing an error or a note to a closed or full stderr threw, and
  // refit aborted (134) instead of exiting 2, even on a good run whose only note was unprintable.
  for (const std::string redirect : {" 2>&-", " 2>/dev/full"}) {
    EXPECT_EQ(run_refit("models no-such-model" + redirect).exit_code, 2) << redirect;
    EXPECT_EQ(run_refit("plan " + kModel + " --json >/dev/null" + redirect).exit_code, 0)
        << redirect << ": the note of the default cluster";
  }
  // With stderr closed, the output file was opened as descriptor 2, and "writing the trace to"
  // landed in the trace.
  const TempFile trace("closed_stderr.trace.json", "");
  ASSERT_EQ(
      run_refit("simulate " + kModel + " --cluster dgx-h100 --trace " + trace.path() + " 2>&-").exit_code, 0);
  const auto written = text_of(trace.path());
  EXPECT_EQ(written.find("refit simulate"), std::string::npos) << written.substr(0, 200);
  EXPECT_EQ(written.front(), '{') << written.substr(0, 200);
  // A closed stdout still fails the command that prints to it (onto /dev/full, not /dev/null).
  EXPECT_EQ(run_refit("models >&-").exit_code, 1);
}

TEST(HostileCli, AnOutputIsNotTheConfigOfAModelFolder) {
  // The tenth campaign's H2: --model DIR reads DIR/config.json, which --out and --trace once
  // replaced (exit 0) because the check compared them with the folder.
  const auto dir = std::filesystem::temp_directory_path() / ("refit_model_dir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto config = (dir / "config.json").string();
  const std::string original = text_of(kData + "/models/tiny-llama.json");
  std::ofstream(config) << original;
  const std::string problem = "--model " + dir.string() + " --train tp=2 --infer tp=2 --cluster dgx-h100";
  for (const std::string output :
       {"plan " + problem + " --out " + config, "simulate " + problem + " --trace " + config}) {
    const auto r = run_refit(output);
    EXPECT_EQ(r.exit_code, 2) << output;
    EXPECT_NE(r.err.find(config + " is the file --model reads from"), std::string::npos) << r.err;
  }
  EXPECT_EQ(text_of(config), original);
  std::filesystem::remove_all(dir);
}

TEST(HostileCli, ASweepOfAColocatedPresetVariesItsHardware) {
  // infer_offset places the job, which each point places: the sweep's check of the hardware once
  // refused it, naming an internal function, where simulate took the same cluster.
  const auto r =
      run_refit("sweep " + kModel + " --jobs 1 --cluster dgx-h100:infer_offset=0 --vary nic_gbps=400,800");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nic_gbps=800"), std::string::npos) << r.out;
}

TEST(HostileCli, BytesOfTheInputThatAreNotTextAreEscapedInTheMessage) {
  // A config.json with a 0xFF byte and a right-to-left override: the message quotes both as
  // escapes, so stderr stays valid UTF-8 and reads in order.
  const TempFile file("not_utf8.json", "{\"model_type\": \"\xff\xe2\x80\xae\"}");
  const auto r = run_refit("simulate --model " + file.path() + kDeepseekRun);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.find('\xff'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\xe2\x80\xae"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\xff"), std::string::npos) << r.err;
}

TEST(HostileCli, AJoinOfABaselinesPlanIsPredictedAsRefitsExecutorsRunIt) {
  // NeMo RL has no join: m2n-ring's join plan, once refused for NeMo RL's training stages, is run
  // as refit's executors run it unless a deployment is named.
  const auto r = run_refit("simulate " + kMoe + " --join 0 --strategy m2n-ring");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("engine 0 of 3 filled in"), std::string::npos) << r.out;
}

TEST(HostileCli, AProblemWithNothingToMoveHasNoRatiosRatherThanNaN) {
  // No tensors: refit takes 0 s against a bound of 0 s; NeMo RL still pays its fixed costs.
  const TempFile empty(
      "empty_manifest.json",
      R"({"format": "refit-manifest", "version": 1, "source_ranks": 2, "destination_ranks": 2, "tensors": []})");
  const auto r = run_refit("simulate --manifest " + empty.path() + " --cluster dgx-h100 --compare");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
}

TEST(HostileCli, OutputsThatCannotBeWrittenInFullFailNamingTheFile) {
  // /dev/full takes the file open and refuses every byte, as a full disk does once the buffered
  // bytes are flushed: the outputs once ended with exit 0 and a truncated file.
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const std::string args :
       {"plan " + kModel + " --cluster dgx-h100 --out /dev/full",
        "simulate " + kModel + " --cluster dgx-h100 --trace /dev/full",
        "models " + kData + "/models/tiny-llama.json --train tp=2 --infer tp=2 --write-manifest /dev/full"}) {
    const auto r = run_refit(args);
    EXPECT_NE(r.exit_code, 0) << args;
    // The error itself names the file (simulate's progress line named it, its error did not).
    EXPECT_TRUE(std::regex_search(r.err, std::regex("error: [^\n]*/dev/full"))) << args << ": " << r.err;
  }
  // Standard output on a full disk: a runtime failure (exit 1), not a success whose output is lost.
  for (const std::string args : {std::string("models > /dev/full"), std::string("--help > /dev/full"),
                                 "plan " + kModel + " --cluster dgx-h100 --json > /dev/full"}) {
    const auto r = run_refit(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find("writing standard output failed"), std::string::npos) << args << ": " << r.err;
  }
}

TEST(HostileCli, NamesThatAreNotUtf8AreWrittenAsJsonAnyway) {
  // The cluster takes the XML file's name; a name that is not UTF-8 once aborted topo --json.
  const std::string xml = text_of(kData + "/topology/node_4gpu_2nic.xml");
  const TempFile file("\xff.xml", xml);
  const auto r = run_refit("topo --nccl-topo-xml '" + file.path() + "' --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD in place of the byte
}

TEST(HostileCli, NcclDumpsWithTwoRootsTrailingTextOrANicListedTwiceAreRefused) {
  // pugixml takes a second root element and drops text after the root, and a NIC name listed
  // under two PCIe switches once merged two NICs into one (half the network bandwidth, silently).
  const std::string xml = text_of(kData + "/topology/node_4gpu_2nic.xml");
  const TempFile two_roots("two_roots.xml", xml + "<system version=\"1\"/>\n");
  auto r = run_refit("topo --nccl-topo-xml " + two_roots.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("a second root element"), std::string::npos) << r.err;
  const TempFile trailing("trailing.xml", xml + "left over from an edit\n");
  r = run_refit("topo --nccl-topo-xml " + trailing.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("text beside the root element"), std::string::npos) << r.err;
  const TempFile commented("commented.xml", xml + "<!-- dumped by NCCL -->\n");
  EXPECT_EQ(run_refit("topo --nccl-topo-xml " + commented.path()).exit_code, 0);
  auto twice = xml;
  const std::string second_nic = "name=\"mlx5_1\"";
  const auto second = xml.find(second_nic);
  ASSERT_NE(second, std::string::npos);
  twice.replace(second, second_nic.size(), "name=\"mlx5_0\"");
  const TempFile dup("nic_twice.xml", twice);
  r = run_refit("topo --nccl-topo-xml " + dup.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("NIC 'mlx5_0:1' is listed twice"), std::string::npos) << r.err;
}

TEST(HostileCli, AFifoThatNobodyReadsIsRefusedAsAnOutput) {
  // Opening it to write would block until a reader came: refit once hung there for good.
  const auto fifo =
      std::filesystem::temp_directory_path() / ("refit_hostile_fifo_" + std::to_string(::getpid()));
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string args :
       {"plan " + kModel + " --cluster dgx-h100 --out " + fifo.string(),
        "simulate " + kModel + " --cluster dgx-h100 --trace " + fifo.string(),
        "models " + kData + "/models/tiny-llama.json --train tp=2 --infer tp=2 --write-manifest " +
            fifo.string()}) {
    const auto r = run_refit(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(fifo.string() + ": a FIFO that no process reads"), std::string::npos) << r.err;
  }
  std::filesystem::remove(fifo);
}

TEST(HostileCli, AProblemLargerThanTheMemoryGivenFailsWithAMessage) {
  // 10,000 engines of qwen3-8b planned direct need gigabytes: with 1 GB of address space the
  // allocation fails, once an abort (exit 134), now a runtime failure that says so.
  const auto r = refit::testing::run_shell(std::string("ulimit -v 1000000; ") + REFIT_CLI_PATH +
                                           " plan --model qwen3-8b --train tp=8 --infer tp=1,engines=10000 "
                                           "--cluster dgx-h100 --strategy direct");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("refit plan: error: out of memory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace refit
