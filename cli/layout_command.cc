// refit layout: show which box of a tensor each rank of a mesh holds.
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "json_text.h"
#include "parse.h"
#include "refit/core/checked.h"
#include "refit/core/layout.h"
#include "refit/core/tensor_spec.h"
#include "refit/core/try.h"

namespace refit::cli {
namespace {

struct LayoutOptions {
  std::string shape;
  std::string mesh;
  std::string placements;
  std::string ranks;
  bool json = false;
};

[[nodiscard]] Result<Layout> build_layout(const LayoutOptions& o) {
  auto shape = REFIT_TRY(parse_int_list(o.shape, "--shape", 0));
  if (shape.size() > kMaxTensorDims)
    return out_of_range(fmt::format("--shape: {} dimensions, more than the {} of a tensor in refit",
                                    shape.size(), kMaxTensorDims));
  REFIT_TRY_IN(checked_product(shape, limits::kMaxElements, "elements"), "--shape");
  auto mesh_shape = REFIT_TRY(parse_mesh_shape(o.mesh, "--mesh"));
  std::vector<Rank> ranks;
  if (!o.ranks.empty()) {
    const auto list = REFIT_TRY(parse_int_list(o.ranks, "--ranks", 0));
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i] >= limits::kMaxJobRanks)  // would wrap in the int32 of a rank
        return out_of_range(
            fmt::format("--ranks: entry {} is {}, must be < {}", i, list[i], limits::kMaxJobRanks));
      ranks.emplace_back(static_cast<std::int32_t>(list[i]));
    }
  }
  auto mesh = REFIT_TRY_IN(Mesh::make(std::move(mesh_shape), std::move(ranks)),
                           o.ranks.empty() ? "--mesh" : "--ranks");
  auto placements = REFIT_TRY_IN(parse_placements(o.placements), "--placements");
  return REFIT_TRY_IN(Layout::make(std::move(shape), std::move(mesh), std::move(placements)), "--placements");
}

std::string join_placements(const Layout& l) {
  std::vector<std::string> names;
  for (const auto& p : l.placements()) names.push_back(p.to_string());
  return fmt::format("{}", fmt::join(names, ","));
}

void print_json(const Layout& l) {
  nlohmann::ordered_json out;
  out["shape"] = l.tensor_shape();
  out["mesh"] = l.mesh().shape();
  std::vector<std::string> names;
  for (const auto& p : l.placements()) names.push_back(p.to_string());
  out["placements"] = names;
  out["boxes"] = nlohmann::ordered_json::array();
  for (std::int64_t p = 0; p < l.mesh().size(); ++p) {
    const Box box = l.box_at_position(p);
    out["boxes"].push_back({{"rank", l.mesh().rank_at(p).value},
                            {"coord", l.mesh().coord_of_position(p)},
                            {"offset", box.offset},
                            {"extent", box.extent}});
  }
  fmt::print("{}\n", json_text(out));
}

void print_table(const Layout& l) {
  fmt::print("shape [{}]  mesh {}  placements {}\n", fmt::join(l.tensor_shape(), ", "),
             fmt::join(l.mesh().shape(), "x"), join_placements(l));
  fmt::print("{:>6}  {:<14} {:<18} {:<18} {:>12}\n", "rank", "coord", "offset", "extent", "elements");
  for (std::int64_t p = 0; p < l.mesh().size(); ++p) {
    const Box box = l.box_at_position(p);
    fmt::print("{:>6}  {:<14} {:<18} {:<18} {:>12}\n", l.mesh().rank_at(p).value,
               fmt::format("[{}]", fmt::join(l.mesh().coord_of_position(p), ",")),
               fmt::format("[{}]", fmt::join(box.offset, ",")),
               fmt::format("[{}]", fmt::join(box.extent, ",")), box.volume());
  }
}

}  // namespace

Action add_layout_command(CLI::App& app) {
  auto opts = std::make_shared<LayoutOptions>();
  auto* cmd = app.add_subcommand(
      "layout", "Show the box of a tensor that each rank of a mesh holds (DTensor semantics)");
  cmd->add_option("--shape", opts->shape, "Global tensor shape, e.g. 10,7")->required();
  cmd->add_option("--mesh", opts->mesh, "Mesh shape, row-major, e.g. 3x2")->required();
  cmd->add_option("--placements", opts->placements,
                  "One per mesh axis: R (replicate), S<dim> (shard tensor dim like torch.chunk), "
                  "S<dim>:<chunk> (parts of <chunk> elements) or S<dim>:<chunk>@<start> (parts of <chunk> "
                  "from <start> <= 0), e.g. S0,R or S0:192@-512")
      ->required();
  cmd->add_option("--ranks", opts->ranks,
                  "Global ranks at the mesh positions in row-major order (default 0..N-1)")
      ->check(non_empty());
  cmd->add_flag("--json", opts->json, "Print one JSON object on stdout");
  return [opts]() -> Result<void> {
    const auto layout = REFIT_TRY(build_layout(*opts));
    opts->json ? print_json(layout) : print_table(layout);
    return {};
  };
}

}  // namespace refit::cli
