// Helpers of the CPU tests that check backward references against central finite differences
// (tests/test_mbstd.cpp, tests/test_fourier_backward.cpp): double vectors (RefVec).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "kernels/train_refs.h"

namespace cnnbench {
namespace fd {

inline RefVec randn(size_t count, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, scale);
  RefVec v(count);
  for (double& x : v) x = d(gen);
  return v;
}

inline double rel_l2(const RefVec& got, const RefVec& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

inline double dot(const RefVec& a, const RefVec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The gradient of f at x by central differences.
inline RefVec fd_grad(const std::function<double(const RefVec&)>& f, RefVec x, double step = 1e-6) {
  RefVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + step;
    const double up = f(x);
    x[i] = keep - step;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * step);
  }
  return g;
}

}  // namespace fd
}  // namespace cnnbench
