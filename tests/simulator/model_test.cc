// The model's task table (model.h) keeps each task's resources, deps and label in shared arrays,
// a task's lists ending where the next task's begin. Whatever the lists' lengths (empty ones and
// the last task's included), each task reads back exactly the spec it was added with, resources
// without repeats; a label equal to the previous task's is stored once.
#include "refit/simulator/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace refit::sim {
namespace {

// The resources a flow crosses, each once, in first-listed order: the reference for Model::resources.
std::vector<ResourceId> distinct(const std::vector<ResourceId>& listed) {
  std::vector<ResourceId> out;
  for (const ResourceId r : listed)
    if (std::ranges::find(out, r) == out.end()) out.push_back(r);
  return out;
}

TEST(Model, EveryTaskReadsBackItsSpecWhateverItsListsLengths) {
  Model m;
  for (int r = 0; r < 4; ++r) m.add_resource("r" + std::to_string(r), BytesPerSecond{1e9});
  std::mt19937 rng(7);
  struct Given {
    std::vector<ResourceId> resources;
    std::vector<TaskId> deps;
    std::string label;
  };
  std::vector<Given> given;
  for (int t = 0; t < 200; ++t) {
    Given g;
    for (auto n = rng() % 5; n > 0; --n)
      g.resources.push_back(ResourceId{static_cast<std::int32_t>(rng() % 4)});
    for (auto n = t == 0 ? 0 : rng() % 4; n > 0; --n)
      g.deps.push_back(TaskId{static_cast<std::int32_t>(rng() % t)});
    // Runs of equal labels, empty ones among them, as the pieces of one transfer have.
    g.label = rng() % 3 == 0 && t > 0 ? given.back().label : (rng() % 4 == 0 ? "" : "#" + std::to_string(t));
    m.add_task(TaskSpec{.resources = g.resources, .deps = g.deps, .label = g.label});
    given.push_back(std::move(g));
  }
  for (std::int32_t t = 0; t < m.task_count(); ++t) {
    const auto& g = given[static_cast<std::size_t>(t)];
    EXPECT_TRUE(std::ranges::equal(m.resources(TaskId{t}), distinct(g.resources))) << t;
    EXPECT_TRUE(std::ranges::equal(m.deps(TaskId{t}), g.deps)) << t;
    EXPECT_EQ(m.label(TaskId{t}), g.label) << t;
  }
}

TEST(Model, ALabelEqualToThePreviousTasksIsStoredOnce) {
  // Tasks 0 and 1 read "#5 0->1", task 2 "#6 0->1", task 3 "#5 0->1" again: 0 and 1 share one
  // copy, 3 (not next to 0) has its own.
  Model m;
  for (const char* label : {"#5 0->1", "#5 0->1", "#6 0->1", "#5 0->1"}) m.add_task(TaskSpec{.label = label});
  EXPECT_EQ(m.label(TaskId{0}).data(), m.label(TaskId{1}).data());
  EXPECT_NE(m.label(TaskId{0}).data(), m.label(TaskId{3}).data());
  EXPECT_EQ(m.label(TaskId{2}), "#6 0->1");
  EXPECT_EQ(m.label(TaskId{3}), "#5 0->1");
}

}  // namespace
}  // namespace refit::sim
