#include "run_storage.h"

#include <vector>

#include <fmt/format.h>

#include "parse.h"
#include "refit/core/named_files.h"
#include "refit/core/try.h"

namespace refit::cli {
namespace {

std::string rank_folder(Rank rank) { return fmt::format("rank{}", rank.value); }

[[nodiscard]] Result<void> load(const FrameworkBuffers& f, const std::string& dir, Rank rank) {
  const auto folder = REFIT_TRY(NamedFileFolder::open(dir, rank_folder(rank), /*create=*/false));
  for (std::size_t i = 0; i < f.parameters().size(); ++i)
    REFIT_TRY(folder.read(f.parameters()[i].name, f.bytes(i)));
  return {};
}

Overwrite overwrite_of(const StorageOptions& o) {
  return o.overwrite ? Overwrite::kAllow : Overwrite::kRefuse;
}

// Every file save() would write, checked before anything moves: a refusal halfway through the
// writes would leave a folder that mixes two runs.
[[nodiscard]] Result<void> check_save(const FrameworkBuffers& f, const StorageOptions& o, Rank rank) {
  if (o.save_destinations.empty() || f.buffers().destination_parameters.empty()) return {};
  const auto folder =
      REFIT_TRY(NamedFileFolder::open(o.save_destinations, rank_folder(rank), /*create=*/true));
  for (const auto& p : f.parameters()) REFIT_TRY(folder.check_write(p.name, overwrite_of(o)));
  return {};
}

}  // namespace

void add_storage_options(CLI::App& cmd, StorageOptions& o) {
  cmd.add_option("--storage", o.storage,
                 "logical: one buffer per shard (default); framework: Megatron's parameters on the "
                 "training ranks and vLLM's on the inference ranks (fused qkv and gate/up, stacked "
                 "experts, padded vocab), read and written where they lie")
      ->check(CLI::IsMember({"logical", "framework"}));
  cmd.add_option("--load-sources", o.load_sources,
                 "With --storage framework: read each training rank's parameters from "
                 "DIR/rank<R>/<file> (raw bytes) instead of the verification pattern; <file> is the "
                 "parameter's name with every byte but letters, digits, '_', '-' and '.' (and a "
                 "leading '.') written %XX, so no name reaches outside DIR; links are not followed")
      ->check(non_empty());
  cmd.add_option("--save-destinations", o.save_destinations,
                 "With --storage framework: write each inference rank's parameters to "
                 "DIR/rank<R>/<file> (raw bytes, <file> as for --load-sources) after the run, by a "
                 "rank whose weights are this step's (not an --elastic engine that missed it) and, "
                 "with --verify, right; every file is checked before anything moves, and one that "
                 "exists is refused unless --overwrite")
      ->check(non_empty());
  cmd.add_flag("--overwrite", o.overwrite,
               "Let --save-destinations replace files that exist (regular files of one link only)")
      ->needs("--save-destinations");
}

Result<RunBuffers> RunBuffers::make(const StorageOptions& o, const ProblemSource& source,
                                    const ReshardProblem& problem, Rank rank,
                                    const HostAllocator& allocator) {
  RunBuffers out;
  if (o.storage != "framework") {
    if (!o.load_sources.empty() || !o.save_destinations.empty())
      return invalid("--load-sources and --save-destinations need --storage framework");
    out.shards_.emplace(REFIT_TRY(HostShards::allocate(problem, rank, allocator)));
    return out;
  }
  const bool training = problem.is_source(rank);
  out.map_ = std::make_unique<models::StorageMap>(
      REFIT_TRY_IN(load_storage(source, problem, training), "--storage framework"));
  out.framework_.emplace(REFIT_TRY(FrameworkBuffers::allocate(problem, *out.map_, rank, allocator)));
  if (!training) {
    REFIT_TRY_IN(check_save(*out.framework_, o, rank), "--save-destinations");
    return out;
  }
  if (o.load_sources.empty())
    out.framework_->fill_pattern(problem);
  else
    REFIT_TRY_IN(load(*out.framework_, o.load_sources, rank), "--load-sources");
  return out;
}

const RankBuffers& RunBuffers::buffers() const {
  return shards_ ? shards_->buffers() : framework_->buffers();
}

Result<void> RunBuffers::shorten_a_buffer() {
  if (!shards_) return invalid("--test-short-buffer-on-rank shortens host shards: drop --storage framework");
  RankBuffers& buffers = shards_->buffers();
  for (auto* side : {&buffers.sources, &buffers.destinations})
    for (auto& b : *side)
      if (!b.bytes.empty()) {
        b.bytes = b.bytes.first(b.bytes.size() - 1);
        return {};
      }
  return {};
}

Result<void> RunBuffers::verify(const ReshardProblem& problem) const {
  return shards_ ? shards_->verify(problem) : framework_->verify(problem);
}

void RunBuffers::clear_destinations() {
  if (shards_)
    shards_->clear_destinations();
  else
    framework_->clear_destinations();
}

Result<void> RunBuffers::save(const StorageOptions& o, Rank rank) const {
  if (!framework_ || o.save_destinations.empty() || framework_->buffers().destination_parameters.empty())
    return {};
  const auto folder = REFIT_TRY_IN(
      NamedFileFolder::open(o.save_destinations, rank_folder(rank), /*create=*/true), "--save-destinations");
  // One set: a loader reads the folder as one step, so a failure must leave the old step whole.
  std::vector<NamedBytes> files;
  for (std::size_t i = 0; i < framework_->parameters().size(); ++i)
    files.push_back({.name = framework_->parameters()[i].name, .bytes = framework_->bytes(i)});
  REFIT_TRY_IN(folder.write_all(files, overwrite_of(o)), "--save-destinations");
  return {};
}

}  // namespace refit::cli
