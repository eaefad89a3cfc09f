#include "run_report.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace refit::cli {
namespace {

double gbps(Bytes b, Seconds s) { return s.value > 0 ? static_cast<double>(b.value) / s.value / 1e9 : 0.0; }
double gb(Bytes b) { return static_cast<double>(b.value) / 1e9; }

nlohmann::ordered_json rank_json(const RankResult& r, std::int32_t training_ranks) {
  return {{"rank", r.rank},
          {"role", r.rank < training_ranks ? "training" : "inference"},
          {"bytes_sent", r.sent.value},
          {"bytes_received", r.received.value},
          {"seconds", r.wall.value},
          {"transfer_seconds", r.elapsed.value},
          {"send_gbps", gbps(r.sent, r.wall)},
          {"receive_gbps", gbps(r.received, r.wall)}};
}

std::string verification_text(const RunSummary& s) {
  if (!s.verify) return "not checked (pass --verify)";
  for (const auto& r : s.ranks)
    if (r.wrong) return fmt::format("FAILED on rank {}: {}", r.rank, *r.wrong);
  return "every destination element is right";
}

}  // namespace

std::string encode(const RankResult& r) {
  nlohmann::json j{{"rank", r.rank},       {"sent", r.sent.value},       {"received", r.received.value},
                   {"wall", r.wall.value}, {"elapsed", r.elapsed.value}, {"checked", r.checked}};
  if (r.wrong) j["wrong"] = *r.wrong;
  return j.dump();
}

Result<RankResult> decode_rank_result(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(ErrorCode::kRuntime, "a rank sent a malformed result");
  RankResult r;
  r.rank = j.value("rank", 0);
  r.sent = Bytes{j.value("sent", std::int64_t{0})};
  r.received = Bytes{j.value("received", std::int64_t{0})};
  r.wall = Seconds{j.value("wall", 0.0)};
  r.elapsed = Seconds{j.value("elapsed", 0.0)};
  r.checked = j.value("checked", false);
  if (j.contains("wrong")) r.wrong = j["wrong"].get<std::string>();
  return r;
}

Bytes RunSummary::bytes() const {
  Bytes total{0};
  for (const auto& r : ranks) total += r.sent;
  return total;
}

Seconds RunSummary::seconds() const {
  Seconds slowest{0};
  for (const auto& r : ranks) slowest = std::max(slowest, r.wall);
  return slowest;
}

bool RunSummary::verified() const {
  return verify && std::ranges::all_of(ranks, [](const RankResult& r) { return r.checked && !r.wrong; });
}

void print_summary(const RunSummary& s, bool json) {
  if (json) {
    nlohmann::ordered_json j{{"executor", s.executor},
                             {"strategy", s.strategy},
                             {"ranks", s.training_ranks + s.inference_ranks},
                             {"training_ranks", s.training_ranks},
                             {"inference_ranks", s.inference_ranks},
                             {"bytes", s.bytes().value},
                             {"seconds", s.seconds().value},
                             {"gbps", gbps(s.bytes(), s.seconds())},
                             {"verified", s.verified()},
                             {"plan_hash", s.plan_hash},
                             {"per_rank", nlohmann::ordered_json::array()}};
    for (const auto& r : s.ranks) j["per_rank"].push_back(rank_json(r, s.training_ranks));
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("refit run: {} executor, strategy {}, {} training -> {} inference ranks, plan {}\n", s.executor,
             s.strategy, s.training_ranks, s.inference_ranks, s.plan_hash);
  fmt::print("moved       {:.3f} GB in {:.4f} s: {:.2f} GB/s aggregate\n", gb(s.bytes()), s.seconds().value,
             gbps(s.bytes(), s.seconds()));
  for (const auto& r : s.ranks)
    fmt::print(
        "  rank {:<3} {:<9}  sent {:.3f} GB ({:.2f} GB/s), received {:.3f} GB ({:.2f} GB/s) in {:.4f} s\n",
        r.rank, r.rank < s.training_ranks ? "training" : "inference", gb(r.sent), gbps(r.sent, r.wall),
        gb(r.received), gbps(r.received, r.wall), r.wall.value);
  fmt::print("verified    {}\n", verification_text(s));
}

}  // namespace refit::cli
