// The minibatch standard deviation's host references (kernels/mbstd_ref.h): the forward by hand
// (the grouping i % (n / G)), and every derivative against central finite differences in double
// of the forward it differentiates: the backward, the dual forward's tangent (the derivative of
// s along xd) and the dual backward's two halves (the gradient of sum(gp * y2[:n]) + sum(gd *
// y2[n:]) with respect to x and xd). Each check asserts a relative L2 error under 1e-6; the
// last test shows that the check rejects a sign flip or a missing 1/G.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "fd_util.h"

#include "kernels/mbstd_ref.h"

using namespace cnnbench;

namespace {

using fd::dot;
using fd::fd_grad;
using fd::randn;
using fd::rel_l2;

struct Shape {
  int n, h, w, c, group;
  double x_scale;  // of the random x
  size_t x_size() const { return size_t(n) * h * w * c; }
  size_t y_size() const { return size_t(n) * h * w * (c + 1); }
};
// One group of 4, three groups of 3, two groups of 4 with h != w (so that a swapped index
// shows), and three groups of 2. For two members sd_dot is sign(x0 - x1) (xd0 - xd1) / 2 but
// for the 1e-8 under the root, so the dual backward's primal term through gd is of order 1e-8 /
// sd^3: with x of scale 1 that is below the finite differences' rounding; with x of scale 0.01
// (sd about 0.007) it is large enough to be checked to 1e-6 (and still smooth at a step of
// 1e-6).
const Shape kShapes[] = {
    {4, 2, 3, 3, 4, 1.0}, {9, 2, 3, 3, 3, 1.0}, {8, 3, 2, 2, 4, 1.0}, {6, 2, 2, 3, 2, 0.01}};

RefVec random_x(const Shape& s, size_t count, unsigned seed) {
  RefVec x = randn(count, seed);
  for (double& v : x) v *= s.x_scale;
  return x;
}

// dy with its extra channel (the only part the statistics see) alone, the rest zero.
RefVec extra_only(RefVec dy, int c) {
  for (size_t i = 0; i < dy.size(); ++i)
    if (i % size_t(c + 1) != size_t(c)) dy[i] = 0;
  return dy;
}

}  // namespace

// Two groups of two, one pixel, one channel: samples 0 and 2 are a group, 1 and 3 the other
// (NVlabs' reshape(G, -1, ...)), not 0 and 1.
TEST(MbstdRef, ForwardGroupsByIModuloNOverG) {
  const RefVec x = {0, 10, 2, 10};
  const RefVec y = mbstd_forward_ref(x, 4, 1, 1, 1, 2);
  ASSERT_EQ(y.size(), 8u);
  const double s0 = std::sqrt(1 + kMbstdEps), s1 = std::sqrt(kMbstdEps);
  const double want[8] = {0, s0, 10, s1, 2, s0, 10, s1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[size_t(i)], want[i], 1e-15) << i;
  // The mean over (h, w, ch) of the per-element deviations, broadcast over (h, w).
  const RefVec x2 = {1, 5, 3, 9, 7, 6, 2, 1};  // n 2 (one group), h 2, w 1, c 2
  const RefVec y2 = mbstd_forward_ref(x2, 2, 2, 1, 2, 2);
  // Members 0 and 1, elements (1, 7), (5, 6), (3, 2), (9, 1): deviations 3, 0.5, 0.5, 4.
  const double s =
      (std::sqrt(9 + kMbstdEps) + 2 * std::sqrt(0.25 + kMbstdEps) + std::sqrt(16 + kMbstdEps)) / 4;
  const RefVec want2 = {1, 5, s, 3, 9, s, 7, 6, s, 2, 1, s};
  ASSERT_EQ(y2.size(), want2.size());
  for (size_t i = 0; i < want2.size(); ++i) EXPECT_NEAR(y2[i], want2[i], 1e-14) << i;
  EXPECT_THROW(mbstd_forward_ref(RefVec(6), 3, 1, 1, 2, 2), std::invalid_argument);
}

TEST(MbstdRef, BackwardMatchesFiniteDifferences) {
  unsigned seed = 1;
  for (const Shape& s : kShapes)
    for (int only_extra = 0; only_extra < 2; ++only_extra) {
      const RefVec x = random_x(s, s.x_size(), seed++);
      RefVec dy = randn(s.y_size(), seed++);
      if (only_extra) dy = extra_only(dy, s.c);
      const RefVec got = mbstd_backward_ref(x, dy, s.n, s.h, s.w, s.c, s.group);
      const RefVec want = fd_grad(
          [&](const RefVec& v) {
            return dot(dy, mbstd_forward_ref(v, s.n, s.h, s.w, s.c, s.group));
          },
          x, 1e-6 * s.x_scale);
      EXPECT_LT(rel_l2(got, want), 1e-6)
          << "n " << s.n << " G " << s.group << (only_extra ? " extra channel only" : "");
    }
}

// The dual forward: the primal half is the forward, the tangent half is (xd, the derivative of
// s along xd).
TEST(MbstdRef, DualForwardTangentMatchesFiniteDifferences) {
  unsigned seed = 100;
  for (const Shape& s : kShapes) {
    const RefVec x = random_x(s, s.x_size(), seed++), xd = randn(s.x_size(), seed++);
    RefVec x2 = x;
    x2.insert(x2.end(), xd.begin(), xd.end());
    const RefVec y2 = mbstd_forward_dual_ref(x2, s.n, s.h, s.w, s.c, s.group);
    ASSERT_EQ(y2.size(), 2 * s.y_size());
    const RefVec y = mbstd_forward_ref(x, s.n, s.h, s.w, s.c, s.group);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y2[i], y[i]) << "primal half at " << i;
    // y's derivative along xd, by central differences of the forward.
    const double step = 1e-6 * s.x_scale;
    RefVec xp = x, xm = x;
    for (size_t i = 0; i < x.size(); ++i) xp[i] += step * xd[i], xm[i] -= step * xd[i];
    const RefVec yp = mbstd_forward_ref(xp, s.n, s.h, s.w, s.c, s.group);
    const RefVec ym = mbstd_forward_ref(xm, s.n, s.h, s.w, s.c, s.group);
    RefVec want(y.size()), got_extra, want_extra;
    for (size_t i = 0; i < y.size(); ++i) {
      want[i] = (yp[i] - ym[i]) / (2 * step);
      if (i % size_t(s.c + 1) == size_t(s.c))
        got_extra.push_back(y2[y.size() + i]), want_extra.push_back(want[i]);
    }
    const RefVec tangent(y2.begin() + long(y.size()), y2.end());
    EXPECT_LT(rel_l2(tangent, want), 1e-6) << "n " << s.n << " G " << s.group;
    EXPECT_LT(rel_l2(got_extra, want_extra), 1e-6) << "n " << s.n << " G " << s.group;
  }
}

// The dual backward, both halves, against the gradient of
// L = sum(gp * y2[:n]) + sum(gd * y2[n:]) with respect to x2 = (x, xd).
TEST(MbstdRef, DualBackwardMatchesFiniteDifferences) {
  unsigned seed = 200;
  for (const Shape& s : kShapes)
    for (int variant = 0; variant < 3; ++variant) {
      // 0: all of dy2 random; 1: only gd's extra channel (the terms through sd_dot alone);
      // 2: only gp's extra channel (the ordinary backward's statistics term alone).
      RefVec x2 = random_x(s, s.x_size(), seed++);
      const RefVec xd = randn(s.x_size(), seed++);
      x2.insert(x2.end(), xd.begin(), xd.end());
      RefVec dy2 = randn(2 * s.y_size(), seed++);
      if (variant > 0) {
        dy2 = extra_only(dy2, s.c);
        const size_t zero_from = variant == 1 ? 0 : s.y_size();
        for (size_t i = 0; i < s.y_size(); ++i) dy2[zero_from + i] = 0;
      }
      const RefVec got = mbstd_backward_dual_ref(x2, dy2, s.n, s.h, s.w, s.c, s.group);
      const RefVec want = fd_grad(
          [&](const RefVec& v) {
            return dot(dy2, mbstd_forward_dual_ref(v, s.n, s.h, s.w, s.c, s.group));
          },
          x2, 1e-6 * s.x_scale);
      ASSERT_EQ(got.size(), want.size());
      const RefVec got_p(got.begin(), got.begin() + long(s.x_size()));
      const RefVec want_p(want.begin(), want.begin() + long(s.x_size()));
      const RefVec got_d(got.begin() + long(s.x_size()), got.end());
      const RefVec want_d(want.begin() + long(s.x_size()), want.end());
      EXPECT_LT(rel_l2(got_p, want_p), 1e-6)
          << "primal half, n " << s.n << " G " << s.group << " variant " << variant;
      if (variant != 2)  // variant 2: the tangent half's gradient is zero
        EXPECT_LT(rel_l2(got_d, want_d), 1e-6)
            << "tangent half, n " << s.n << " G " << s.group << " variant " << variant;
      else
        for (double v : got_d) EXPECT_EQ(v, 0.0);
      // The ordinary backward is the primal half's gradient when gd is zero.
      if (variant == 2) {
        const RefVec gp(dy2.begin(), dy2.begin() + long(s.y_size()));
        const RefVec x(x2.begin(), x2.begin() + long(s.x_size()));
        EXPECT_LT(rel_l2(mbstd_backward_ref(x, gp, s.n, s.h, s.w, s.c, s.group), got_p), 1e-12);
      }
    }
}

// The checks above have the power to reject a wrong formula: the statistics term of the
// backward with its sign flipped, and the dual backward's primal term through sd_dot without
// its 1/G (as the brief first wrote it), are both far outside the 1e-6 tolerance.
TEST(MbstdRef, FiniteDifferenceChecksRejectWrongFormulas) {
  const Shape s = kShapes[2];  // G 4
  const RefVec x = randn(s.x_size(), 300);
  const RefVec dy = extra_only(randn(s.y_size(), 301), s.c);
  RefVec flipped = mbstd_backward_ref(x, dy, s.n, s.h, s.w, s.c, s.group);
  for (double& v : flipped) v = -v;  // dy[..., :c] is zero: all of dx is the statistics term
  const RefVec want = fd_grad(
      [&](const RefVec& v) { return dot(dy, mbstd_forward_ref(v, s.n, s.h, s.w, s.c, s.group)); },
      x);
  EXPECT_GT(rel_l2(flipped, want), 1.0);

  // Only gd's extra channel: the primal half of dx2 is then Gd / (G K) (ydot / sd - A y /
  // (G sd^3)) alone; times G is the formula without the 1/G.
  const RefVec x2 = randn(2 * s.x_size(), 302);
  RefVec dy2(2 * s.y_size(), 0.0);
  const RefVec gd = extra_only(randn(s.y_size(), 303), s.c);
  std::copy(gd.begin(), gd.end(), dy2.begin() + long(s.y_size()));
  const RefVec got = mbstd_backward_dual_ref(x2, dy2, s.n, s.h, s.w, s.c, s.group);
  const RefVec fd = fd_grad(
      [&](const RefVec& v) {
        return dot(dy2, mbstd_forward_dual_ref(v, s.n, s.h, s.w, s.c, s.group));
      },
      x2);
  RefVec got_p(got.begin(), got.begin() + long(s.x_size()));
  const RefVec fd_p(fd.begin(), fd.begin() + long(s.x_size()));
  EXPECT_LT(rel_l2(got_p, fd_p), 1e-6);
  for (double& v : got_p) v *= s.group;
  EXPECT_GT(rel_l2(got_p, fd_p), 1.0);
}
