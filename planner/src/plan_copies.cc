#include "plan_copies.h"

#include <algorithm>
#include <vector>

#include "refit/core/index.h"

namespace refit::planner_detail {
namespace {

// A transfer of one copy, at its place in a round.
struct Place {
  std::int32_t sender;  // shifted: the order within the round
  std::uint32_t copy;
  std::uint32_t transfer;  // in the part's plan
};

class Expansion {
 public:
  Expansion(Plan part, std::span<const RankShift> shifts)
      : part_(std::move(part)), shifts_(shifts), id_(part_.transfers.size() * shifts.size()) {
    out_ = part_.without_transfers();
    out_.transfers.reserve(id_.size());
  }

  // The part's transfers [begin, end), one round: every copy's, by shifted sender.
  void round(std::size_t begin, std::size_t end) {
    places_.clear();
    for (std::uint32_t k = 0; k < shifts_.size(); ++k)
      for (auto i = begin; i < end; ++i)
        places_.push_back(Place{.sender = moved(part_.transfers[i].sender, k).value,
                                .copy = k,
                                .transfer = static_cast<std::uint32_t>(i)});
    std::ranges::sort(places_, {}, &Place::sender);
    for (const auto& p : places_) add(p.copy, p.transfer);
  }

  Plan take() && { return std::move(out_); }

 private:
  Rank moved(Rank r, std::uint32_t copy) const {
    const auto& s = shifts_[copy];
    return Rank{r.value + (r.value < part_.source_ranks ? s.source : s.destination)};
  }

  void add(std::uint32_t copy, std::uint32_t i) {
    const auto n = part_.transfers.size();
    auto& t = out_.transfers.emplace_back(part_.transfers[i]);
    t.id = static_cast<std::int32_t>(out_.transfers.size() - 1);
    t.sender = moved(t.sender, copy);
    t.receiver = moved(t.receiver, copy);
    for (auto& s : t.segments)
      if (s.via != kFromSourceShard) s.via = id_[copy * n + at(s.via)];  // vias point back: already placed
    id_[copy * n + i] = t.id;
  }

  Plan part_;
  std::span<const RankShift> shifts_;
  std::vector<std::int32_t> id_;  // [copy * part transfers + transfer] -> id in the plan
  std::vector<Place> places_;
  Plan out_;
};

}  // namespace

Plan expand_copies(Plan part, std::span<const std::uint64_t> rounds, std::span<const RankShift> shifts) {
  const auto n = part.transfers.size();
  Expansion expansion(std::move(part), shifts);
  for (std::size_t begin = 0; begin < n;) {
    auto end = begin;
    while (end < n && rounds[end] == rounds[begin]) ++end;
    expansion.round(begin, end);
    begin = end;
  }
  return std::move(expansion).take();
}

}  // namespace refit::planner_detail
