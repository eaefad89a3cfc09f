#include "run_storage.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "refit/core/text_file.h"
#include "refit/core/try.h"

namespace refit::cli {
namespace {

std::filesystem::path parameter_file(const std::string& dir, Rank rank, const std::string& name) {
  return std::filesystem::path(dir) / fmt::format("rank{}", rank.value) / name;
}

[[nodiscard]] Result<void> load(const FrameworkBuffers& f, const std::string& dir, Rank rank) {
  for (std::size_t i = 0; i < f.parameters().size(); ++i) {
    const auto path = parameter_file(dir, rank, f.parameters()[i].name);
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    const auto bytes = f.bytes(i);
    if (!in || static_cast<std::size_t>(in.tellg()) != bytes.size())
      return not_found(
          fmt::format("--load-sources: {} is missing or not {} bytes", path.string(), bytes.size()));
    in.seekg(0);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
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
                 "DIR/rank<R>/<name> (raw bytes) instead of the verification pattern");
  cmd.add_option("--save-destinations", o.save_destinations,
                 "With --storage framework: write each inference rank's parameters to "
                 "DIR/rank<R>/<name> (raw bytes) after the run");
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
  if (!training) return out;
  if (o.load_sources.empty())
    out.framework_->fill_pattern(problem);
  else
    REFIT_TRY(load(*out.framework_, o.load_sources, rank));
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
  for (std::size_t i = 0; i < framework_->parameters().size(); ++i) {
    const auto path = parameter_file(o.save_destinations, rank, framework_->parameters()[i].name);
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    const auto bytes = framework_->bytes(i);
    REFIT_TRY_IN(write_file(path,
                            [&](std::ostream& out) {
                              out.write(reinterpret_cast<const char*>(bytes.data()),
                                        static_cast<std::streamsize>(bytes.size()));
                            }),
                 "--save-destinations");
  }
  return {};
}

}  // namespace refit::cli
