// The UCX engine's bookkeeping without UCX: ReceiveBook (which chunks a rank grants, and when) and
// SendBook (which chunk it sends next), on the rank programs of random plans (six tensors of up to
// 40^3 elements) cut into 512-byte chunks with 1 KiB of staging (one or two slots, so that slots
// run out), played against a reference of the rules:
//   - every chunk is granted once, a sender's in-place chunks in plan order with at most `window`
//     granted and not landed, staged chunks in plan order with at most `slots` outstanding, no
//     two outstanding chunks in one slot;
//   - each pair's chunks go in plan order, only once granted and once what they forward landed.
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "random_problems.h"
#include "receive_book.h"
#include "refit/core/quantized_problem.h"
#include "refit/executors/host_shards.h"
#include "send_book.h"
#include "test_cluster.h"
#include "ucx_harness.h"

namespace refit::ucx_detail {
namespace {

constexpr Bytes kChunk{512};
constexpr Bytes kStaging{1024};

struct RankPrograms {
  ReshardProblem problem;
  Plan plan;
  std::vector<HostShards> shards;    // by rank: the buffers the programs' regions name
  std::vector<UcxProgram> programs;  // by rank
};

RankPrograms programs_of(ReshardProblem problem, const PlacedCluster& cluster, std::string_view strategy) {
  RankPrograms out{.problem = std::move(problem), .plan = {}, .shards = {}, .programs = {}};
  out.plan = testing::plan_for(out.problem, cluster, strategy, kChunk);
  for (std::int32_t r = 0; r < out.plan.world_size(); ++r) {
    auto lowered = std::make_unique<lowering::LoweredPlan>(*lowering::LoweredPlan::make(out.plan, kStaging));
    out.shards.push_back(HostShards::allocate(out.problem, Rank{r}));
    auto program = make_ucx_program(std::move(lowered), Rank{r}, out.shards.back().buffers());
    EXPECT_TRUE(program) << program.error().message;
    out.programs.push_back(std::move(*program));
  }
  return out;
}

// A 128x512 weight in rows on 2 training ranks, 64 each, which cuts its 128x128 blocks: it is
// quantized once at its landing ranks (one replica of 2 engines of 2 ranks, in columns), which
// then forward the fp8 and scales to the other engine.
ReshardProblem quantized_at_landing() {
  const Shape w{128, 512};
  const auto plain =
      ReshardProblem::make(
          {testing::make_reshard("w.weight", w, testing::make_layout(w, {2}, testing::rank_range(0, 2), "S0"),
                                 testing::make_layout(w, {2, 2}, testing::rank_range(2, 4), "R,S1"))},
          2, 4)
          .value();
  return quantize_problem(plain, {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding},
                          [](const TensorSpec&) { return true; })
      .value();
}

RankPrograms programs_for(std::uint64_t seed, std::string_view strategy) {
  testing::RandomProblems gen(seed);
  return programs_of(gen.problem(2, 3, 6, 40, 8), testing::make_test_cluster(2, 3, 2, 3), strategy);
}

bool staged(const UcxProgram& p, const Grant& g) {
  return p.receives()[g.receive].chunks[static_cast<std::size_t>(g.chunk)].path ==
         lowering::CopyPath::kStaged;
}

// The reference: what a receiver may have outstanding, checked after every grant.
class GrantRules {
 public:
  GrantRules(const UcxProgram& p, std::int64_t window) : p_(p), window_(window) {}

  void granted(const Grant& g) {
    const auto key = std::pair(g.receive, g.chunk);
    ASSERT_TRUE(ever_.insert(key).second) << "chunk " << g.chunk << " of receive " << g.receive << " twice";
    const auto sender = p_.receives()[g.receive].peer.value;
    auto& order = staged(p_, g) ? staged_order_ : in_place_order_[sender];
    EXPECT_TRUE(order.empty() || order.back() < key) << "out of plan order";
    order.push_back(key);
    if (staged(p_, g)) {
      ASSERT_EQ(g.runs.size(), 1U);
      const auto slot = g.runs[0].offset / p_.receive_staging.slot_bytes;
      EXPECT_TRUE(slots_.insert(slot).second) << "slot " << slot << " holds two chunks";
      EXPECT_LE(static_cast<std::int64_t>(slots_.size()), p_.receive_staging.slots);
      slot_of_[key] = slot;
    } else {
      EXPECT_LE(++in_place_[sender], window_) << "sender " << sender << " granted past the window";
      EXPECT_EQ(g.runs, p_.receive_runs[g.receive][static_cast<std::size_t>(g.chunk)]);
    }
    outstanding_.push_back(g);
  }
  void landed(const Grant& g) {
    if (staged(p_, g))
      slots_.erase(slot_of_.at({g.receive, g.chunk}));
    else
      --in_place_[p_.receives()[g.receive].peer.value];
  }
  std::vector<Grant>& outstanding() { return outstanding_; }
  std::size_t granted_count() const { return ever_.size(); }

 private:
  using Key = std::pair<std::size_t, std::int64_t>;
  const UcxProgram& p_;
  std::int64_t window_;
  std::set<Key> ever_;
  std::vector<Key> staged_order_;
  std::map<std::int32_t, std::vector<Key>> in_place_order_;
  std::map<std::int32_t, std::int64_t> in_place_;
  std::set<std::int64_t> slots_;
  std::map<Key, std::int64_t> slot_of_;
  std::vector<Grant> outstanding_;
};

std::int64_t total_chunks(const UcxProgram& p) {
  std::int64_t n = 0;
  for (const auto& r : p.receives()) n += static_cast<std::int64_t>(r.chunks.size());
  return n;
}

// Calls f(program, world, seed) for every rank of the plans of 12 random problems, direct and refit,
// and of refit's plan of a weight its landing ranks quantize (quantized_at_landing: a rank's
// quantize steps, whose fp8 the chunks it forwards wait for).
template <typename F>
void for_each_rank_program(F&& f) {
  const auto each = [&](const RankPrograms& all, std::uint64_t seed, std::string_view what) {
    for (const auto& p : all.programs) {
      SCOPED_TRACE(::testing::Message() << what << " " << seed << " rank " << p.rank->rank().value);
      f(p, all.plan.world_size(), seed);
    }
  };
  for (std::uint64_t seed = 1; seed <= 12; ++seed)
    for (const auto strategy : {"direct", "refit"}) each(programs_for(seed, strategy), seed, strategy);
  each(programs_of(quantized_at_landing(), testing::make_test_cluster(3, 2, 2, 4), "refit"), 0,
       "quantized at landing, refit");
}

// Lands outstanding chunks in a random order: each chunk is granted once, within the rules, and
// all of them in the end.
TEST(ReceiveBook, GrantsEveryChunkOnceWithinTheWindowAndTheSlotsInPlanOrder) {
  for_each_rank_program([](const UcxProgram& p, std::int32_t world, std::uint64_t seed) {
    constexpr std::int64_t kWindow = 2;
    ReceiveBook book(p, world, kWindow);
    GrantRules rules(p, kWindow);
    std::vector<Grant> grants;
    book.start(grants);
    std::mt19937_64 rng(seed);
    for (;;) {
      for (const auto& g : grants) rules.granted(g);
      grants.clear();
      auto& out = rules.outstanding();
      if (out.empty()) break;
      const auto pick = std::uniform_int_distribution<std::size_t>(0, out.size() - 1)(rng);
      const Grant g = out[pick];
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(pick));
      ASSERT_TRUE(book.awaits(g.receive, g.chunk));
      EXPECT_EQ(book.slot(g.receive, g.chunk) >= 0, staged(p, g));
      rules.landed(g);
      book.land(g.receive, g.chunk, grants);
      EXPECT_FALSE(book.awaits(g.receive, g.chunk)) << "a chunk lands once";
    }
    EXPECT_EQ(static_cast<std::int64_t>(rules.granted_count()), total_chunks(p));
    EXPECT_EQ(book.chunks_left(), 0);
    for (std::size_t i = 0; i < p.receives().size(); ++i)
      EXPECT_EQ(book.landed_prefix(i), static_cast<std::int64_t>(p.receives()[i].chunks.size()));
  });
}

// A chunk never granted is not awaited: a peer that announces one is refused, not unpacked from
// a slot it was never given.
TEST(ReceiveBook, AwaitsOnlyGrantedChunks) {
  const auto all = programs_for(3, "direct");
  for (const auto& p : all.programs) {
    ReceiveBook book(p, all.plan.world_size(), 1);
    std::vector<Grant> grants;
    book.start(grants);
    std::set<std::pair<std::size_t, std::int64_t>> given;
    for (const auto& g : grants) given.emplace(g.receive, g.chunk);
    for (std::size_t i = 0; i < p.receives().size(); ++i) {
      const auto chunks = static_cast<std::int64_t>(p.receives()[i].chunks.size());
      for (std::int64_t k = -1; k <= chunks; ++k)
        EXPECT_EQ(book.awaits(i, k), given.contains({i, k})) << "receive " << i << " chunk " << k;
    }
  }
}

// Dropping a receive: its chunks not landed stop counting; what it holds comes back only at
// release, and goes to the other receives' chunks; none of its own is granted again.
TEST(ReceiveBook, ADroppedReceiveHandsBackItsGrantsAtRelease) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const auto all = programs_for(seed, "direct");
    for (const auto& p : all.programs) {
      if (p.receives().size() < 2) continue;
      ReceiveBook book(p, all.plan.world_size(), 1);
      std::vector<Grant> grants;
      book.start(grants);
      const std::size_t victim = grants.front().receive;
      const auto left = book.chunks_left();
      book.drop(victim);
      EXPECT_EQ(book.chunks_left(), left - static_cast<std::int64_t>(p.receives()[victim].chunks.size()));
      EXPECT_TRUE(book.awaits(victim, grants.front().chunk)) << "a chunk put before the drop may still come";
      // It does come: discarded, its place goes to another receive's chunk, not the victim's.
      std::vector<Grant> after;
      book.discard(victim, grants.front().chunk, after);
      EXPECT_EQ(book.chunks_left(), left - static_cast<std::int64_t>(p.receives()[victim].chunks.size()));
      book.release(victim, after);
      EXPECT_TRUE(book.released(victim));
      for (const auto& g : after) EXPECT_NE(g.receive, victim);
      // Everything else still lands.
      std::vector<Grant> pending;
      for (const auto& g : grants)
        if (g.receive != victim) pending.push_back(g);
      pending.insert(pending.end(), after.begin(), after.end());
      while (!pending.empty()) {
        const Grant g = pending.back();
        pending.pop_back();
        std::vector<Grant> more;
        book.land(g.receive, g.chunk, more);
        for (const auto& m : more) EXPECT_NE(m.receive, victim);
        pending.insert(pending.end(), more.begin(), more.end());
      }
      EXPECT_EQ(book.chunks_left(), 0);
    }
  }
}

// Plays one rank's sends: everything granted at once, chunks flushed as they go, forwarded
// receives landed when the sends stall. Each pair's chunks come out in plan order, each once.
TEST(SendBook, EachPairSendsInPlanOrderOnceGrantedAndLanded) {
  for_each_rank_program([](const UcxProgram& p, std::int32_t world, std::uint64_t) {
    ReceiveBook received(p, world, 1 << 20);
    SendBook book(p, world, SendPacing{.by_bytes = true, .low_grants = 1});
    EXPECT_FALSE(book.next(received)) << "nothing goes before its grant";
    for (std::size_t j = 0; j < p.sends().size(); ++j)
      for (std::size_t k = 0; k < p.sends()[j].chunks.size(); ++k)
        book.grant(j, static_cast<std::int64_t>(k), {});
    std::vector<Grant> to_land;
    received.start(to_land);
    std::map<std::int32_t, std::vector<ChunkRef>> sent;  // by receiver
    std::size_t steps_run = 0;
    for (;;) {
      if (const auto c = book.next(received)) {
        const auto j = static_cast<std::size_t>(c->first);
        const auto k = static_cast<std::size_t>(c->second);
        EXPECT_TRUE(received.landed(p.waits[j][k])) << "went before what it forwards landed";
        const auto slot = p.send_runs[j][k].empty() ? book.take_pack_slot() : -1;
        book.put(*c);
        book.flushed(*c, slot);
        sent[p.sends()[j].peer.value].push_back(*c);
        continue;
      }
      // The rank's quantize steps run in order, each once what it quantizes has landed.
      if (steps_run < p.steps().size() && received.landed(p.step_waits[steps_run])) {
        received.step_ran(steps_run++);
        continue;
      }
      if (to_land.empty()) break;
      std::vector<Grant> more;
      for (const auto& g : to_land) received.land(g.receive, g.chunk, more);
      to_land = std::move(more);
    }
    EXPECT_EQ(steps_run, p.steps().size());
    EXPECT_EQ(book.chunks_left(), 0);
    for (const auto& [peer, chunks] : sent) {
      EXPECT_TRUE(std::ranges::is_sorted(chunks,
                                         [&](const ChunkRef& a, const ChunkRef& b) {
                                           return a.first != b.first ? a.first < b.first
                                                                     : a.second < b.second;
                                         }))
          << "to rank " << peer;
      EXPECT_EQ(std::set<ChunkRef>(chunks.begin(), chunks.end()).size(), chunks.size());
    }
  });
}

// A dropped send stops owing its unsent chunks at once and its put ones as they flush, or at
// once when its receiver is gone (abandoned: their slots come back as each is settled); only then
// may its receiver be told. Send 0 is the only one granted, so its first chunk is what goes.
TEST(SendBook, ADroppedSendOwesOnlyWhatIsInFlight) {
  const auto all = programs_for(5, "direct");
  int checked = 0;
  for (const auto& p : all.programs)
    for (const bool receiver_gone : {false, true}) {
      if (p.sends().empty() || p.sends()[0].chunks.size() < 2) continue;
      ReceiveBook received(p, all.plan.world_size(), 1);
      SendBook book(p, all.plan.world_size(), SendPacing{.by_bytes = false, .low_grants = 0});
      const auto chunks = static_cast<std::int64_t>(p.sends()[0].chunks.size());
      book.grant(0, 0, {});
      const auto left = book.chunks_left();
      const auto c = book.next(received);
      ASSERT_EQ(c, ChunkRef(0, 0));
      EXPECT_FALSE(book.next(received)) << "chunk 1 is not granted";
      const auto slot = p.send_runs[0][0].empty() ? book.take_pack_slot() : -1;
      book.put(*c);
      EXPECT_TRUE(book.drop(0));
      EXPECT_FALSE(book.drop(0)) << "dropped once";
      EXPECT_EQ(book.chunks_left(), left - (chunks - 1)) << "the put chunk is still owed";
      EXPECT_FALSE(book.drop_settled(0)) << "its flush is pending";
      if (receiver_gone) {
        book.abandon(0);
        EXPECT_EQ(book.chunks_left(), left - chunks) << "a gone receiver's flush is not waited for";
        EXPECT_TRUE(book.drop_settled(0));
        book.settle(*c, slot);
      } else {
        book.flushed(*c, slot);
        EXPECT_TRUE(book.drop_settled(0));
        EXPECT_EQ(book.chunks_left(), left - chunks);
      }
      ++checked;
    }
  EXPECT_GT(checked, 0);
}

// A chunk that must be packed waits for a free pack slot: with every slot held by a put not yet
// flushed, no such chunk goes; one flush frees a slot and the next one goes.
TEST(SendBook, APackedChunkWaitsForAFreePackSlot) {
  int checked = 0;
  for_each_rank_program([&](const UcxProgram& p, std::int32_t world, std::uint64_t) {
    std::int64_t packed = 0;
    for (const auto& runs : p.send_runs)
      for (const auto& r : runs) packed += r.empty() ? 1 : 0;
    if (packed <= p.send_staging.slots) return;  // the slots never run out
    ReceiveBook received(p, world, 1 << 20);
    std::vector<Grant> all;
    received.start(all);
    while (!all.empty()) {  // everything it forwards has landed
      std::vector<Grant> more;
      for (const auto& g : all) received.land(g.receive, g.chunk, more);
      all = std::move(more);
    }
    for (std::size_t s = 0; s < p.steps().size(); ++s) received.step_ran(s);
    SendBook book(p, world, SendPacing{.by_bytes = false, .low_grants = 0});
    for (std::size_t j = 0; j < p.sends().size(); ++j)
      for (std::size_t k = 0; k < p.sends()[j].chunks.size(); ++k)
        book.grant(j, static_cast<std::int64_t>(k), {});
    std::vector<std::pair<ChunkRef, std::int64_t>> held;  // put, not flushed, with its slot
    while (const auto c = book.next(received)) {
      const bool packs =
          p.send_runs[static_cast<std::size_t>(c->first)][static_cast<std::size_t>(c->second)].empty();
      const auto slot = packs ? book.take_pack_slot() : -1;
      book.put(*c);
      if (packs)
        held.emplace_back(*c, slot);
      else
        book.flushed(*c, slot);
    }
    ASSERT_GT(book.chunks_left(), static_cast<std::int64_t>(held.size())) << "stopped with chunks to send";
    EXPECT_EQ(static_cast<std::int64_t>(held.size()), p.send_staging.slots) << "every slot is held";
    book.flushed(held.front().first, held.front().second);
    EXPECT_TRUE(book.next(received)) << "a freed slot lets the next packed chunk go";
    ++checked;
  });
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace refit::ucx_detail
