// Weighted least squares against answers known in advance: points on a plane give it back exactly
// under weights as unequal as a calibration's; a weight decides between two inconsistent points in
// proportion; and dependent columns (one the double of another, or zero) give no answer.
#include "refit/core/least_squares.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace refit {
namespace {

TEST(LeastSquares, PointsOnAPlaneGiveItBackUnderUnequalWeights) {
  // 200 random planes t = a + b x + c y through 3 to 8 random points with x up to 2^32 and y up to
  // 512 (bytes and chunk counts), weights in [1e-2, 1e2] (a calibration's 1 / t^2 spans 1e4): p =
  // (a, b, c) to 1e-9.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> coef(0.1, 10), x(1, 4.3e9), y(1, 512), logw(-2, 2);
  for (int trial = 0; trial < 200; ++trial) {
    const double a = coef(rng), b = coef(rng) * 1e-9, c = coef(rng) * 1e-3;
    std::vector<std::vector<double>> rows;
    std::vector<double> t, w;
    for (int i = 0; i < 3 + trial % 6; ++i) {
      const double xi = x(rng), yi = y(rng);
      rows.push_back({1.0, xi, yi});
      t.push_back(a + b * xi + c * yi);
      w.push_back(std::pow(10.0, logw(rng)));
    }
    const auto p = least_squares(rows, t, w);
    ASSERT_TRUE(p) << "trial " << trial;
    EXPECT_NEAR((*p)[0], a, 1e-9 * a + 1e-9);
    EXPECT_NEAR((*p)[1], b, 1e-9 * b);
    EXPECT_NEAR((*p)[2], c, 1e-9 * c);
  }
}

TEST(LeastSquares, AWeightPullsTheFitTowardsItsPoint) {
  // One column of ones: the fit is the weighted mean. t = 1 with weight 3 and t = 5 with weight 1
  // give (3 x 1 + 1 x 5) / 4 = 2.
  const std::vector<std::vector<double>> rows{{1.0}, {1.0}};
  const std::vector<double> t{1.0, 5.0}, w{3.0, 1.0};
  const auto p = least_squares(rows, t, w);
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ((*p)[0], 2.0);
}

TEST(LeastSquares, DependentColumnsGiveNoAnswer) {
  // The third column is twice the second, so any split of their sum fits; a column of zeros
  // tells nothing of its coefficient.
  const std::vector<double> t{1.0, 2.0, 3.0}, w{1.0, 1.0, 1.0};
  const std::vector<std::vector<double>> doubled{{1.0, 1.0, 2.0}, {1.0, 2.0, 4.0}, {1.0, 3.0, 6.0}};
  EXPECT_FALSE(least_squares(doubled, t, w));
  const std::vector<std::vector<double>> zero{{1.0, 0.0}, {1.0, 0.0}, {1.0, 0.0}};
  EXPECT_FALSE(least_squares(zero, t, w));
}

}  // namespace
}  // namespace refit
