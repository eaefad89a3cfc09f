#include "refit/facade/report_json.h"

#include <algorithm>
#include <array>
#include <string>

#include "refit/facade/prediction.h"
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

nlohmann::ordered_json contributors_json(const PlanSimulation& s) {
  auto out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(5, s.contributors.size()); ++i)
    out.push_back({{"what", s.contributors[i].what},
                   {"seconds", s.contributors[i].time.value},
                   {"steps", s.contributors[i].steps}});
  return out;
}

nlohmann::ordered_json resources_json(const PlanSimulation& s) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& r : busiest_first(s))
    out.push_back({{"name", r.name}, {"bytes", r.bytes.value}, {"utilisation", r.utilisation}});
  return out;
}

std::vector<std::int64_t> byte_counts(const std::vector<Bytes>& bytes) {
  std::vector<std::int64_t> out;
  out.reserve(bytes.size());
  for (const Bytes b : bytes) out.push_back(b.value);
  return out;
}

nlohmann::ordered_json delta_rounds_json(const DeltaPrediction& d) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& r : d.rounds)
    out.push_back({{"moved_bytes", r.moved_bytes.value},
                   {"encode_s", r.encode.value},
                   {"transfer_s", r.transfer.value},
                   {"decode_s", r.decode.value},
                   {"hops", r.hops}});
  return out;
}

nlohmann::ordered_json row_json(const Prediction& r, const LowerBound& lb) {
  nlohmann::ordered_json j{{"strategy", r.strategy},
                           {"deployment", r.deployment->name},
                           {"predicted_s", r.sim.predicted.value},
                           {"lower_bound_s", lb.time.value},
                           {"ratio_to_lower_bound", r.sim.predicted / lb.time},
                           {"network_bytes", r.stats.network_bytes.value},
                           {"nvlink_bytes", r.stats.nvlink_bytes.value},
                           {"max_nic_tx_bytes", r.stats.max_nic_tx.value},
                           {"max_nic_rx_bytes", r.stats.max_nic_rx.value},
                           {"transfers", r.stats.transfers},
                           {"window", r.window},
                           {"breakdown_s", breakdown_json(r.sim)},
                           {"waiting_s", r.sim.waiting.value},
                           {"contributors", contributors_json(r.sim)},
                           {"resources", resources_json(r.sim)},
                           {"plan_seconds", r.plan_seconds.value},
                           {"simulate_seconds", r.simulate_seconds.value},
                           {"tasks", r.sim.tasks},
                           {"events", r.sim.events}};
  if (r.moves_part) {
    j["moved_bytes"] = r.moved_bytes.value;
    j["moved_lower_bound_s"] = r.moved_bound.time.value;
    j["ratio_to_moved_lower_bound"] = r.sim.predicted / r.moved_bound.time;
  }
  if (r.speedup_vs_gather_broadcast) j["speedup_vs_gather_broadcast"] = *r.speedup_vs_gather_broadcast;
  if (r.time_vs_refit) j["time_vs_refit"] = *r.time_vs_refit;
  if (r.delta)
    j["delta"] = {{"change_fraction", r.delta->change_fraction},
                  {"predicted_s", r.delta->predicted.value},
                  {"dense_bytes", r.delta->dense_bytes.value},
                  {"moved_bytes", r.delta->moved_bytes.value},
                  {"transfer_s", r.delta->transfer.value},
                  {"encode_s", r.delta->encode.value},
                  {"decode_s", r.delta->decode.value},
                  {"time_vs_dense", r.delta->predicted / r.sim.predicted},
                  {"rounds", delta_rounds_json(*r.delta)}};
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (!r.sensitivity.empty()) {
    j["sensitivity"] = nlohmann::ordered_json::array();
    for (const auto& s : r.sensitivity)
      j["sensitivity"].push_back(
          {{"constant", s.constant}, {"minus_20pct_s", s.lower.value}, {"plus_20pct_s", s.higher.value}});
  }
  return j;
}

// Where an execution's WorkTimes hold each TimeKind, and why a kind it cannot hold is absent.
struct TimedKind {
  std::optional<Seconds> (*of)(const WorkTimes&);
  std::string_view not_timed;
};

std::optional<Seconds> put_time(const WorkTimes& w, LinkKind link) {
  if (!w.puts) return std::nullopt;
  return (*w.puts)[static_cast<std::size_t>(link)];
}

constexpr std::string_view kNotTimedByThisExecutor = "this executor does not time it";

// In TimeKind order: latency, network, nvlink, copy, pack_unpack, quantize, fixed.
constexpr std::array<TimedKind, kTimeKinds> kTimedKinds{{
    {.of = [](const WorkTimes&) { return std::optional<Seconds>(); },
     .not_timed = "a message's latency overlaps the puts and the waits of the others: it is not timed apart"},
    {.of = [](const WorkTimes& w) { return put_time(w, LinkKind::kNetwork); },
     .not_timed = kNotTimedByThisExecutor},
    {.of = [](const WorkTimes& w) { return put_time(w, LinkKind::kNvlink); },
     .not_timed = kNotTimedByThisExecutor},
    {.of = [](const WorkTimes& w) { return put_time(w, LinkKind::kLocal); },
     .not_timed = kNotTimedByThisExecutor},
    {.of = [](const WorkTimes& w) { return w.pack_unpack; }, .not_timed = kNotTimedByThisExecutor},
    {.of = [](const WorkTimes& w) { return w.quantize; }, .not_timed = kNotTimedByThisExecutor},
    {.of = [](const WorkTimes&) { return std::optional<Seconds>(); },
     .not_timed = "refit's executors run the whole plan as one call: there is no per-call fixed cost to time "
                  "(setting up is prepare's, outside the execution)"},
}};

nlohmann::ordered_json staging_json(const lowering::StagingDemand& s) {
  return {{"chunks", s.chunks}, {"largest_bytes", s.largest.value}};
}

}  // namespace

std::vector<ResourceReport> busiest_first(const PlanSimulation& s) {
  auto out = s.resources;
  std::ranges::stable_sort(out, std::greater{}, &ResourceReport::utilisation);
  return out;
}

nlohmann::ordered_json explain_json(const lowering::ProgramSummary& s) {
  return {{"rank", s.rank.value},
          {"sends", side_json(s.sends)},
          {"receives", side_json(s.receives)},
          {"waiting_chunks", s.waiting_chunks},
          {"quantize_steps", s.quantize_steps},
          {"quantized_elements", s.quantized_elements},
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
                           {"nic_tx_bytes", byte_counts(s.nic_tx)},
                           {"nic_rx_bytes", byte_counts(s.nic_rx)},
                           {"nvlink_egress_bytes", byte_counts(s.nvlink_egress)},
                           {"nvlink_ingress_bytes", byte_counts(s.nvlink_ingress)},
                           {"domain_ingress_bytes", byte_counts(s.domain_ingress)},
                           {"lower_bound_s", bound.time.value},
                           {"lower_bound_binding", bound.binding},
                           {"plan_hash", plan_hash_hex(plan)}};
  if (lowering.summary) j["explain"] = explain_json(*lowering.summary);
  return j;
}

nlohmann::ordered_json breakdown_json(const PlanSimulation& s) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (std::size_t k = 0; k < kTimeKinds; ++k) {
    const auto kind = static_cast<TimeKind>(k);
    out[std::string(time_kind_name(kind))] = s.breakdown[kind].value;
  }
  return out;
}

MeasuredBreakdown measured_breakdown(const WorkTimes& work) {
  MeasuredBreakdown out{.seconds = nlohmann::ordered_json::object(),
                        .not_timed = nlohmann::ordered_json::object(),
                        .busy = Seconds{0}};
  for (std::size_t k = 0; k < kTimeKinds; ++k) {
    const std::string name(time_kind_name(static_cast<TimeKind>(k)));
    if (const auto timed = kTimedKinds[k].of(work)) {
      out.seconds[name] = timed->value;
      out.busy += *timed;
    } else {
      out.seconds[name] = nullptr;
      out.not_timed[name] = kTimedKinds[k].not_timed;
    }
  }
  return out;
}

Seconds median_time(std::vector<Seconds> times) {
  if (times.empty()) return Seconds{0};
  std::ranges::sort(times, {}, &Seconds::value);
  return times[times.size() / 2];
}

nlohmann::ordered_json predictions_json(const Predictions& p) {
  nlohmann::ordered_json j{{"cluster", p.cluster},
                           {"lower_bound_s", p.bound.time.value},
                           {"lower_bound_binding", p.bound.binding},
                           {"strategies", nlohmann::ordered_json::array()}};
  for (const auto& r : p.rows) j["strategies"].push_back(row_json(r, p.bound));
  return j;
}

}  // namespace refit
