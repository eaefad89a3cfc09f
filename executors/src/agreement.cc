#include "refit/executors/agreement.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/try.h"

namespace refit {
namespace {

constexpr char kOk = 'o';
constexpr char kBadInput = 'b';
constexpr char kFailed = 'f';

std::string ranks_text(const std::vector<std::int32_t>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

}  // namespace

Result<std::vector<std::string>> agree(Bootstrap& bootstrap, const Result<std::string>& mine) {
  const std::string contribution =
      mine ? kOk + *mine : (mine.error().is_bad_input() ? kBadInput : kFailed) + mine.error().message;
  auto all = REFIT_TRY(bootstrap.allgather(contribution));
  std::vector<std::int32_t> failed;
  bool bad_input = false;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto& c = all[r];
    if (!c.empty() && c[0] == kOk) continue;
    failed.push_back(static_cast<std::int32_t>(r));
    bad_input = bad_input || (!c.empty() && c[0] == kBadInput);
  }
  REFIT_TRY(mine);
  if (!failed.empty()) {
    const auto& first = all[static_cast<std::size_t>(failed.front())];
    return fail(bad_input ? ErrorCode::kInvalidArgument : ErrorCode::kPeerFailed,
                fmt::format("refused because {} refused: {}", ranks_text(failed),
                            first.empty() ? std::string("(no reason given)") : first.substr(1)));
  }
  for (auto& c : all) c.erase(0, 1);
  return all;
}

Result<void> check_same_plan(const std::vector<std::string>& hashes) {
  std::map<std::string, std::vector<std::int32_t>> by_hash;
  for (std::size_t r = 0; r < hashes.size(); ++r) by_hash[hashes[r]].push_back(static_cast<std::int32_t>(r));
  if (by_hash.size() <= 1) return {};
  std::vector<std::string> groups;
  for (const auto& [hash, ranks] : by_hash)
    groups.push_back(fmt::format("{} {} {}", ranks_text(ranks), ranks.size() == 1 ? "has" : "have", hash));
  return invalid(
      fmt::format("ranks disagree on the plan hash ({}): every rank must build the same plan "
                  "from the same problem, cluster, strategy and refit version",
                  fmt::join(groups, "; ")));
}

}  // namespace refit
