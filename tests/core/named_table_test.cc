#include "refit/core/named_table.h"

#include <array>
#include <string_view>

#include <gtest/gtest.h>

namespace refit {
namespace {

struct Entry {
  std::string_view name;
  int value;
};
constexpr std::array<Entry, 3> kTable{{{"alpha", 1}, {"beta", 2}, {"alpha", 3}}};

TEST(NamedTable, FindsTheFirstEntryOfANameAndNothingForAnother) {
  const Entry* alpha = find_named(kTable, "alpha", &Entry::name);
  ASSERT_NE(alpha, nullptr);
  EXPECT_EQ(alpha->value, 1);  // the first of the two "alpha"s, as a table lookup reads it
  EXPECT_EQ(find_named(kTable, "beta", &Entry::name)->value, 2);
  EXPECT_EQ(find_named(kTable, "gamma", &Entry::name), nullptr);
  EXPECT_EQ(find_named(kTable, "", &Entry::name), nullptr);
}

TEST(NamedTable, NamesAreTheTablesInOrder) {
  EXPECT_EQ(names_of(kTable, &Entry::name), "alpha, beta, alpha");
  EXPECT_EQ(names_of(std::array<Entry, 0>{}, &Entry::name), "");
}

}  // namespace
}  // namespace refit
