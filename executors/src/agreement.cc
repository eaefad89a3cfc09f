#include "refit/executors/agreement.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "refit/core/try.h"

namespace refit {
namespace {

// Every contribution starts with one status byte: kOk, or the ErrorCode of the rank's failure
// (kFirstCode + the code), so that every rank can report the code of the rank that failed.
constexpr char kOk = 'o';
constexpr char kFirstCode = 'A';

char status_of(const Result<std::string>& mine) {
  if (mine) return kOk;
  return static_cast<char>(kFirstCode + static_cast<int>(mine.error().code));
}

// The code a failed contribution carries; nullopt for an empty one or a byte that is no code.
std::optional<ErrorCode> code_of(const std::string& contribution) {
  if (contribution.empty()) return std::nullopt;
  const int code = contribution[0] - kFirstCode;
  if (code < 0 || code > static_cast<int>(ErrorCode::kInternal)) return std::nullopt;
  return static_cast<ErrorCode>(code);
}

std::string ranks_text(const std::vector<std::int32_t>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

}  // namespace

Result<std::vector<std::string>> agree(Bootstrap& bootstrap, const Result<std::string>& mine) {
  const std::string contribution = status_of(mine) + (mine ? *mine : mine.error().message);
  auto gathered = bootstrap.allgather(contribution);
  // A rank that failed itself says why, also when a peer never arrived to hear it.
  if (!gathered) REFIT_TRY(mine);
  auto all = REFIT_TRY(std::move(gathered));
  std::vector<std::int32_t> failed;
  std::optional<ErrorCode> bad_input;  // of the first rank that refused with bad input
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto& c = all[r];
    if (!c.empty() && c[0] == kOk) continue;
    failed.push_back(static_cast<std::int32_t>(r));
    const auto code = code_of(c);
    if (!bad_input && code && Error{.code = *code, .message = {}}.is_bad_input()) bad_input = code;
  }
  REFIT_TRY(mine);
  if (!failed.empty()) {
    const auto& first = all[static_cast<std::size_t>(failed.front())];
    return fail(bad_input.value_or(ErrorCode::kPeerFailed),
                fmt::format("refused because {} refused: {}", ranks_text(failed),
                            first.empty() ? std::string("(no reason given)") : first.substr(1)));
  }
  for (auto& c : all) c.erase(0, 1);
  return all;
}

std::string encode_settings(const std::vector<Setting>& settings) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : settings) j.push_back({s.name, s.value});
  return j.dump();
}

Result<void> check_same_settings(const std::vector<std::string>& contributions) {
  std::vector<std::map<std::string, std::string>> by_rank;
  std::vector<std::string> names;  // in the order rank 0 (then the others) gave them
  for (std::size_t r = 0; r < contributions.size(); ++r) {
    const auto j = nlohmann::json::parse(contributions[r], nullptr, false);
    auto& mine = by_rank.emplace_back();
    const bool pairs = j.is_array() && std::ranges::all_of(j, [](const nlohmann::json& e) {
                         return e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string();
                       });
    if (!pairs)
      return fail(ErrorCode::kRuntime, fmt::format("rank {} sent settings that are not refit's", r));
    for (const auto& e : j) {
      const auto name = e[0].get<std::string>();
      if (mine.emplace(name, e[1].get<std::string>()).second && std::ranges::find(names, name) == names.end())
        names.push_back(name);
    }
  }
  for (const auto& name : names) {
    std::map<std::string, std::vector<std::int32_t>> ranks_by_value;
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      const auto it = by_rank[r].find(name);
      ranks_by_value[it == by_rank[r].end() ? "(nothing)" : it->second].push_back(
          static_cast<std::int32_t>(r));
    }
    if (ranks_by_value.size() <= 1) continue;
    std::vector<std::string> groups;
    for (const auto& [value, ranks] : ranks_by_value)
      groups.push_back(fmt::format("{} {} {}", ranks_text(ranks), ranks.size() == 1 ? "has" : "have", value));
    return mismatch(
        fmt::format("ranks disagree on the {} ({}): every rank must be given the same problem, "
                    "cluster, strategy and options, and run the same refit version",
                    name, fmt::join(groups, "; ")));
  }
  return {};
}

}  // namespace refit
