#pragma once
// The memory `refit run` moves on this rank: one buffer per logical shard (--storage logical,
// the default), or the frameworks' own parameters (--storage framework: Megatron's on the
// training ranks, vLLM's on the inference ranks, models/storage_map.h), optionally read from and
// written to files so that another program can check them byte for byte.
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "refit/executors/framework_buffers.h"
#include "refit/executors/host_shards.h"
#include "refit/facade/problem_source.h"

namespace refit::cli {

struct StorageOptions {
  std::string storage = "logical";  // or "framework"
  // Directory of the training ranks' parameters: <dir>/rank<R>/<file>, raw bytes (little-endian,
  // row-major), <file> the parameter's name as encode_file_name (core/named_files.h) makes it;
  // without it the sources hold the verification pattern.
  std::string load_sources;
  // Directory the inference ranks write their parameters to after the run, laid out the same.
  std::string save_destinations;
  bool overwrite = false;  // --save-destinations may replace files that exist
};

void add_storage_options(CLI::App& cmd, StorageOptions& options);

class RunBuffers {
 public:
  // --storage framework takes the maps from the model's rules (--model) or from a version 2
  // manifest (--manifest); errors name the option.
  [[nodiscard]] static Result<RunBuffers> make(const StorageOptions& options, const ProblemSource& source,
                                               const ReshardProblem& problem, Rank rank,
                                               const HostAllocator& allocator);

  const RankBuffers& buffers() const;
  // --test-short-buffer-on-rank: the rank's first non-empty buffer one byte short, what prepare
  // must refuse. Only the default storage's host shards are shortened.
  [[nodiscard]] Result<void> shorten_a_buffer();
  [[nodiscard]] Result<void> verify(const ReshardProblem& problem) const;
  void clear_destinations();
  // Writes this rank's destination parameters under --save-destinations (nothing without it).
  [[nodiscard]] Result<void> save(const StorageOptions& options, Rank rank) const;

 private:
  std::optional<HostShards> shards_;
  std::unique_ptr<models::StorageMap> map_;  // this rank's side; framework_ points into it
  std::optional<FrameworkBuffers> framework_;
};

}  // namespace refit::cli
