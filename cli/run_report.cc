#include "run_report.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "human_units.h"
#include "json_text.h"
#include "refit/core/try.h"
#include "refit/facade/report_json.h"

namespace refit::cli {
namespace {

// A share drift not measured, between ranks (a measured one lies in [0, 1]).
constexpr double kNoDrift = -1;

double gbps(Bytes b, Seconds s) { return s.value > 0 ? static_cast<double>(b.value) / s.value / 1e9 : 0.0; }
double gb(Bytes b) { return static_cast<double>(b.value) / 1e9; }

nlohmann::ordered_json rank_json(const RankResult& r, std::int32_t training_ranks) {
  const Seconds wall = median_time(r.walls);
  return {{"rank", r.rank},
          {"role", r.rank < training_ranks ? "training" : "inference"},
          {"bytes_sent", r.sent.value},
          {"bytes_received", r.received.value},
          {"bytes_stored_directly", r.stored_directly.value},
          {"seconds", wall.value},
          {"transfer_seconds", r.elapsed.value},
          {"send_gbps", gbps(r.sent, wall)},
          {"receive_gbps", gbps(r.received, wall)},
          {"resident_bytes",
           {{"after_prepare", r.resident.after_prepare.value},
            {"after_warm_up", r.resident.after_warm_up.value},
            {"end", r.resident.end.value}}}};
}

nlohmann::json seconds_or_null(const std::optional<Seconds>& s) {
  return s ? nlohmann::json(s->value) : nullptr;
}

std::optional<Seconds> seconds_from(const nlohmann::json& j) {
  return j.is_number() ? std::optional<Seconds>(Seconds{j.get<double>()}) : std::nullopt;
}

// A rank's WorkTimes between ranks: [puts by link kind or null, pack_unpack, quantize].
nlohmann::json encode_work(const WorkTimes& w) {
  nlohmann::json puts = nullptr;
  if (w.puts) {
    puts = nlohmann::json::array();
    for (const Seconds t : *w.puts) puts.push_back(t.value);
  }
  return {puts, seconds_or_null(w.pack_unpack), seconds_or_null(w.quantize)};
}

WorkTimes decode_work(const nlohmann::json& j) {
  WorkTimes w;
  if (!j.is_array() || j.size() != 3) return w;
  if (j[0].is_array() && j[0].size() == kLinkKinds) {
    w.puts.emplace();
    for (std::size_t k = 0; k < kLinkKinds; ++k) (*w.puts)[k] = seconds_from(j[0][k]).value_or(Seconds{0});
  }
  w.pack_unpack = seconds_from(j[1]);
  w.quantize = seconds_from(j[2]);
  return w;
}

// The busiest rank's work under the simulator's breakdown names, and what it waited.
void add_breakdown(const RunSummary& s, nlohmann::ordered_json& j) {
  const RankResult* r = s.busiest();
  if (r == nullptr) return;
  const auto work = measured_breakdown(r->work);
  j["breakdown_rank"] = r->rank;
  j["breakdown_s"] = work.seconds;
  j["breakdown_not_timed"] = work.not_timed;
  j["waiting_s"] = r->walls.empty() ? nlohmann::ordered_json()
                                    : nlohmann::ordered_json((r->walls.back() - work.busy).value);
}

// The busiest rank's timed work, last iteration, as the simulator's breakdown names it.
void print_work(const RunSummary& s) {
  const RankResult* r = s.busiest();
  if (r == nullptr || r->walls.empty()) return;
  const auto work = measured_breakdown(r->work);
  std::vector<std::string> parts, untimed;
  for (const auto& [name, seconds] : work.seconds.items()) {
    if (seconds.is_null())
      untimed.push_back(name);
    else if (seconds.get<double>() > 0)
      parts.push_back(fmt::format("{} {:.3f} ms", name, seconds.get<double>() * 1e3));
  }
  fmt::print("work        rank {} (the busiest), last iteration: {}; waiting {:.3f} ms; not timed: {}\n",
             r->rank, parts.empty() ? "nothing timed" : fmt::format("{}", fmt::join(parts, ", ")),
             (r->walls.back() - work.busy).value * 1e3, fmt::join(untimed, ", "));
}

// One step of a delta refit over every rank: bytes and pieces summed, times the slowest rank's,
// and each rank's payload bytes (rank order).
struct DeltaStep {
  Bytes bytes;
  DeltaStepReport total;
  Seconds seconds;
  std::vector<std::int64_t> rank_bytes;
};

std::vector<DeltaStep> delta_steps(const RunSummary& s) {
  const auto walls = s.iteration_seconds();
  std::vector<DeltaStep> out(walls.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i].seconds = walls[i];
  for (const auto& r : s.ranks)
    for (std::size_t i = 0; i < r.delta_steps.size() && i < out.size(); ++i) {
      const auto& d = r.delta_steps[i].delta;
      auto& t = out[i].total;
      out[i].bytes += r.delta_steps[i].sent;
      out[i].rank_bytes.push_back(r.delta_steps[i].sent.value);
      t.dense_bytes += d.dense_bytes;
      t.pieces += d.pieces;
      t.unchanged += d.unchanged;
      t.full += d.full;
      t.encode = std::ranges::max(t.encode, d.encode, {}, &Seconds::value);
      t.decode = std::ranges::max(t.decode, d.decode, {}, &Seconds::value);
      t.exchange = std::ranges::max(t.exchange, d.exchange, {}, &Seconds::value);
      t.rebalance = std::ranges::max(t.rebalance, d.rebalance, {}, &Seconds::value);
      t.share_drift = d.share_drift;  // the same on every rank
      t.rebalanced = t.rebalanced || d.rebalanced;
    }
  return out;
}

nlohmann::ordered_json delta_json(const RunSummary& s) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const auto& step : delta_steps(s))
    steps.push_back({{"bytes", step.bytes.value},
                     {"dense_bytes", step.total.dense_bytes.value},
                     {"seconds", step.seconds.value},
                     {"pieces", step.total.pieces},
                     {"unchanged_pieces", step.total.unchanged},
                     {"full_pieces", step.total.full},
                     {"encode_seconds", step.total.encode.value},
                     {"decode_seconds", step.total.decode.value},
                     {"exchange_seconds", step.total.exchange.value},
                     {"share_drift", step.total.share_drift ? nlohmann::ordered_json(*step.total.share_drift)
                                                            : nlohmann::ordered_json(nullptr)},
                     {"rebalanced", step.total.rebalanced},
                     {"rebalance_seconds", step.total.rebalance.value},
                     {"rank_bytes", step.rank_bytes}});
  return {{"change_fraction", *s.delta}, {"steps", steps}};
}

// Steps after the first (which has no baseline and moves everything): their median bytes and time.
void print_delta(const RunSummary& s) {
  const auto steps = delta_steps(s);
  fmt::print("delta       {:g} % of the elements change per step (synthetic update)\n", *s.delta * 100);
  for (std::size_t i = 0; i < steps.size(); ++i)
    fmt::print(
        "  step {:<4} {} of {} dense ({:.2f} %) in {}; pieces {} ({} dense, {} unchanged); encode {}, "
        "decode {}, exchange {}; share drift {}{}\n",
        i, human(steps[i].bytes), human(steps[i].total.dense_bytes),
        steps[i].total.dense_bytes.value > 0 ? 100.0 * static_cast<double>(steps[i].bytes.value) /
                                                   static_cast<double>(steps[i].total.dense_bytes.value)
                                             : 0.0,
        human(steps[i].seconds), steps[i].total.pieces, steps[i].total.full, steps[i].total.unchanged,
        human(steps[i].total.encode), human(steps[i].total.decode), human(steps[i].total.exchange),
        steps[i].total.share_drift ? fmt::format("{:.3f}", *steps[i].total.share_drift) : "not measured",
        steps[i].total.rebalanced ? fmt::format(", re-planned in {}", human(steps[i].total.rebalance)) : "");
}

std::string verification_text(const RunSummary& s) {
  if (!s.verify) return "not checked (pass --verify)";
  for (const auto& r : s.ranks)
    if (r.wrong) return fmt::format("FAILED on rank {}: {}", r.rank, *r.wrong);
  return "every destination element is right";
}

nlohmann::json encode_join(const RankJoin& r) {
  nlohmann::json j{{"role", r.role},       {"rank", r.join_rank},
                   {"sent", r.sent.value}, {"received", r.received.value},
                   {"wall", r.wall.value}, {"checked", r.checked}};
  if (r.wrong) j["wrong"] = *r.wrong;
  return j;
}

[[nodiscard]] Result<RankJoin> decode_join(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("role") || !j["role"].is_string())
    return fail(ErrorCode::kRuntime, "a rank sent a malformed join result");
  RankJoin r{.role = j["role"].get<std::string>(),
             .join_rank = j.value("rank", -1),
             .sent = Bytes{j.value("sent", std::int64_t{0})},
             .received = Bytes{j.value("received", std::int64_t{0})},
             .wall = Seconds{j.value("wall", 0.0)},
             .checked = j.value("checked", false),
             .wrong = std::nullopt};
  if (j.contains("wrong") && j["wrong"].is_string()) r.wrong = j["wrong"].get<std::string>();
  return r;
}

// What the join moved, summed over its ranks by role, and its slowest rank's execute().
struct JoinTotals {
  Bytes peers;     // sent by the peers' ranks
  Bytes training;  // sent by the training ranks
  Bytes relayed;   // sent by the joining engine's ranks to one another
  Seconds seconds;
  bool verified = true;  // every joining rank checked its destinations and found them right
};

JoinTotals join_totals(const RunSummary& s) {
  JoinTotals t;
  for (const auto& r : s.ranks) {
    if (!r.join) continue;
    const auto& j = *r.join;
    if (j.role == "peer") t.peers += j.sent;
    if (j.role == "training") t.training += j.sent;
    if (j.role == "joining") {
      t.relayed += j.sent;
      t.verified = t.verified && j.checked && !j.wrong;
    }
    t.seconds = std::max(t.seconds, j.wall);
  }
  return t;
}

nlohmann::ordered_json join_json(const RunSummary& s) {
  const auto& j = *s.join;
  const auto t = join_totals(s);
  nlohmann::ordered_json per_rank = nlohmann::ordered_json::array();
  for (const auto& r : s.ranks)
    if (r.join)
      per_rank.push_back({{"rank", r.rank},
                          {"role", r.join->role},
                          {"join_rank", r.join->join_rank},
                          {"bytes_sent", r.join->sent.value},
                          {"bytes_received", r.join->received.value},
                          {"seconds", r.join->wall.value}});
  return {{"engine", j.engine},
          {"peers", j.peers},
          {"from", j.from},
          {"plan_hash", j.plan_hash},
          {"world", j.world},
          {"peer_tensors", j.peer_tensors},
          {"tensors", j.tensors},
          {"peer_bytes", t.peers.value},
          {"training_bytes", t.training.value},
          {"relayed_bytes", t.relayed.value},
          {"seconds", t.seconds.value},
          {"verified", s.verify && t.verified},
          {"per_rank", per_rank}};
}

void print_join(const RunSummary& s) {
  const auto& j = *s.join;
  const auto t = join_totals(s);
  fmt::print(
      "join        engine {} restarted and filled again from {} (peers: {}): {} of {} processes took part "
      "(ranks {}), the others were free\n",
      j.engine, j.from, j.peers.empty() ? "none" : fmt::format("{}", fmt::join(j.peers, ", ")),
      j.world.size(), s.ranks.size(), fmt::join(j.world, ", "));
  fmt::print("  moved     peers sent {}, training ranks {} ({} of {} tensors from peers), in {}\n",
             human(t.peers), human(t.training), j.peer_tensors, j.tensors, human(t.seconds));
  fmt::print("  verified  {}\n", !s.verify    ? "not checked (pass --verify)"
                                 : t.verified ? "every element of the refilled engine is right"
                                              : "FAILED on the refilled engine");
}

}  // namespace

std::string encode(const RankResult& r) {
  nlohmann::json walls = nlohmann::json::array();
  for (const Seconds w : r.walls) walls.push_back(w.value);
  nlohmann::json j{
      {"rank", r.rank},
      {"sent", r.sent.value},
      {"received", r.received.value},
      {"direct", r.stored_directly.value},
      {"walls", walls},
      {"elapsed", r.elapsed.value},
      {"work", encode_work(r.work)},
      {"checked", r.checked},
      {"resident", {r.resident.after_prepare.value, r.resident.after_warm_up.value, r.resident.end.value}}};
  if (r.wrong) j["wrong"] = *r.wrong;
  if (r.join) j["join"] = encode_join(*r.join);
  for (const auto& step : r.delta_steps) {
    const auto& d = step.delta;
    j["delta"].push_back(nlohmann::json::array(
        {step.sent.value, d.dense_bytes.value, d.pieces, d.unchanged, d.full, d.encode.value, d.decode.value,
         d.exchange.value, d.share_drift.value_or(kNoDrift), d.rebalanced ? 1 : 0, d.rebalance.value}));
  }
  return json_text(j);
}

Result<RankResult> decode_rank_result(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(ErrorCode::kRuntime, "a rank sent a malformed result");
  RankResult r;
  r.rank = j.value("rank", 0);
  r.sent = Bytes{j.value("sent", std::int64_t{0})};
  r.received = Bytes{j.value("received", std::int64_t{0})};
  r.stored_directly = Bytes{j.value("direct", std::int64_t{0})};
  for (const double w : j.value("walls", std::vector<double>{})) r.walls.push_back(Seconds{w});
  r.elapsed = Seconds{j.value("elapsed", 0.0)};
  if (j.contains("work")) r.work = decode_work(j["work"]);
  r.checked = j.value("checked", false);
  if (j.contains("wrong")) r.wrong = j["wrong"].get<std::string>();
  const auto resident = j.value("resident", std::vector<std::int64_t>{});
  if (resident.size() == 3)
    r.resident = {
        .after_prepare = Bytes{resident[0]}, .after_warm_up = Bytes{resident[1]}, .end = Bytes{resident[2]}};
  if (j.contains("join")) r.join = REFIT_TRY(decode_join(j["join"]));
  for (const auto& step : j.value("delta", nlohmann::json::array())) {
    if (!step.is_array() || step.size() != 11 ||
        !std::ranges::all_of(step, [](const nlohmann::json& v) { return v.is_number(); }))
      return fail(ErrorCode::kRuntime, "a rank sent a malformed delta step");
    r.delta_steps.push_back(
        RankDeltaStep{.sent = Bytes{step[0].get<std::int64_t>()},
                      .delta = DeltaStepReport{.dense_bytes = Bytes{step[1].get<std::int64_t>()},
                                               .pieces = step[2].get<std::int64_t>(),
                                               .unchanged = step[3].get<std::int64_t>(),
                                               .full = step[4].get<std::int64_t>(),
                                               .encode = Seconds{step[5].get<double>()},
                                               .decode = Seconds{step[6].get<double>()},
                                               .exchange = Seconds{step[7].get<double>()},
                                               .share_drift = step[8].get<double>() == kNoDrift
                                                                  ? std::nullopt
                                                                  : std::optional(step[8].get<double>()),
                                               .rebalanced = step[9].get<int>() != 0,
                                               .rebalance = Seconds{step[10].get<double>()}}});
  }
  return r;
}

Bytes RunSummary::bytes() const {
  Bytes total{0};
  for (const auto& r : ranks) total += r.sent;
  return total;
}

std::vector<Seconds> RunSummary::iteration_seconds() const {
  std::vector<Seconds> out;
  for (const auto& r : ranks) {
    out.resize(std::max(out.size(), r.walls.size()), Seconds{0});
    for (std::size_t i = 0; i < r.walls.size(); ++i) out[i] = std::max(out[i], r.walls[i]);
  }
  return out;
}

Seconds RunSummary::seconds() const { return median_time(iteration_seconds()); }

bool RunSummary::verified() const {
  return verify && std::ranges::all_of(ranks, [](const RankResult& r) { return r.checked && !r.wrong; }) &&
         (!join || join_totals(*this).verified);
}

std::pair<Bytes, std::int32_t> RunSummary::resident_growth() const {
  std::pair<Bytes, std::int32_t> largest{Bytes{std::numeric_limits<std::int64_t>::min()}, 0};
  for (const auto& r : ranks)
    if (const Bytes grown = r.resident.end - r.resident.after_warm_up; grown.value > largest.first.value)
      largest = {grown, r.rank};
  return ranks.empty() ? std::pair{Bytes{0}, 0} : largest;
}

const RankResult* RunSummary::busiest() const {
  const RankResult* most = nullptr;
  Seconds longest{-1};
  for (const auto& r : ranks)
    if (const Seconds busy = measured_breakdown(r.work).busy; busy > longest) {
      longest = busy;
      most = &r;
    }
  return most;
}

void print_summary(const RunSummary& s, bool json) {
  if (json) {
    nlohmann::ordered_json iterations = nlohmann::ordered_json::array();
    for (const Seconds t : s.iteration_seconds()) iterations.push_back(t.value);
    nlohmann::ordered_json j{{"executor", s.executor},
                             {"strategy", s.strategy},
                             {"ranks", s.training_ranks + s.inference_ranks},
                             {"training_ranks", s.training_ranks},
                             {"inference_ranks", s.inference_ranks},
                             {"bytes", s.bytes().value},
                             {"seconds", s.seconds().value},
                             {"iteration_seconds", iterations},
                             {"gbps", gbps(s.bytes(), s.seconds())},
                             {"verified", s.verified()},
                             {"plan_hash", s.plan_hash},
                             {"warm_up_iterations", s.warm_up_iterations},
                             {"resident_growth_bytes", s.resident_growth().first.value}};
    add_breakdown(s, j);
    j["per_rank"] = nlohmann::ordered_json::array();
    for (const auto& r : s.ranks) j["per_rank"].push_back(rank_json(r, s.training_ranks));
    if (s.delta) j["delta"] = delta_json(s);
    if (s.engines) {
      j["engines_completed"] = s.engines->completed;
      j["engines_missed"] = s.engines->missed;
    }
    if (s.join) j["join"] = join_json(s);
    fmt::print("{}\n", json_text(j));
    return;
  }
  fmt::print("refit run: {} executor, strategy {}, {} training -> {} inference ranks, plan {}\n", s.executor,
             s.strategy, s.training_ranks, s.inference_ranks, s.plan_hash);
  fmt::print("moved       {:.3f} GB in {:.4f} s: {:.2f} GB/s aggregate\n", gb(s.bytes()), s.seconds().value,
             gbps(s.bytes(), s.seconds()));
  if (const auto times = s.iteration_seconds(); times.size() > 1)
    fmt::print("iterations  {} (median above; first {:.4f} s, slowest {:.4f} s)\n", times.size(),
               times.front().value, std::ranges::max(times, {}, &Seconds::value).value);
  for (const auto& r : s.ranks) {
    const Seconds wall = median_time(r.walls);
    fmt::print(
        "  rank {:<3} {:<9}  sent {:.3f} GB ({:.2f} GB/s), received {:.3f} GB ({:.2f} GB/s) in {:.4f} s\n",
        r.rank, r.rank < s.training_ranks ? "training" : "inference", gb(r.sent), gbps(r.sent, wall),
        gb(r.received), gbps(r.received, wall), wall.value);
  }
  if (const auto [grown, where] = s.resident_growth(); s.iteration_seconds().size() > 1)
    fmt::print(
        "memory      resident after the warm-up ({} execution{}) to the end: {:+.3f} MB at most (rank {})\n",
        s.warm_up_iterations, s.warm_up_iterations == 1 ? "" : "s", static_cast<double>(grown.value) / 1e6,
        where);
  print_work(s);
  if (s.delta) print_delta(s);
  fmt::print("verified    {}\n", verification_text(s));
  if (s.join) print_join(s);
  if (s.engines)
    fmt::print("engines     completed: {}; missed the step: {}\n", fmt::join(s.engines->completed, ", "),
               fmt::join(s.engines->missed, ", "));
}

}  // namespace refit::cli
