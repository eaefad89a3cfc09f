// refit plan: plan a refit and report what it moves where, next to the lower bound.
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "human_units.h"
#include "json_text.h"
#include "parse.h"
#include "plan_inputs.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/facade/report_json.h"
#include "refit/lowering/explain.h"
#include "refit/planner/plan_json.h"
#include "refit/planner/plan_stats.h"

namespace refit::cli {
namespace {

struct PlanCommandOptions {
  PlanInputOptions inputs;
  std::string out;
  std::optional<std::int32_t> explain;  // a rank whose lowered program to explain
  bool json = false;
};

nlohmann::ordered_json plan_json(const TimedPlan& tp, const PlanStats& s, const LowerBound& lb,
                                 const lowering::PlanLowering& low) {
  auto j = plan_report_json(tp.plan, s, lb, low);
  j["plan_seconds"] = tp.seconds.value;
  return j;
}

void print_human(const TimedPlan& tp, const PlanStats& s, const LowerBound& lb,
                 const lowering::PlanLowering& low) {
  fmt::print("strategy          {} (run as {})\n", tp.plan.strategy, execution_model(tp.plan.execution).name);
  fmt::print("tensors           {}\n", tp.plan.tensors.size());
  fmt::print("transfers         {} ({} messages in chunks, {} segments)\n", s.transfers, low.messages,
             s.segments);
  fmt::print("bytes             {} total, {} network, {} NVLink\n", human(s.total_bytes),
             human(s.network_bytes), human(s.nvlink_bytes));
  if (s.network_bytes_unquantized != s.network_bytes)
    fmt::print("FP8 in flight     {} network unquantized -> {} ({:.2f}x)\n",
               human(s.network_bytes_unquantized), human(s.network_bytes),
               static_cast<double>(s.network_bytes.value) /
                   static_cast<double>(std::max<std::int64_t>(1, s.network_bytes_unquantized.value)));
  fmt::print("NIC tx            max {}, mean {}\n", human(s.max_nic_tx),
             human(Bytes{static_cast<std::int64_t>(s.mean_nic_tx_bytes)}));
  fmt::print("NIC rx            max {}, mean {}\n", human(s.max_nic_rx),
             human(Bytes{static_cast<std::int64_t>(s.mean_nic_rx_bytes)}));
  fmt::print("lower bound       {} ({})\n", human(lb.time), lb.binding);
  fmt::print("planning time     {}\n", human(tp.seconds));
  fmt::print("plan hash         {}\n", plan_hash_hex(tp.plan));
  if (!low.text.empty()) fmt::print("\n{}", low.text);
}

[[nodiscard]] Result<void> run(const PlanCommandOptions& o) {
  if (!o.out.empty()) REFIT_TRY(check_not_an_input("--out", o.out, o.inputs));
  const auto inputs = REFIT_TRY(load_plan_inputs(o.inputs));
  const auto tp = REFIT_TRY(obtain_plan(o.inputs, inputs, o.inputs.strategy));
  const auto stats = compute_stats(tp.plan, inputs.cluster);
  const auto lb = lower_bound(inputs.problem, inputs.cluster);
  const auto low = REFIT_TRY(lowering::explain_plan(tp.plan, inputs.problem, o.explain));
  if (!o.out.empty()) {
    REFIT_TRY_IN(write_file(o.out, [&](std::ostream& out) { write_plan_json(tp.plan, out); }), "--out");
  }
  if (o.json)
    fmt::print("{}\n", json_text(plan_json(tp, stats, lb, low)));
  else
    print_human(tp, stats, lb, low);
  return {};
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanCommandOptions>();
  auto* cmd = app.add_subcommand(
      "plan", "Plan a refit: which bytes move from which rank to which, and the lower bound");
  add_plan_input_options(*cmd, o->inputs, false);
  cmd->add_option("--out", o->out, "Write the plan as JSON (refit-plan format) to this file")
      ->check(output_file());
  cmd->add_option("--explain", o->explain,
                  "Show what the lowering chose for this rank: its chunks, which move in place and which "
                  "are packed or unpacked (and why), relay waits, scratch and staging (with --json: an "
                  "\"explain\" object)")
      ->check(non_empty())
      ->check(non_negative());
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout");
  return [o]() { return run(*o); };
}

}  // namespace refit::cli
