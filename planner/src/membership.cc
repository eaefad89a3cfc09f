// MemberEngines checks and the members' problem (membership.h).
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine_layouts.h"
#include "refit/core/try.h"
#include "refit/planner/membership.h"

namespace refit {
namespace {

constexpr std::array<std::string_view, 3> kJoinSourceNames{"training", "peers", "both"};

}  // namespace

std::string_view join_source_name(JoinSource s) { return kJoinSourceNames[static_cast<std::size_t>(s)]; }

Result<JoinSource> parse_join_source(std::string_view name) {
  for (std::size_t i = 0; i < kJoinSourceNames.size(); ++i)
    if (kJoinSourceNames[i] == name) return static_cast<JoinSource>(i);
  return parse_error(fmt::format("'{}' is not {}", name, fmt::join(kJoinSourceNames, ", ")));
}

Result<void> check_no_landing(const ReshardProblem& problem, std::string_view what) {
  for (const auto& t : problem.tensors())
    if (t.tensor.quantization && t.tensor.quantization->made_at_landing())
      return unsupported(fmt::format(
          "tensor '{}' is quantized at its landing ranks, which {} cannot take from another holder; "
          "quantize at the sender or the receiver",
          t.tensor.name, what));
  return {};
}

Result<void> check_member_engines(const MemberEngines& m, const ReshardProblem& problem) {
  if (m.engines < 1 || problem.destination_ranks() % m.engines != 0)
    return out_of_range(fmt::format("{} engines do not divide the {} destination ranks", m.engines,
                                    problem.destination_ranks()));
  if (m.members.empty()) return invalid("a membership needs at least one member engine");
  for (std::size_t i = 0; i < m.members.size(); ++i) {
    const auto e = m.members[i];
    if (e < 0 || e >= m.engines)
      return out_of_range(fmt::format("member engine {} is not in [0, {})", e, m.engines));
    if (i > 0 && e <= m.members[i - 1])
      return invalid(fmt::format("member engine {} follows {}: members are ascending and distinct", e,
                                 m.members[i - 1]));
  }
  return {};
}

std::vector<Rank> engine_ranks(const ReshardProblem& problem, std::int32_t engines, std::int32_t engine) {
  const std::int32_t size = problem.destination_ranks() / engines;
  std::vector<Rank> out;
  for (std::int32_t k = 0; k < size; ++k) out.push_back(Rank{problem.source_ranks() + engine * size + k});
  return out;
}

Result<ReshardProblem> members_problem(const ReshardProblem& problem, const MemberEngines& m) {
  REFIT_TRY(check_member_engines(m, problem));
  std::vector<std::int32_t> keep(static_cast<std::size_t>(problem.world_size()), -1);
  for (const auto e : m.members)
    for (const Rank r : engine_ranks(problem, m.engines, e))
      keep[static_cast<std::size_t>(r.value)] = r.value;
  planner_detail::RankKeeper keeper(std::move(keep));
  std::vector<TensorReshard> tensors;
  tensors.reserve(problem.tensors().size());
  for (const auto& t : problem.tensors())
    tensors.push_back(TensorReshard{
        .tensor = t.tensor,
        .source = t.source,
        .destination = REFIT_TRY_IN(keeper.keep(t.destination), fmt::format("tensor '{}'", t.tensor.name))});
  return ReshardProblem::make(std::move(tensors), problem.source_ranks(), problem.destination_ranks());
}

}  // namespace refit
