// refit plan: plan a refit and report what it moves where, next to the lower bound.
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "human_units.h"
#include "plan_inputs.h"
#include "refit/core/try.h"
#include "refit/planner/plan_json.h"
#include "refit/planner/plan_stats.h"

namespace refit::cli {
namespace {

struct PlanCommandOptions {
  PlanInputOptions inputs;
  std::string out;
  bool json = false;
};

nlohmann::ordered_json plan_json(const TimedPlan& tp, const PlanStats& s, const LowerBound& lb) {
  Bytes max_domain{0};
  for (auto b : s.domain_ingress) max_domain = std::max(max_domain, b);
  return {{"strategy", tp.plan.strategy},
          {"tensors", tp.plan.tensors.size()},
          {"transfers", s.transfers},
          {"messages", s.messages},
          {"segments", s.segments},
          {"total_bytes", s.total_bytes.value},
          {"network_bytes", s.network_bytes.value},
          {"nvlink_bytes", s.nvlink_bytes.value},
          {"local_bytes", s.local_bytes.value},
          {"max_nic_tx_bytes", s.max_nic_tx.value},
          {"max_nic_rx_bytes", s.max_nic_rx.value},
          {"mean_nic_tx_bytes", s.mean_nic_tx_bytes},
          {"mean_nic_rx_bytes", s.mean_nic_rx_bytes},
          {"max_domain_ingress_bytes", max_domain.value},
          {"lower_bound_s", lb.time.value},
          {"lower_bound_binding", lb.binding},
          {"plan_seconds", tp.seconds.value},
          {"plan_hash", plan_hash_hex(tp.plan)}};
}

void print_human(const TimedPlan& tp, const PlanStats& s, const LowerBound& lb) {
  fmt::print("strategy          {}\n", tp.plan.strategy);
  fmt::print("tensors           {}\n", tp.plan.tensors.size());
  fmt::print("transfers         {} ({} messages in chunks, {} segments)\n", s.transfers, s.messages,
             s.segments);
  fmt::print("bytes             {} total, {} network, {} NVLink\n", human(s.total_bytes),
             human(s.network_bytes), human(s.nvlink_bytes));
  fmt::print("NIC tx            max {}, mean {}\n", human(s.max_nic_tx),
             human(Bytes{static_cast<std::int64_t>(s.mean_nic_tx_bytes)}));
  fmt::print("NIC rx            max {}, mean {}\n", human(s.max_nic_rx),
             human(Bytes{static_cast<std::int64_t>(s.mean_nic_rx_bytes)}));
  fmt::print("lower bound       {} ({})\n", human(lb.time), lb.binding);
  fmt::print("planning time     {}\n", human(tp.seconds));
  fmt::print("plan hash         {}\n", plan_hash_hex(tp.plan));
}

[[nodiscard]] Result<void> run(const PlanCommandOptions& o) {
  const auto inputs = REFIT_TRY(load_plan_inputs(o.inputs));
  const auto tp = REFIT_TRY(obtain_plan(o.inputs, inputs, o.inputs.strategy));
  const auto stats = compute_stats(tp.plan, inputs.cluster);
  const auto lb = lower_bound(inputs.problem, inputs.cluster);
  if (!o.out.empty()) {
    std::ofstream f(o.out);
    if (f) write_plan_json(tp.plan, f);
    if (!f) return fail(ErrorCode::kRuntime, fmt::format("--out: cannot write '{}'", o.out));
  }
  if (o.json)
    fmt::print("{}\n", plan_json(tp, stats, lb).dump());
  else
    print_human(tp, stats, lb);
  return {};
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanCommandOptions>();
  auto* cmd = app.add_subcommand(
      "plan", "Plan a refit: which bytes move from which rank to which, and the lower bound");
  add_plan_input_options(*cmd, o->inputs, false);
  cmd->add_option("--out", o->out, "Write the plan as JSON (refit-plan format) to this file");
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout");
  return [o]() { return run(*o); };
}

}  // namespace refit::cli
