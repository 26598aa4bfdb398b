// The StyleGAN training step's kernels of our own against their host references (double),
// outputs poisoned (NaN) first so that every value must be written: the minibatch standard
// deviation (kernels/mbstd.h) in its plain and dual forms, at the sizes the discriminator's
// epilogue uses (4 x 4 x 512, groups of min(4, n)), each run twice to show it repeats bit for
// bit; and the backward of SynthesisInput's Fourier features (kernels/fourier_backward.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "gpu_util.h"
#include "kernels/fourier_backward.h"
#include "kernels/mbstd.h"
#include "kernels/stylegan3.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

RefVec to_double(const std::vector<float>& v) {
  return RefVec(v.begin(), v.end());
}

const float* cf(const DeviceBuffer& b) {
  return static_cast<const float*>(b.get());
}
float* f(DeviceBuffer& b) {
  return static_cast<float*>(b.get());
}

// The extra channel (index c of rows c + 1) of y, and the rest.
void split_extra(const std::vector<float>& y, int c, std::vector<float>* extra,
                 std::vector<float>* rest) {
  for (size_t i = 0; i < y.size(); ++i)
    (i % size_t(c + 1) == size_t(c) ? extra : rest)->push_back(y[i]);
}
void split_extra(const RefVec& y, int c, RefVec* extra, RefVec* rest) {
  for (size_t i = 0; i < y.size(); ++i)
    (i % size_t(c + 1) == size_t(c) ? extra : rest)->push_back(y[i]);
}

// dy with only its extra channel kept (the part the statistics see).
std::vector<float> extra_only(std::vector<float> dy, int c) {
  for (size_t i = 0; i < dy.size(); ++i)
    if (i % size_t(c + 1) != size_t(c)) dy[i] = 0.f;
  return dy;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The primal (first) and tangent (second) halves of a stacked buffer.
template <typename V>
V half_of(const V& v, int which) {
  const size_t m = v.size() / 2;
  return V(v.begin() + long(which * m), v.begin() + long(which * m + m));
}

const int kBatches[] = {2, 8, 12, 64};
constexpr int kH = 4, kW = 4, kC = 512;

}  // namespace

TEST(GpuMbstd, ForwardAndBackwardMatchTheHostReference) {
  std::mt19937 rng(7);
  for (const int n : kBatches) {
    const int G = std::min(4, n);
    const size_t xs = size_t(n) * kH * kW * kC, ys = size_t(n) * kH * kW * (kC + 1);
    const std::vector<float> x = random_vector(xs, rng, -2, 2);
    DeviceBuffer x_d(x, DType::F32), y_d(ys, DType::F32);
    launch_mbstd_forward(cf(x_d), n, kH, kW, kC, G, f(y_d), nullptr);
    const std::vector<float> y = y_d.download();
    const RefVec y_ref = mbstd_forward_ref(to_double(x), n, kH, kW, kC, G);
    EXPECT_LT(rel_l2(y, y_ref), 1e-5) << "n " << n;
    std::vector<float> ye, yr;
    RefVec ye_ref, yr_ref;
    split_extra(y, kC, &ye, &yr);
    split_extra(y_ref, kC, &ye_ref, &yr_ref);
    EXPECT_LT(rel_l2(ye, ye_ref), 1e-5) << "n " << n << ": the statistic";
    EXPECT_EQ(rel_l2(yr, yr_ref), 0.0) << "n " << n << ": the copy of x";
    y_d.poison();
    launch_mbstd_forward(cf(x_d), n, kH, kW, kC, G, f(y_d), nullptr);
    EXPECT_TRUE(same_bits(y_d.download(), y)) << "n " << n << ": the forward did not repeat";

    for (int only_extra = 0; only_extra < 2; ++only_extra) {
      std::vector<float> dy = random_vector(ys, rng);
      if (only_extra) dy = extra_only(dy, kC);
      DeviceBuffer dy_d(dy, DType::F32), dx_d(xs, DType::F32);
      launch_mbstd_backward(cf(x_d), cf(dy_d), n, kH, kW, kC, G, f(dx_d), nullptr);
      const std::vector<float> dx = dx_d.download();
      const RefVec dx_ref = mbstd_backward_ref(to_double(x), to_double(dy), n, kH, kW, kC, G);
      EXPECT_LT(rel_l2(dx, dx_ref), 1e-5) << "n " << n << (only_extra ? " extra channel only" : "");
      dx_d.poison();
      launch_mbstd_backward(cf(x_d), cf(dy_d), n, kH, kW, kC, G, f(dx_d), nullptr);
      EXPECT_TRUE(same_bits(dx_d.download(), dx)) << "n " << n << ": the backward did not repeat";
    }
  }
  EXPECT_THROW(launch_mbstd_forward(nullptr, 6, kH, kW, kC, 4, nullptr, nullptr),
               std::invalid_argument);
}

TEST(GpuMbstd, DualFormsMatchTheHostReference) {
  std::mt19937 rng(8);
  for (const int n : kBatches) {
    const int G = std::min(4, n);
    const size_t xs = 2 * size_t(n) * kH * kW * kC, ys = 2 * size_t(n) * kH * kW * (kC + 1);
    const std::vector<float> x2 = random_vector(xs, rng, -2, 2);
    DeviceBuffer x_d(x2, DType::F32), y_d(ys, DType::F32);
    launch_mbstd_forward_dual(cf(x_d), n, kH, kW, kC, G, f(y_d), nullptr);
    const std::vector<float> y2 = y_d.download();
    const RefVec y2_ref = mbstd_forward_dual_ref(to_double(x2), n, kH, kW, kC, G);
    for (int which = 0; which < 2; ++which) {
      std::vector<float> ye, yr;
      RefVec ye_ref, yr_ref;
      split_extra(half_of(y2, which), kC, &ye, &yr);
      split_extra(half_of(y2_ref, which), kC, &ye_ref, &yr_ref);
      EXPECT_LT(rel_l2(ye, ye_ref), 1e-5) << "n " << n << " half " << which << ": the statistic";
      EXPECT_EQ(rel_l2(yr, yr_ref), 0.0) << "n " << n << " half " << which << ": the copy";
    }
    y_d.poison();
    launch_mbstd_forward_dual(cf(x_d), n, kH, kW, kC, G, f(y_d), nullptr);
    EXPECT_TRUE(same_bits(y_d.download(), y2)) << "n " << n << ": the dual forward did not repeat";

    // 0: all of dy2; 1: the extra channels alone (of both halves); 2: gd's extra channel alone.
    // For G = 2 the primal half's term through gd is 1e-8-small (two members: sd_dot is the
    // sign of x0 - x1 times (xd0 - xd1) / 2 but for the 1e-8 under the root) except at nearly
    // equal pairs, where it is large and ill-conditioned: variant 2 allows that half 1e-4 there
    // (a host replay of the kernels' float arithmetic gave at most 5e-6).
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<float> dy2 = random_vector(ys, rng);
      if (variant > 0) dy2 = extra_only(dy2, kC);
      if (variant == 2) std::fill(dy2.begin(), dy2.begin() + long(ys / 2), 0.f);
      DeviceBuffer dy_d(dy2, DType::F32), dx_d(xs, DType::F32);
      launch_mbstd_backward_dual(cf(x_d), cf(dy_d), n, kH, kW, kC, G, f(dx_d), nullptr);
      const std::vector<float> dx2 = dx_d.download();
      const RefVec dx2_ref =
          mbstd_backward_dual_ref(to_double(x2), to_double(dy2), n, kH, kW, kC, G);
      EXPECT_LT(rel_l2(half_of(dx2, 0), half_of(dx2_ref, 0)), variant == 2 && G == 2 ? 1e-4 : 1e-5)
          << "n " << n << " variant " << variant << ": primal half";
      EXPECT_LT(rel_l2(half_of(dx2, 1), half_of(dx2_ref, 1)), 1e-5)
          << "n " << n << " variant " << variant << ": tangent half";
      dx_d.poison();
      launch_mbstd_backward_dual(cf(x_d), cf(dy_d), n, kH, kW, kC, G, f(dx_d), nullptr);
      EXPECT_TRUE(same_bits(dx_d.download(), dx2))
          << "n " << n << ": the dual backward did not repeat";
    }
  }
}

// ---- Fourier features' backward -------------------------------------------------------------

namespace {

// n 2, c 64, size 36, sampling rate 16, bandwidth 2; radii from 0 to 10 (amplitudes clamped at
// 1, at 0, and in between), a transform near the identity.
struct FourierGpuCase {
  int n = 2, c = 64, size = 36;
  float sr = 16, bw = 2, scale = 0.37f;
  std::vector<float> t, transform, freqs, phases;
  explicit FourierGpuCase(std::mt19937& rng) {
    t = random_vector(size_t(n) * 4, rng, -0.5f, 0.5f);
    for (int i = 0; i < n; ++i) t[size_t(i) * 4] += 1.f;
    const float th = 0.2f;
    transform = {std::cos(th) + 0.02f,
                 -std::sin(th),
                 0.05f,
                 std::sin(th),
                 std::cos(th) - 0.01f,
                 -0.03f,
                 0.01f,
                 -0.02f,
                 1.f};
    std::uniform_real_distribution<float> radius(0.f, 10.f), angle(0.f, 6.2831853f);
    for (int ci = 0; ci < c; ++ci) {
      const float r = radius(rng), a = angle(rng);
      freqs.push_back(r * std::cos(a)), freqs.push_back(r * std::sin(a));
    }
    phases = random_vector(size_t(c), rng, -0.5f, 0.5f);
  }
};

}  // namespace

TEST(GpuFourierBackward, FeaturesAndTheirBackwardMatchTheHostReference) {
  std::mt19937 rng(9);
  const FourierGpuCase k(rng);
  DeviceBuffer t_d(k.t, DType::F32), tr_d(k.transform, DType::F32), f_d(k.freqs, DType::F32),
      p_d(k.phases, DType::F32), fp_d(size_t(k.n) * k.c * 4, DType::F32);
  launch_fourier_prepare(cf(t_d), cf(tr_d), cf(f_d), cf(p_d), k.n, k.c, k.sr, k.bw, f(fp_d),
                         nullptr);
  const std::vector<float> fp = fp_d.download();
  const size_t ys = size_t(k.n) * k.size * k.size * k.c;

  // The float32 forward with its scale, against the host and, at scale 1, against
  // launch_fourier_features' float32 output.
  DeviceBuffer y_d(ys, DType::F32), y1_d(ys, DType::F32), yref_d(ys, DType::F32);
  launch_fourier_features_f32(cf(fp_d), k.n, k.c, k.size, k.sr, k.scale, f(y_d), nullptr);
  EXPECT_LT(
      rel_l2(y_d.download(), fourier_features_ref(to_double(fp), k.n, k.c, k.size, k.sr, k.scale)),
      1e-5);
  launch_fourier_features_f32(cf(fp_d), k.n, k.c, k.size, k.sr, 1.f, f(y1_d), nullptr);
  launch_fourier_features(cf(fp_d), k.n, k.c, k.size, k.sr, DType::F32, yref_d.get(), nullptr);
  const std::vector<float> y1 = y1_d.download(), yref = yref_d.download();
  EXPECT_LT(rel_l2(y1, to_double(yref)), 1e-6);
  EXPECT_TRUE(same_bits(y1, yref)) << "not bit for bit launch_fourier_features (a contraction "
                                      "the compiler chose differently?)";

  // The features' backward.
  const std::vector<float> dy = random_vector(ys, rng);
  DeviceBuffer dy_d(dy, DType::F32), dfp_d(fp.size(), DType::F32);
  launch_fourier_features_backward(cf(fp_d), cf(dy_d), k.n, k.c, k.size, k.sr, k.scale, f(dfp_d),
                                   nullptr);
  const std::vector<float> dfp = dfp_d.download();
  const RefVec dfp_ref =
      fourier_features_backward_ref(to_double(fp), to_double(dy), k.n, k.c, k.size, k.sr, k.scale);
  EXPECT_LT(rel_l2(dfp, dfp_ref), 1e-5);
  for (int comp = 0; comp < 4; ++comp) {  // each of (fx, fy, phase, amplitude)
    std::vector<float> g;
    RefVec w;
    for (size_t i = size_t(comp); i < dfp.size(); i += 4)
      g.push_back(dfp[i]), w.push_back(dfp_ref[i]);
    EXPECT_LT(rel_l2(g, w), 1e-5) << "component " << comp;
  }
  dfp_d.poison();
  launch_fourier_features_backward(cf(fp_d), cf(dy_d), k.n, k.c, k.size, k.sr, k.scale, f(dfp_d),
                                   nullptr);
  EXPECT_TRUE(same_bits(dfp_d.download(), dfp)) << "the features' backward did not repeat";
}

TEST(GpuFourierBackward, PrepareBackwardMatchesTheHostReference) {
  std::mt19937 rng(10);
  const FourierGpuCase k(rng);
  // The reference's clamp decisions must be the kernel's: no radius within 1e-3 of an edge.
  const RefVec fp_ref =
      fourier_prepare_ref(to_double(k.t), to_double(k.transform), to_double(k.freqs),
                          to_double(k.phases), k.n, k.c, k.sr, k.bw);
  int low = 0, mid = 0, high = 0;
  for (size_t i = 0; i < fp_ref.size(); i += 4) {
    const double r = std::hypot(fp_ref[i], fp_ref[i + 1]);
    ASSERT_GT(std::min(std::abs(r - k.bw), std::abs(r - k.sr / 2)), 1e-3);
    (r < k.bw ? high : r > k.sr / 2 ? low : mid)++;
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(mid, 0);
  EXPECT_GT(high, 0);
  const std::vector<float> dfp = random_vector(size_t(k.n) * k.c * 4, rng);
  DeviceBuffer t_d(k.t, DType::F32), tr_d(k.transform, DType::F32), f_d(k.freqs, DType::F32),
      p_d(k.phases, DType::F32), dfp_d(dfp, DType::F32), dt_d(size_t(k.n) * 4, DType::F32);
  launch_fourier_prepare_backward(cf(t_d), cf(tr_d), cf(f_d), cf(p_d), cf(dfp_d), k.n, k.c, k.sr,
                                  k.bw, f(dt_d), nullptr);
  const std::vector<float> dt = dt_d.download();
  const RefVec dt_ref =
      fourier_prepare_backward_ref(to_double(k.t), to_double(k.transform), to_double(k.freqs),
                                   to_double(k.phases), to_double(dfp), k.n, k.c, k.sr, k.bw);
  EXPECT_LT(rel_l2(dt, dt_ref), 1e-5);
  dt_d.poison();
  launch_fourier_prepare_backward(cf(t_d), cf(tr_d), cf(f_d), cf(p_d), cf(dfp_d), k.n, k.c, k.sr,
                                  k.bw, f(dt_d), nullptr);
  EXPECT_TRUE(same_bits(dt_d.download(), dt)) << "the prepare backward did not repeat";
}
