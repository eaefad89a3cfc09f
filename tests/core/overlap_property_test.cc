// Property test of overlaps() against a brute-force, element-by-element reference.
//
// The reference model of a layout is independent of the offset arithmetic under test: for each
// rank it keeps, per tensor dim, the explicit list of global indices it holds, obtained by
// repeatedly cutting that list like torch.chunk (pieces of ceil(len/n)) for every mesh axis in
// order. A rank holds element e iff every e[d] is in its list for dim d.
// Checked for every random pair:
//   (1) each destination rank's pieces cover each element it holds exactly once, and nothing else;
//   (2) each piece lies inside the box of every listed holder, and the holders are exactly the
//       source ranks that hold the whole piece.
#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "refit/core/overlap.h"

namespace refit {
namespace {

using IndexLists = std::vector<std::vector<std::int64_t>>;  // per dim, held global indices

IndexLists reference_holdings(const Layout& l, std::int64_t position) {
  IndexLists held(l.tensor_shape().size());
  for (std::size_t d = 0; d < held.size(); ++d)
    for (std::int64_t i = 0; i < l.tensor_shape()[d]; ++i) held[d].push_back(i);
  const auto coord = l.mesh().coord_of_position(position);
  for (std::size_t a = 0; a < l.placements().size(); ++a) {
    if (!l.placements()[a].is_shard()) continue;
    auto& list = held[static_cast<std::size_t>(l.placements()[a].dim)];
    const auto n = static_cast<std::size_t>(l.mesh().shape()[a]);
    const std::size_t chunk = (list.size() + n - 1) / n;
    const std::size_t begin = std::min(static_cast<std::size_t>(coord[a]) * chunk, list.size());
    const std::size_t end = std::min(begin + chunk, list.size());
    list = std::vector<std::int64_t>(list.begin() + static_cast<std::ptrdiff_t>(begin),
                                     list.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return held;
}

bool holds_box(const IndexLists& held, const Box& b) {
  for (std::size_t d = 0; d < b.rank(); ++d) {
    const std::set<std::int64_t> s(held[d].begin(), held[d].end());
    for (std::int64_t i = b.offset[d]; i < b.offset[d] + b.extent[d]; ++i)
      if (!s.contains(i)) return false;
  }
  return true;
}

std::int64_t flat_index(const Shape& shape, const Shape& point) {
  std::int64_t f = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + point[d];
  return f;
}

// Calls f(point) for every element of a box.
template <class F>
void for_each_point(const Box& b, F&& f) {
  if (b.empty()) return;
  Shape p = b.offset;
  while (true) {
    f(p);
    std::size_t d = p.size();
    while (d > 0) {
      --d;
      if (++p[d] < b.offset[d] + b.extent[d]) break;
      p[d] = b.offset[d];
      if (d == 0) return;
    }
  }
}

class RandomProblems {
 public:
  explicit RandomProblems(std::uint64_t seed) : rng_(seed) {}

  Shape shape() {
    // Sizes in 0..37, drawn small half the time so that 5-dim tensors stay enumerable.
    while (true) {
      Shape s(static_cast<std::size_t>(uniform(1, 5)));
      for (auto& x : s) x = coin() ? uniform(0, 37) : uniform(0, 5);
      if (element_count(s) <= 6000) return s;
    }
  }

  Layout layout(const Shape& shape, std::int32_t first_rank) {
    std::vector<std::int64_t> mesh(static_cast<std::size_t>(uniform(1, 3)));
    for (auto& m : mesh) m = uniform(1, 4);
    std::vector<Rank> ranks;
    for (std::int64_t i = 0; i < element_count(mesh); ++i)
      ranks.emplace_back(first_rank + static_cast<std::int32_t>(i));
    std::shuffle(ranks.begin(), ranks.end(), rng_);
    std::vector<Placement> placements;
    for (std::size_t a = 0; a < mesh.size(); ++a)
      placements.push_back(coin() ? Placement::replicate()
                                  : Placement::shard(static_cast<int>(
                                        uniform(0, static_cast<std::int64_t>(shape.size()) - 1))));
    return Layout::make(shape, Mesh::make(mesh, ranks).value(), placements).value();
  }

 private:
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  bool coin() { return uniform(0, 1) == 1; }
  std::mt19937_64 rng_;
};

void check_pair(const Layout& src, const Layout& dst) {
  const auto o = overlaps(src, dst).value();
  const Shape& shape = src.tensor_shape();
  std::vector<IndexLists> src_held;
  for (std::int64_t p = 0; p < src.mesh().size(); ++p) src_held.push_back(reference_holdings(src, p));

  for (std::int64_t p = 0; p < dst.mesh().size(); ++p) {
    const Rank r = dst.mesh().rank_at(p);
    const IndexLists want = reference_holdings(dst, p);
    std::vector<int> count(static_cast<std::size_t>(element_count(shape)), 0);
    if (const auto* d = o.destination_of(r))
      for (const auto& piece : d->pieces) {
        for_each_point(piece.box,
                       [&](const Shape& pt) { ++count[static_cast<std::size_t>(flat_index(shape, pt))]; });
        // (2) holders are exactly the source ranks holding the whole piece.
        std::vector<Rank> expected_holders;
        for (std::int64_t s = 0; s < src.mesh().size(); ++s)
          if (holds_box(src_held[static_cast<std::size_t>(s)], piece.box))
            expected_holders.push_back(src.mesh().rank_at(s));
        std::vector<Rank> got = o.holders(piece);
        std::ranges::sort(got);
        std::ranges::sort(expected_holders);
        ASSERT_EQ(got, expected_holders) << "piece " << piece.box.to_string();
      }
    // (1) exact single coverage of what the destination rank holds.
    for_each_point(Box::whole(shape), [&](const Shape& pt) {
      bool wanted = true;
      for (std::size_t d = 0; d < pt.size(); ++d)
        wanted = wanted && std::ranges::find(want[d], pt[d]) != want[d].end();
      ASSERT_EQ(count[static_cast<std::size_t>(flat_index(shape, pt))], wanted ? 1 : 0)
          << "rank " << r.value << " element " << flat_index(shape, pt);
    });
  }
}

TEST(OverlapProperty, TenThousandRandomLayoutPairsMatchBruteForce) {
  RandomProblems gen(20261129);
  for (int i = 0; i < 10000; ++i) {
    const Shape shape = gen.shape();
    const Layout src = gen.layout(shape, 0);
    const Layout dst = gen.layout(shape, 100);
    SCOPED_TRACE(::testing::Message() << "case " << i);
    check_pair(src, dst);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(OverlapProperty, LocalBoxMatchesReferenceHoldings) {
  // The box of every rank equals the product of its reference index lists (contiguous ranges).
  RandomProblems gen(7);
  for (int i = 0; i < 2000; ++i) {
    const Shape shape = gen.shape();
    const Layout l = gen.layout(shape, 0);
    for (std::int64_t p = 0; p < l.mesh().size(); ++p) {
      const Box b = l.box_at_position(p);
      const IndexLists held = reference_holdings(l, p);
      for (std::size_t d = 0; d < shape.size(); ++d) {
        ASSERT_EQ(b.extent[d], static_cast<std::int64_t>(held[d].size()));
        if (!held[d].empty()) ASSERT_EQ(b.offset[d], held[d].front());
      }
    }
  }
}

}  // namespace
}  // namespace refit
