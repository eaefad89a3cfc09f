// Layouts against PyTorch itself: tests/data/dtensor/local_boxes.json holds 600 random layouts
// (uneven splits, empty shards, replicated axes, several mesh axes sharding one dim) with the
// local shape and global offset torch computes at every mesh position
// (tests/core/dtensor_fixture.py made it). Every box refit computes must equal torch's, offsets
// of empty shards included: torch puts those at the dim's global size.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "refit/core/layout.h"

namespace refit {
namespace {

nlohmann::json fixture() {
  std::ifstream in(std::string(REFIT_TEST_DATA_DIR) + "/dtensor/local_boxes.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::string placements_of(const nlohmann::json& c) {
  std::string out;
  for (const auto& p : c["placements"]) out += (out.empty() ? "" : ",") + p.get<std::string>();
  return out;
}

TEST(DtensorConformance, EveryLocalBoxIsTorchs) {
  const auto data = fixture();
  std::int64_t positions = 0;
  std::int64_t empty = 0;
  for (const auto& c : data["cases"]) {
    const auto shape = c["shape"].get<Shape>();
    const auto mesh = Mesh::make(c["mesh"].get<std::vector<std::int64_t>>()).value();
    const auto layout = Layout::make(shape, mesh, parse_placements(placements_of(c)).value()).value();
    for (std::size_t p = 0; p < c["local_shapes"].size(); ++p) {
      const Box box = layout.box_at_position(static_cast<std::int64_t>(p));
      ASSERT_EQ(box.extent, c["local_shapes"][p].get<Shape>())
          << c.dump() << " position " << p << ": local shape";
      ASSERT_EQ(box.offset, c["global_offsets"][p].get<Shape>())
          << c.dump() << " position " << p << ": global offset";
      ++positions;
      empty += box.empty() ? 1 : 0;
    }
  }
  EXPECT_EQ(data["cases"].size(), 600u);
  EXPECT_GT(empty, 1000);  // the fixture exercises empty shards
  EXPECT_GT(positions, 8000);
}

}  // namespace
}  // namespace refit
