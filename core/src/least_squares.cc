#include "refit/core/least_squares.h"

#include <algorithm>
#include <cmath>

namespace refit {
namespace {

using Augmented = std::vector<std::vector<double>>;  // [M | A'Wt], n rows of n + 1

// The normal equations of the columns divided by `scale`.
Augmented normal_equations(std::span<const std::vector<double>> rows, std::span<const double> t,
                           std::span<const double> w, const std::vector<double>& scale) {
  const std::size_t n = scale.size();
  Augmented m(n, std::vector<double>(n + 1, 0.0));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t k = 0; k < n; ++k) m[j][k] += w[i] * rows[i][j] / scale[j] * rows[i][k] / scale[k];
      m[j][n] += w[i] * rows[i][j] / scale[j] * t[i];
    }
  return m;
}

// Eliminates below the diagonal in place; returns the determinant (up to its sign).
double eliminate(Augmented& m) {
  const std::size_t n = m.size();
  double determinant = 1.0;
  for (std::size_t j = 0; j < n; ++j) {
    std::size_t pivot = j;
    for (std::size_t i = j + 1; i < n; ++i)
      if (std::abs(m[i][j]) > std::abs(m[pivot][j])) pivot = i;
    std::swap(m[j], m[pivot]);
    determinant *= m[j][j];
    for (std::size_t i = j + 1; i < n; ++i) {
      const double f = m[i][j] / m[j][j];
      for (std::size_t k = j; k <= n; ++k) m[i][k] -= f * m[j][k];
    }
  }
  return determinant;
}

}  // namespace

std::optional<std::vector<double>> least_squares(std::span<const std::vector<double>> rows,
                                                 std::span<const double> t, std::span<const double> w) {
  const std::size_t n = rows.front().size();
  std::vector<double> scale(n, 0.0);
  for (const auto& r : rows)
    for (std::size_t j = 0; j < n; ++j) scale[j] = std::max(scale[j], std::abs(r[j]));
  if (std::ranges::find(scale, 0.0) != scale.end()) return std::nullopt;  // a column of zeros
  Augmented m = normal_equations(rows, t, w, scale);
  double diagonal = 1.0;
  for (std::size_t j = 0; j < n; ++j) diagonal *= m[j][j];
  if (!(std::abs(eliminate(m)) > 1e-9 * diagonal)) return std::nullopt;  // also a nan from a zero pivot
  std::vector<double> p(n);
  for (std::size_t j = n; j-- > 0;) {
    double v = m[j][n];
    for (std::size_t k = j + 1; k < n; ++k) v -= m[j][k] * p[k];
    p[j] = v / m[j][j];
  }
  for (std::size_t j = 0; j < n; ++j) p[j] /= scale[j];
  return p;
}

}  // namespace refit
