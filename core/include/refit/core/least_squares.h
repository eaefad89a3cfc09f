#pragma once
// Weighted linear least squares for the few-column fits of measured costs (a calibration's
// latency, overhead per chunk and bandwidth; a benchmark's cost per chunk and per step).
#include <optional>
#include <span>
#include <vector>

namespace refit {

// The p minimising sum_i w[i] (p . rows[i] - t[i])^2: normal equations, each column scaled to
// its largest magnitude so that byte counts and chunk counts meet as equals, solved by Gaussian
// elimination with partial pivoting. Empty when the columns are (nearly) dependent: Hadamard's
// ratio det(M) / prod(M_jj) of the scaled normal matrix M, 1 for orthogonal columns, below 1e-9.
// Preconditions: rows, t and w of one length, at least one row, every row of one length.
std::optional<std::vector<double>> least_squares(std::span<const std::vector<double>> rows,
                                                 std::span<const double> t, std::span<const double> w);

}  // namespace refit
