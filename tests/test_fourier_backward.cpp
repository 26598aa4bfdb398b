// The backward of SynthesisInput's Fourier features on the host (kernels/fourier_backward_ref.h):
// the forward references against fourier_input_reference (kernels/stylegan3_ref.h), and the
// gradients of the features (with respect to fp) and of fourier_prepare (with respect to t)
// against central finite differences in double, with amplitudes clamped at 1, clamped at 0 and
// in between (none near a clamp's edge), and torch's clamp convention at the edges themselves.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "fd_util.h"

#include "kernels/fourier_backward_ref.h"
#include "kernels/stylegan3_ref.h"

using namespace cnnbench;

namespace {

using fd::dot;
using fd::fd_grad;
using fd::randn;
using fd::rel_l2;

// n 2, c 8, size 6; sampling rate 16, bandwidth 2: amplitude 1 below |f| = 2, 0 above 8, linear
// in between. A transform near the identity (its third row too), t away from the identity.
struct Case {
  int n = 2, c = 8, size = 6;
  double sr = 16, bw = 2, scale = 0.7;
  RefVec t, transform, freqs, phases;
  Case() {
    t = randn(size_t(n) * 4, 1, 0.4);
    for (int i = 0; i < n; ++i) t[size_t(i) * 4] += 1;
    const double th = 0.1;
    transform = {std::cos(th) + 0.02,
                 -std::sin(th),
                 0.05,
                 std::sin(th),
                 std::cos(th) - 0.01,
                 -0.03,
                 0.01,
                 -0.02,
                 1};
    // Radii (before the transform) 0 (r 0: no gradient), two clamped at 1, three in between,
    // two clamped at 0, in random directions.
    const double radii[8] = {0, 1.0, 1.5, 3, 4.5, 6, 9, 10.5};
    std::mt19937 gen(2);
    std::uniform_real_distribution<double> angle(0, 6.283185307179586);
    for (double r : radii) {
      const double a = angle(gen);
      freqs.push_back(r * std::cos(a)), freqs.push_back(r * std::sin(a));
    }
    phases = randn(size_t(c), 3, 0.3);
  }
  RefVec prepare(const RefVec& tt) const {
    return fourier_prepare_ref(tt, transform, freqs, phases, n, c, sr, bw);
  }
  RefVec features(const RefVec& fp) const {
    return fourier_features_ref(fp, n, c, size, sr, scale);
  }
};

}  // namespace

// The two forward references composed are SynthesisInput's features: fourier_input_reference
// with an identity affine (w = t) and the identity mixing (sqrt(C) I), NCHW there, NHWC here.
TEST(FourierBackwardRef, ForwardMatchesTheInputReference) {
  const Case k;
  const std::vector<float> w(k.t.begin(), k.t.end());
  std::vector<float> aw(16, 0.f), ab(4, 0.f), eye(size_t(k.c) * k.c, 0.f);
  for (int i = 0; i < 4; ++i) aw[size_t(i) * 4 + i] = 1.f;
  for (int i = 0; i < k.c; ++i) eye[size_t(i) * k.c + i] = float(std::sqrt(double(k.c)));
  const std::vector<float> tr(k.transform.begin(), k.transform.end()),
      fr(k.freqs.begin(), k.freqs.end()), ph(k.phases.begin(), k.phases.end());
  // The reference takes float parameters: give ours the same rounded values.
  Case kf = k;
  kf.t.assign(w.begin(), w.end());
  kf.transform.assign(tr.begin(), tr.end());
  kf.freqs.assign(fr.begin(), fr.end());
  kf.phases.assign(ph.begin(), ph.end());
  kf.scale = 1;
  const std::vector<float> want =
      fourier_input_reference(w, k.n, 4, aw, ab, 1.f, tr, fr, ph, eye, k.c, k.size, k.sr, k.bw);
  const RefVec got = kf.features(kf.prepare(kf.t));
  ASSERT_EQ(got.size(), want.size());
  for (int ni = 0; ni < k.n; ++ni)
    for (int ci = 0; ci < k.c; ++ci)
      for (int p = 0; p < k.size * k.size; ++p)
        EXPECT_NEAR(got[(size_t(ni) * k.size * k.size + p) * k.c + ci],
                    want[(size_t(ni) * k.c + ci) * k.size * k.size + p], 2e-6)
            << "n " << ni << " c " << ci << " p " << p;
}

TEST(FourierBackwardRef, FeaturesBackwardMatchesFiniteDifferences) {
  const Case k;
  RefVec fp = k.prepare(k.t);
  const RefVec dy = randn(size_t(k.n) * k.size * k.size * k.c, 4);
  const RefVec got = fourier_features_backward_ref(fp, dy, k.n, k.c, k.size, k.sr, k.scale);
  const RefVec want = fd_grad([&](const RefVec& v) { return dot(dy, k.features(v)); }, fp);
  EXPECT_LT(rel_l2(got, want), 1e-6);
  // Per component (fx, fy, phase, amplitude), so that a small one is not hidden by the others.
  for (int comp = 0; comp < 4; ++comp) {
    RefVec g, w;
    for (size_t i = comp; i < got.size(); i += 4) g.push_back(got[i]), w.push_back(want[i]);
    EXPECT_LT(rel_l2(g, w), 1e-6) << "component " << comp;
  }
}

TEST(FourierBackwardRef, PrepareBackwardMatchesFiniteDifferences) {
  const Case k;
  const RefVec fp = k.prepare(k.t);
  // Every image has amplitudes clamped at 1, at 0 and in between, none within 0.05 of an edge
  // (a step of 1e-6 in t moves |f| by far less).
  for (int ni = 0; ni < k.n; ++ni) {
    int low = 0, mid = 0, high = 0;
    for (int ci = 0; ci < k.c; ++ci) {
      const double* q = &fp[(size_t(ni) * k.c + ci) * 4];
      const double r = std::hypot(q[0], q[1]);
      EXPECT_GT(std::min(std::abs(r - k.bw), std::abs(r - k.sr / 2)), 0.05) << ni << " " << ci;
      (r < k.bw ? high : r > k.sr / 2 ? low : mid)++;
    }
    EXPECT_GE(low, 1);
    EXPECT_GE(mid, 2);
    EXPECT_GE(high, 2);
  }
  const RefVec dfp = randn(fp.size(), 5);
  const RefVec got =
      fourier_prepare_backward_ref(k.t, k.transform, k.freqs, k.phases, dfp, k.n, k.c, k.sr, k.bw);
  const RefVec want = fd_grad([&](const RefVec& v) { return dot(dfp, k.prepare(v)); }, k.t);
  EXPECT_LT(rel_l2(got, want), 1e-6);
  // Through the amplitudes alone (dfp's other components zero).
  RefVec damp(dfp.size(), 0.0);
  for (size_t i = 3; i < dfp.size(); i += 4) damp[i] = dfp[i];
  const RefVec got_a =
      fourier_prepare_backward_ref(k.t, k.transform, k.freqs, k.phases, damp, k.n, k.c, k.sr, k.bw);
  const RefVec want_a = fd_grad([&](const RefVec& v) { return dot(damp, k.prepare(v)); }, k.t);
  EXPECT_LT(rel_l2(got_a, want_a), 1e-6);
  double norm_a = 0;
  for (double v : want_a) norm_a += v * v;
  EXPECT_GT(norm_a, 1e-4);  // the amplitudes' part is not trivially zero
}

// dt from dy through both backward stages against the finite differences of the features of
// the prepared t.
TEST(FourierBackwardRef, ComposedBackwardMatchesFiniteDifferences) {
  const Case k;
  const RefVec dy = randn(size_t(k.n) * k.size * k.size * k.c, 6);
  const RefVec fp = k.prepare(k.t);
  const RefVec dfp = fourier_features_backward_ref(fp, dy, k.n, k.c, k.size, k.sr, k.scale);
  const RefVec got =
      fourier_prepare_backward_ref(k.t, k.transform, k.freqs, k.phases, dfp, k.n, k.c, k.sr, k.bw);
  const RefVec want =
      fd_grad([&](const RefVec& v) { return dot(dy, k.features(k.prepare(v))); }, k.t);
  EXPECT_LT(rel_l2(got, want), 1e-6);
}

// torch's clamp passes the gradient where lo <= v <= hi: at |f| = bw (v = 1) and |f| = sr / 2
// (v = 0) exactly, the amplitude's gradient flows; just inside the clamped ranges it does not.
// t = (1, 0, 0, 0), transform diag(1, 0.5, 1), freqs (3, 8): f = (3, 4), |f| = 5. Only t[1] moves
// |f| (it rotates by d theta = d t1 before the anisotropic transform): d|f| / d t1 = 0.75 * 3 *
// 8 / 5, so d amp / d t1 = -0.75 * 24 / (5 (sr / 2 - bw)); t[0] only rescales what the
// normalisation undoes, t[2] and t[3] only move the phase.
TEST(FourierBackwardRef, ClampPassesTheGradientAtItsEdgesOnly) {
  const RefVec t = {1, 0, 0, 0}, tr = {1, 0, 0, 0, 0.5, 0, 0, 0, 1}, freqs = {3, 8}, phases = {0};
  const RefVec dfp = {0, 0, 0, 1};  // the amplitude's gradient alone
  ASSERT_EQ(fourier_prepare_ref(t, tr, freqs, phases, 1, 1, 16, 5)[3], 1.0);
  ASSERT_EQ(fourier_prepare_ref(t, tr, freqs, phases, 1, 1, 10, 2)[3], 0.0);
  const struct {
    double sr, bw, want;
  } cases[] = {{16, 5, -1.2},  // |f| = bw: the edge at 1
               {10, 2, -1.2},  // |f| = sr / 2: the edge at 0
               {16, 2, -0.6},  // in between
               {16, 5.01, 0},  // clamped at 1
               {9.98, 2, 0}};  // clamped at 0
  for (const auto& k : cases) {
    const RefVec dt = fourier_prepare_backward_ref(t, tr, freqs, phases, dfp, 1, 1, k.sr, k.bw);
    EXPECT_NEAR(dt[1], k.want, 1e-12) << "sr " << k.sr << " bw " << k.bw;
    EXPECT_EQ(dt[0], 0.0);
    EXPECT_EQ(dt[2], 0.0);
    EXPECT_EQ(dt[3], 0.0);
  }
}
