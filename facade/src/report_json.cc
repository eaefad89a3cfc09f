#include "refit/facade/report_json.h"

#include <algorithm>
#include <string>

#include "refit/planner/plan_json.h"
#include "refit/planner/strategy.h"

namespace refit {
namespace {

nlohmann::ordered_json side_json(const lowering::SideSummary& s) {
  nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
  for (std::size_t r = 0; r < s.by_reason.size(); ++r)
    if (s.by_reason[r] > 0)
      reasons[std::string(lowering::copy_reason_text(static_cast<lowering::CopyReason>(r)))] = s.by_reason[r];
  return {{"transfers", s.transfers},
          {"chunks", s.chunks},
          {"bytes", s.bytes.value},
          {"in_place_chunks", s.in_place},
          {"runs", s.runs},
          {"staged_chunks", s.staged},
          {"staged_bytes", s.staged_bytes.value},
          {"chunks_by_reason", reasons}};
}

nlohmann::ordered_json staging_json(const lowering::StagingDemand& s) {
  return {{"chunks", s.chunks}, {"largest_bytes", s.largest.value}};
}

}  // namespace

nlohmann::ordered_json explain_json(const lowering::ProgramSummary& s) {
  return {{"rank", s.rank.value},
          {"sends", side_json(s.sends)},
          {"receives", side_json(s.receives)},
          {"waiting_chunks", s.waiting_chunks},
          {"quantise_steps", s.quantise_steps},
          {"quantised_elements", s.quantised_elements},
          {"extract_transfers", s.extract_transfers},
          {"scratch_bytes", s.scratch.value},
          {"send_staging", staging_json(s.send_staging)},
          {"receive_staging", staging_json(s.receive_staging)}};
}

nlohmann::ordered_json plan_report_json(const Plan& plan, const PlanStats& s, const LowerBound& bound,
                                        const lowering::PlanLowering& lowering) {
  Bytes max_domain{0};
  for (auto b : s.domain_ingress) max_domain = std::max(max_domain, b);
  nlohmann::ordered_json j{{"strategy", plan.strategy},
                           {"execution_model", execution_model(plan.execution).name},
                           {"tensors", plan.tensors.size()},
                           {"transfers", s.transfers},
                           {"messages", lowering.messages},
                           {"segments", s.segments},
                           {"total_bytes", s.total_bytes.value},
                           {"network_bytes", s.network_bytes.value},
                           {"network_bytes_unquantized", s.network_bytes_unquantized.value},
                           {"nvlink_bytes", s.nvlink_bytes.value},
                           {"local_bytes", s.local_bytes.value},
                           {"max_nic_tx_bytes", s.max_nic_tx.value},
                           {"max_nic_rx_bytes", s.max_nic_rx.value},
                           {"mean_nic_tx_bytes", s.mean_nic_tx_bytes},
                           {"mean_nic_rx_bytes", s.mean_nic_rx_bytes},
                           {"max_domain_ingress_bytes", max_domain.value},
                           {"lower_bound_s", bound.time.value},
                           {"lower_bound_binding", bound.binding},
                           {"plan_hash", plan_hash_hex(plan)}};
  if (lowering.summary) j["explain"] = explain_json(*lowering.summary);
  return j;
}

nlohmann::ordered_json breakdown_json(const PlanSimulation& s) {
  return {{"latency", s.latency.value}, {"network", s.network.value},  {"nvlink", s.nvlink.value},
          {"copy", s.copy.value},       {"pack_unpack", s.pack.value}, {"quantize", s.quantize.value},
          {"fixed", s.fixed.value}};
}

}  // namespace refit
