// StyleGAN3 CPU tests (issue 6): filtered_lrelu and the Fourier input on the host
// (kernels/stylegan3_ref.h) against cases whose answer is known independently, the host
// generator (networks/stylegan3_reference.h) on tiny graphs, and, where a case is given, against
// tools/stylegan3_reference.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "harness/check.h"
#include "harness/safetensors.h"
#include "kernels/fir1d.cuh"
#include "kernels/fir_design.h"
#include "kernels/stylegan3.h"
#include "kernels/stylegan3_ref.h"
#include "kernels/stylegan_ref.h"
#include "networks/stylegan3_reference.h"
#include "networks/weights.h"
#include "networks/zoo.h"

using namespace cnnbench;

namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<float> randn(size_t count, unsigned seed, float scale = 1.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(count);
  for (float& x : v) x = d(gen);
  return v;
}

std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

double lrelu_gain_clamp(double v, double slope, double gain, double clamp) {
  v = (v >= 0 ? v : v * slope) * gain;
  return clamp > 0 ? std::min(std::max(v, -clamp), clamp) : v;
}

// ---- filtered_lrelu -------------------------------------------------------------------------

// No filters, no resampling: bias, lrelu with gain, clamp, the output scale, element by element.
TEST(Stylegan3FilteredLrelu, IdentityFiltersAreBiasLreluGainClamp) {
  const int n = 2, c = 3, h = 5, w = 4;
  const std::vector<float> x = randn(size_t(n) * c * h * w, 1, 2.f);
  const std::vector<float> bias = {0.5f, -0.25f, 0.f};
  FilteredLreluSpec s;
  s.clamp = 1.5f, s.out_scale = 0.5f;
  // Empty filters and single-tap [1] filters both mean "none".
  for (int variant = 0; variant < 2; ++variant) {
    const std::vector<float> f = variant ? std::vector<float>{1.f} : std::vector<float>{};
    ASSERT_EQ(s.out_h(h, int(std::max<size_t>(f.size(), 1)), 1), h);
    const std::vector<float> y = filtered_lrelu_reference(x, n, c, h, w, f, f, false, bias, s);
    ASSERT_EQ(y.size(), x.size());
    int clamped = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const int ci = int(i / (h * w)) % c;
      const double raw = lrelu_gain_clamp(x[i] + double(bias[ci]), 0.2, std::sqrt(2.0), 0);
      clamped += std::abs(raw) > 1.5;
      const double want = lrelu_gain_clamp(x[i] + double(bias[ci]), 0.2, std::sqrt(2.0), 1.5) * 0.5;
      EXPECT_NEAR(y[i], want, 1e-6) << i;
    }
    EXPECT_GT(clamped, 0);  // the clamp was exercised
  }
}

// A constant input, far from the borders, comes out as lrelu(constant + bias) * gain when every
// filter keeps DC: the up filter [1, 3, 3, 1] / 8 (each polyphase sums to 1/2, so zero insertion
// with gain 4 keeps a constant), the down filter a designed Kaiser low-pass (sums to 1), and the
// radial 2D design too.
TEST(Stylegan3FilteredLrelu, ConstantStaysConstantAwayFromTheBorders) {
  const int n = 1, c = 2, h = 20, w = 20;
  const std::vector<float> bias = {0.1f, -0.9f};
  std::vector<float> x(size_t(n) * c * h * w, 0.3f);
  const std::vector<float> fu = {0.125f, 0.375f, 0.375f, 0.125f};
  for (int radial = 0; radial < 2; ++radial) {
    const std::vector<float> fd = to_float(design_lowpass_filter(12, 8, 6, 32, radial != 0));
    const int fut = 4, fdt = 12;
    FilteredLreluSpec s;
    s.up = 2, s.down = 2;
    s.pad_x0 = s.pad_y0 = 5, s.pad_x1 = s.pad_y1 = 4;
    s.clamp = 256.f;
    const std::vector<float> y = filtered_lrelu_reference(x, n, c, h, w, fu, fd, radial, bias, s);
    const int oh = s.out_h(h, fut, fdt), ow = s.out_w(w, fut, fdt);
    ASSERT_EQ(y.size(), size_t(n) * c * oh * ow);
    // Output row o reads the filtered rows o*down ... o*down + fdt - 1; filtered row t reads the
    // up-sampled rows t - pad0 ... t - pad0 + fut - 1, which must lie in [0, h * up).
    auto inside = [&](int o, int pad0, int len) {
      const int t0 = o * s.down, t1 = o * s.down + fdt - 1;
      return t0 - pad0 >= 0 && t1 - pad0 + fut - 1 <= len * s.up - 1;
    };
    int checked = 0;
    for (int ci = 0; ci < c; ++ci) {
      const double want = lrelu_gain_clamp(0.3 + double(bias[ci]), 0.2, std::sqrt(2.0), 0);
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          if (!inside(oy, s.pad_y0, h) || !inside(ox, s.pad_x0, w)) continue;
          ++checked;
          EXPECT_NEAR(y[(size_t(ci) * oh + oy) * ow + ox], want, 1e-5)
              << "radial " << radial << " c " << ci << " at " << oy << "," << ox;
        }
    }
    EXPECT_GE(checked, 2 * 9) << "too few interior pixels";
  }
  // Without resampling, a designed up filter (sum 1) keeps the constant too.
  const std::vector<float> f5 = to_float(design_lowpass_filter(5, 4, 4, 16));
  FilteredLreluSpec s1;
  const std::vector<float> y1 = filtered_lrelu_reference(x, n, c, h, w, f5, f5, false, bias, s1);
  const int o1 = s1.out_h(h, 5, 5);
  ASSERT_EQ(o1, h - 8);
  for (int ci = 0; ci < c; ++ci)
    for (int p = 0; p < o1 * o1; ++p)
      EXPECT_NEAR(y1[size_t(ci) * o1 * o1 + p],
                  lrelu_gain_clamp(0.3 + double(bias[ci]), 0.2, std::sqrt(2.0), 0), 1e-5);
}

// Up 2 with the asymmetric 2-tap filter f = [0.75, 0.25] and padding 1 / 0: per axis the
// zero-inserted, padded signal [0, x0, 0, x1, 0] under a true convolution with f gives
// [f0 x0, f1 x0, f0 x1, f1 x1], times the gain sqrt(up^2) = 2 per axis, so
// u[a][b] = 4 f[a % 2] f[b % 2] x[a / 2][b / 2]. (A correlation would swap f0 and f1.) Then
// the lrelu, its gain and the clamp per element, and a down 2 with [0.5, 0.5]: the mean of each
// 2 x 2 block.
TEST(Stylegan3FilteredLrelu, Up2WithAKnownFilterByHand) {
  const int n = 1, c = 1, h = 2, w = 2;
  const std::vector<float> x = {1.f, -2.f, 3.f, -4.f};
  const std::vector<float> fu = {0.75f, 0.25f}, fd = {0.5f, 0.5f};
  const double f[2] = {0.75, 0.25};
  FilteredLreluSpec s;
  s.up = 2;
  s.pad_x0 = s.pad_y0 = 1, s.pad_x1 = s.pad_y1 = 0;
  s.clamp = 5.f;
  // Up only.
  const std::vector<float> y = filtered_lrelu_reference(x, n, c, h, w, fu, {}, false, {}, s);
  ASSERT_EQ(s.out_h(h, 2, 1), 4);
  ASSERT_EQ(y.size(), 16u);
  double u[4][4];
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      u[a][b] = lrelu_gain_clamp(4 * f[a % 2] * f[b % 2] * x[(a / 2) * 2 + b / 2], 0.2,
                                 std::sqrt(2.0), 5.0);
      EXPECT_NEAR(y[size_t(a) * 4 + b], u[a][b], 1e-6) << a << "," << b;
    }
  // A few by hand: 4 f0 f0 x0 sqrt 2; 4 f0 f0 x[1][0] sqrt 2 = 9.5 clamps at 5; 4 f1 f1 x0 sqrt 2;
  // 4 f1 f1 x[1][1] = -1, so -0.2 sqrt 2.
  EXPECT_NEAR(y[0], 2.25 * std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(y[2 * 4 + 0], 5.0, 1e-6);
  EXPECT_NEAR(y[1 * 4 + 1], 0.25 * std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(y[3 * 4 + 3], -0.2 * std::sqrt(2.0), 1e-6);
  // Up and down.
  s.down = 2;
  ASSERT_EQ(s.out_h(h, 2, 2), 2);
  const std::vector<float> z = filtered_lrelu_reference(x, n, c, h, w, fu, fd, false, {}, s);
  ASSERT_EQ(z.size(), 4u);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      const double want = 0.25 * (u[2 * a][2 * b] + u[2 * a][2 * b + 1] + u[2 * a + 1][2 * b] +
                                  u[2 * a + 1][2 * b + 1]);
      EXPECT_NEAR(z[size_t(a) * 2 + b], want, 1e-6) << a << "," << b;
    }
}

// A 2D down filter that is the outer product of 1D taps (fd_2d) gives what the separable 1D
// taps give, with up-sampling, padding (one side cropping) and down-sampling.
TEST(Stylegan3FilteredLrelu, TwoDimensionalDownFilterMatchesTheSeparableOne) {
  const int n = 2, c = 3, h = 11, w = 9;
  const std::vector<float> x = randn(size_t(n) * c * h * w, 7);
  const std::vector<float> bias = {0.2f, -0.1f, 0.f};
  const std::vector<float> fu = to_float(design_lowpass_filter(12, 5, 6, 32));
  const std::vector<float> fd = to_float(design_lowpass_filter(12, 6, 5, 32));
  std::vector<float> fd2(fd.size() * fd.size());
  for (size_t a = 0; a < fd.size(); ++a)
    for (size_t b = 0; b < fd.size(); ++b) fd2[a * fd.size() + b] = fd[a] * fd[b];
  FilteredLreluSpec s;
  s.up = 2, s.down = 2;
  s.pad_x0 = 9, s.pad_x1 = -1, s.pad_y0 = 8, s.pad_y1 = 7;
  s.clamp = 1.f, s.out_scale = 0.25f;
  const std::vector<float> sep = filtered_lrelu_reference(x, n, c, h, w, fu, fd, false, bias, s);
  const std::vector<float> two = filtered_lrelu_reference(x, n, c, h, w, fu, fd2, true, bias, s);
  ASSERT_EQ(sep.size(), size_t(n) * c * s.out_h(h, 12, 12) * s.out_w(w, 12, 12));
  ASSERT_EQ(two.size(), sep.size());
  double mx = 0;
  for (size_t i = 0; i < sep.size(); ++i) {
    EXPECT_NEAR(two[i], sep[i], 1e-6) << i;
    mx = std::max(mx, double(std::abs(sep[i])));
  }
  EXPECT_GT(mx, 0.01);
  // A 2D filter whose size is no square is refused.
  EXPECT_THROW(
      filtered_lrelu_reference(x, n, c, h, w, fu, std::vector<float>(10, 0.1f), true, bias, s),
      std::invalid_argument);
}

// ---- Fourier input ---------------------------------------------------------------------------

struct FourierCase {
  int n = 1, wdim = 8, C = 6, size = 12;
  double sr = 16, bw = 2;
  std::vector<float> w, affine_w, affine_b, transform, freqs, phases, weight;
  FourierCase() {
    w = randn(size_t(n) * wdim, 11);
    affine_w.assign(4 * size_t(wdim), 0.f);
    affine_b = {1.f, 0.f, 0.f, 0.f};
    transform = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    // Frequencies inside the band, on its edge region and beyond the sampling rate's half
    // (amplitude 1, in between, 0).
    freqs = {1.0f, 0.5f, -0.7f, 1.2f, 0.3f, -0.2f, 2.5f, 1.0f, -4.f, 6.f, 9.f, 0.f};
    phases = {0.1f, -0.3f, 0.45f, 0.f, -0.05f, 0.2f};
    weight = randn(size_t(C) * C, 12);
  }
  std::vector<float> run() const {
    return fourier_input_reference(w, n, wdim, affine_w, affine_b, float(1 / std::sqrt(wdim)),
                                   transform, freqs, phases, weight, C, size, sr, bw);
  }
  // The plain formula at a point (px, py) of the continuous plane: the mixed features of the
  // untransformed frequencies.
  double plain(int o, double px, double py) const {
    double acc = 0;
    for (int c = 0; c < C; ++c) {
      const double fx = freqs[size_t(c) * 2], fy = freqs[size_t(c) * 2 + 1];
      const double amp =
          std::min(std::max(1 - (std::hypot(fx, fy) - bw) / (sr / 2 - bw), 0.0), 1.0);
      acc += std::sin(2 * kPi * (px * fx + py * fy + phases[size_t(c)])) * amp *
             weight[size_t(o) * C + c] / std::sqrt(double(C));
    }
    return acc;
  }
  // Pixel j's coordinate: the pixel centre's offset from the middle, in units of the sampling
  // rate.
  double coord(int j) const { return (j + 0.5 - size / 2.0) / sr; }
};

// At the identity (transform I, t = [1, 0, 0, 0], here from a bias [2, 0, 0, 0] that the
// normalisation scales back), out[o](i, j) = sum_c W[o][c] / sqrt(C) sin(2 pi (x_j f_c,x +
// y_i f_c,y + phase_c)) amp_c with x over the width and y over the height.
// NCHW to NHWC on the host.
std::vector<float> nchw_to_nhwc_host(const std::vector<float>& x, const Dims& d) {
  std::vector<float> y(x.size());
  for (int a = 0; a < d.n; ++a)
    for (int ci = 0; ci < d.c; ++ci)
      for (int yy = 0; yy < d.h; ++yy)
        for (int xx = 0; xx < d.w; ++xx)
          y[((size_t(a) * d.h + yy) * d.w + xx) * d.c + ci] =
              x[((size_t(a) * d.c + ci) * d.h + yy) * d.w + xx];
  return y;
}

// fir1d passes run on the host by the kernel's own per-element code (fir1d_output), from x
// (NHWC, dims d, updated to the result's) through each pass; the first applies pre and bias.
std::vector<float> passes_on_host(std::vector<float> cur, Dims& d,
                                  const std::vector<Fir1dPass>& passes,
                                  const std::vector<const float*>& taps, const float* pre,
                                  const float* bias) {
  for (size_t pi = 0; pi < passes.size(); ++pi) {
    const Fir1dPass& p = passes[pi];
    const int len = p.along_h ? d.h : d.w, out_len = p.out_len(len);
    const int outer = p.along_h ? d.n : d.n * d.h, inner = p.along_h ? d.w * d.c : d.c;
    std::vector<float> next(size_t(outer) * out_len * inner);
    for (int o = 0; o < outer; ++o)
      for (int e = 0; e < out_len * inner; ++e)
        next[size_t(o) * out_len * inner + e] = fir1d_output(
            cur.data() + size_t(o) * len * inner, o, e, len, inner, p.along_h ? 1 : d.h, d.c,
            taps[pi], pi == 0 ? pre : nullptr, pi == 0 ? bias : nullptr, p);
    cur.swap(next);
    (p.along_h ? d.h : d.w) = out_len;
  }
  return cur;
}

// Relative L2 of NHWC `got` against NCHW `want`, both of dims d.
double rel_l2_nhwc(const std::vector<float>& got, const std::vector<float>& want, const Dims& d) {
  double num = 0, den = 0;
  for (int a = 0; a < d.n; ++a)
    for (int ci = 0; ci < d.c; ++ci)
      for (int yy = 0; yy < d.h; ++yy)
        for (int xx = 0; xx < d.w; ++xx) {
          const double g = got[((size_t(a) * d.h + yy) * d.w + xx) * d.c + ci];
          const double r = want[((size_t(a) * d.c + ci) * d.h + yy) * d.w + xx];
          num += (g - r) * (g - r), den += r * r;
        }
  return std::sqrt(num / den);
}

// The training step's backward runs each fir1d pass's transpose (fir1d_transposed, the taps
// reversed): <A x, y> must equal <x, A^T y> for every pass of StyleGAN3-T's layers at 256 (their
// up- and down-sampling geometry along one axis, the other axis 3 long) and the discriminator's
// two FIR steps (padding 2; down 2 with padding 1). An off-by-one padding fails by far more
// than the 1e-5.
TEST(Stylegan3FilteredLrelu, TransposedPassesAreAdjoint) {
  std::mt19937 rng(45);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  struct Geometry {
    Fir1dPass p;
    int len;
  };
  std::vector<Geometry> cases;
  const Graph g = stylegan3_generator(256);
  int prev = 0;
  for (const Node& n : g.nodes()) {
    if (n.kind == OpKind::FourierInput) prev = n.out.h;
    if (n.kind != OpKind::FilteredModConv) continue;
    const Sg3Spec& f = n.sg3;
    const int conv = prev + n.kernel - 1;
    Fir1dPass up;
    up.up = f.up, up.taps = f.up_taps, up.pad0 = f.pad_lo, up.pad1 = f.pad_hi, up.gain = f.up;
    if (f.up > 1 || f.up_taps > 1) cases.push_back({up, conv});
    Fir1dPass down;
    down.down = f.down, down.taps = f.down_taps, down.out_scale = f.out_scale;
    if (f.down > 1 || f.down_taps > 1) cases.push_back({down, up.out_len(conv)});
    prev = n.out.h;
  }
  ASSERT_GE(cases.size(), 20u);
  Fir1dPass d2;  // the discriminator's conv1 pre-filter and skip filter at 16 px
  d2.taps = 4, d2.pad0 = d2.pad1 = 2;
  cases.push_back({d2, 16});
  d2.down = 2, d2.pad0 = d2.pad1 = 1;
  cases.push_back({d2, 16});
  for (const Geometry& gc : cases)
    for (bool along_h : {false, true}) {
      Fir1dPass p = gc.p;
      p.along_h = along_h;
      const Fir1dPass q = fir1d_transposed(p, gc.len);
      std::vector<float> f(size_t(p.taps)), fr;
      for (float& v : f) v = u(rng);
      fr.assign(f.rbegin(), f.rend());
      const int c = 2;
      Dims din = along_h ? Dims{1, c, gc.len, 3} : Dims{1, c, 3, gc.len};
      Dims dout = p.out_dims(din);
      std::vector<float> x(size_t(din.numel())), y(size_t(dout.numel()));
      for (float& v : x) v = u(rng);
      for (float& v : y) v = u(rng);
      Dims da = din, db = dout;
      const std::vector<float> ax = passes_on_host(x, da, {p}, {f.data()}, nullptr, nullptr);
      const std::vector<float> aty = passes_on_host(y, db, {q}, {fr.data()}, nullptr, nullptr);
      ASSERT_EQ(ax.size(), y.size());
      ASSERT_EQ(aty.size(), x.size());
      double l = 0, r = 0, scale = 0;
      for (size_t i = 0; i < y.size(); ++i)
        l += double(ax[i]) * y[i], scale += std::fabs(ax[i] * y[i]);
      for (size_t i = 0; i < x.size(); ++i) r += double(x[i]) * aty[i];
      EXPECT_NEAR(l, r, 1e-5 * scale)
          << "up " << p.up << " down " << p.down << " taps " << p.taps << " pad " << p.pad0 << "/"
          << p.pad1 << " len " << gc.len << (along_h ? " along H" : " along W");
    }
}

// The GPU's filtered_lrelu, run on the host: the passes filtered_lrelu_passes builds (the
// demodulation and bias in the first, the lrelu in the up-sampling's second, out_scale in the
// last), each element computed by the kernel's own fir1d_output over NHWC rows, against the
// reference, for the -T layers' geometries (x2 /2, x4 /2, a crop, ToRGB's elementwise pass).
TEST(Stylegan3FilteredLrelu, TheKernelsPassesMatchTheReference) {
  std::mt19937 rng(44);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int n = 2, c = 5, h = 9, w = 8;
  std::vector<float> x(size_t(n) * c * h * w), bias(c), pre(size_t(n) * c);
  for (float& v : x) v = u(rng);
  for (float& v : bias) v = u(rng);
  for (float& v : pre) v = 0.5f + std::fabs(u(rng));
  struct Case {
    int up, down, up_taps, down_taps, p0, p1;
    float slope, gain, clamp, scale;
  };
  const Case cases[] = {{2, 2, 12, 12, 11, 10, 0.2f, 1.41421356f, 0.f, 1.f},
                        {4, 2, 24, 12, 21, 20, 0.2f, 1.41421356f, 1.5f, 1.f},
                        {2, 2, 12, 12, -3, 15, 0.2f, 1.41421356f, 0.f, 0.25f},
                        {1, 1, 1, 1, 0, 0, 1.f, 1.f, 1.f, 0.25f}};
  for (const Case& k : cases) {
    FilteredLreluSpec s;
    s.up = k.up, s.down = k.down;
    s.pad_x0 = k.p0, s.pad_x1 = k.p1;
    s.pad_y0 = k.p0 ? k.p0 + 1 : 0, s.pad_y1 = k.p1 ? k.p1 - 1 : 0;
    s.slope = k.slope, s.gain = k.gain, s.clamp = k.clamp, s.out_scale = k.scale;
    const std::vector<double> fu64 = design_lowpass_filter(k.up_taps, 2, 3, 16);
    const std::vector<double> fd64 = design_lowpass_filter(k.down_taps, 2, 3, 16);
    const std::vector<float> fu(fu64.begin(), fu64.end()), fd(fd64.begin(), fd64.end());
    std::vector<float> scaled = x;
    for (size_t i = 0; i < scaled.size(); ++i) scaled[i] *= pre[i / (size_t(h) * w)];
    const std::vector<float> want =
        filtered_lrelu_reference(scaled, n, c, h, w, fu, fd, false, bias, s);
    Dims d{n, c, h, w};
    const std::vector<Fir1dPass> passes = filtered_lrelu_passes(s, k.up_taps, k.down_taps);
    std::vector<const float*> taps;
    for (const Fir1dPass& p : passes)
      taps.push_back(p.taps == 1 ? nullptr : p.down > 1 ? fd.data() : fu.data());
    const std::vector<float> cur =
        passes_on_host(nchw_to_nhwc_host(x, d), d, passes, taps, pre.data(), bias.data());
    ASSERT_EQ(d.h, s.out_h(h, k.up_taps, k.down_taps));
    ASSERT_EQ(d.w, s.out_w(w, k.up_taps, k.down_taps));
    ASSERT_EQ(cur.size(), want.size());
    EXPECT_LT(rel_l2_nhwc(cur, want, d), 1e-6)
        << "up " << k.up << " down " << k.down << " pads " << k.p0 << "/" << k.p1 << ", "
        << passes.size() << " passes";
  }
}

// StyleGAN2's FIR up-sampling as the GPU runs it, two separable fir1d passes of [1, 3, 3, 1] / 8
// (separable_up_passes; each pass gain 2), against the 2-D upfirdn2d reference with fir_2d's
// filter: upsample2d's geometry (the skip images) and the up-sampling conv's (pads 3 and 2).
TEST(Stylegan3FilteredLrelu, SeparableUpsamplingIsUpfirdn2d) {
  std::mt19937 rng(45);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int n = 2, c = 3, h = 5, w = 7;
  std::vector<float> x(size_t(n) * c * h * w);
  for (float& v : x) v = u(rng);
  FirSpec conv_up;
  conv_up.up = 2, conv_up.fh = conv_up.fw = 4, conv_up.gain = 4.f;
  conv_up.pad_x0 = conv_up.pad_y0 = 3, conv_up.pad_x1 = conv_up.pad_y1 = 2;
  const std::vector<float> f1 = fir_1d(stylegan2_fir_1d());
  for (const FirSpec& s : {upsample2d_spec(4), conv_up}) {
    const std::vector<float> want =
        upfirdn2d_reference(x, n, c, h, w, fir_2d(stylegan2_fir_1d()), s);
    Dims d{n, c, h, w};
    const std::vector<Fir1dPass> passes = separable_up_passes(s);
    ASSERT_EQ(passes.size(), 2u);
    EXPECT_EQ(separable_up_tmp(d, s).w, s.out_w(w));
    const std::vector<float> got = passes_on_host(nchw_to_nhwc_host(x, d), d, passes,
                                                  {f1.data(), f1.data()}, nullptr, nullptr);
    ASSERT_EQ(d.h, s.out_h(h));
    ASSERT_EQ(d.w, s.out_w(w));
    EXPECT_LT(rel_l2_nhwc(got, want, d), 1e-6) << "pads " << s.pad_x0 << "/" << s.pad_x1;
  }
}

TEST(Stylegan3FourierInput, IdentityIsThePlainFormula) {
  FourierCase fc;
  fc.affine_b = {2.f, 0.f, 0.f, 0.f};
  const std::vector<float> y = fc.run();
  ASSERT_EQ(y.size(), size_t(fc.C) * fc.size * fc.size);
  const int pts[][2] = {{0, 0}, {0, 11}, {3, 7}, {11, 2}, {6, 6}, {5, 6}};
  for (int o = 0; o < fc.C; ++o)
    for (const auto& p : pts)
      EXPECT_NEAR(y[(size_t(o) * fc.size + p[0]) * fc.size + p[1]],
                  fc.plain(o, fc.coord(p[1]), fc.coord(p[0])), 1e-5)
          << "o " << o << " row " << p[0] << " col " << p[1];
  // Channel 5 (|f| = 9 > sr / 2) is silenced, channel 3 (|f| = 2.69) attenuated: check the
  // features directly with the identity mixing.
  fc.weight.assign(size_t(fc.C) * fc.C, 0.f);
  for (int c = 0; c < fc.C; ++c) fc.weight[size_t(c) * fc.C + c] = float(std::sqrt(double(fc.C)));
  const std::vector<float> id = fc.run();
  for (int p = 0; p < fc.size * fc.size; ++p) EXPECT_EQ(id[size_t(5) * 144 + p], 0.f);
  const double amp3 = 1 - (std::hypot(2.5, 1.0) - 2) / (8 - 2);
  EXPECT_NEAR(id[size_t(3) * 144 + 0],
              amp3 * std::sin(2 * kPi * (fc.coord(0) * 2.5 + fc.coord(0) * 1.0)), 1e-6);
}

// The affine rotates and translates: with t = affine(w) normalised, angle a = atan2(t1, t0), the
// output at pixel p is the plain formula at R(a) (p - (t2, t3)) (m_r @ m_t applied to p).
TEST(Stylegan3FourierInput, TheAffineRotatesAndTranslates) {
  FourierCase fc;
  fc.n = 2;
  fc.w = randn(size_t(fc.n) * fc.wdim, 21);
  fc.affine_w = randn(4 * size_t(fc.wdim), 22, 0.5f);
  fc.affine_b = {1.f, 0.3f, 0.1f, -0.2f};
  const std::vector<float> y = fc.run();
  const double g = 1 / std::sqrt(double(fc.wdim));
  for (int ni = 0; ni < fc.n; ++ni) {
    double t[4];
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < fc.wdim; ++k)
        acc += double(fc.w[size_t(ni) * fc.wdim + k]) * fc.affine_w[size_t(j) * fc.wdim + k];
      t[j] = acc * g + fc.affine_b[size_t(j)];
    }
    const double a = std::atan2(t[1], t[0]), r = std::hypot(t[0], t[1]);
    const double tx = t[2] / r, ty = t[3] / r;
    for (int o = 0; o < fc.C; ++o)
      for (int i = 0; i < fc.size; i += 5)
        for (int j = 0; j < fc.size; j += 3) {
          const double px = fc.coord(j) - tx, py = fc.coord(i) - ty;
          const double qx = std::cos(a) * px - std::sin(a) * py;
          const double qy = std::sin(a) * px + std::cos(a) * py;
          EXPECT_NEAR(y[((size_t(ni) * fc.C + o) * fc.size + i) * fc.size + j], fc.plain(o, qx, qy),
                      1e-5)
              << "image " << ni << " o " << o << " at " << i << "," << j;
        }
  }
}

// A quarter turn (t = [0, 1, 0, 0]) maps the grid onto itself: out(i, j) = base(j, size-1-i).
TEST(Stylegan3FourierInput, AQuarterTurnRotatesTheGrid) {
  FourierCase fc;
  const std::vector<float> base = fc.run();
  fc.affine_b = {0.f, 1.f, 0.f, 0.f};
  const std::vector<float> rot = fc.run();
  const int S = fc.size;
  for (int o = 0; o < fc.C; ++o)
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < S; ++j)
        ASSERT_NEAR(rot[(size_t(o) * S + i) * S + j], base[(size_t(o) * S + j) * S + (S - 1 - i)],
                    1e-5)
            << o << " " << i << " " << j;
  // A user transform composes after the affine: transform = the inverse quarter turn undoes it.
  fc.transform = {0, 1, 0, -1, 0, 0, 0, 0, 1};
  const std::vector<float> back = fc.run();
  for (size_t k = 0; k < base.size(); ++k) ASSERT_NEAR(back[k], base[k], 1e-5) << k;
}

// ---- The generator -----------------------------------------------------------------------------

// random_weights with the buffers a trained model would hold: magnitude_ema positive, the
// synthesis weights signed, the
// transform the identity, the input's affine near [1, 0, 0, 0] (NVlabs' bias_init), the layers'
// affine biases 1.
HostWeights sane_weights(const Graph& g, uint64_t seed) {
  HostWeights w = random_weights(g, seed);
  for (auto& [name, v] : w) {
    auto ends = [&](const std::string& suf) {
      return name.size() >= suf.size() &&
             name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
    };
    if (ends(".magnitude_ema")) v.assign(v.size(), 0.5f);
    // Signed weights (random_weights draws them in [0.5, 1]), else every layer adds coherently
    // and the image saturates at the clamp.
    if (name.rfind("synthesis.", 0) == 0 && ends(".weight") && !ends(".affine.weight"))
      for (float& x : v) x = (x - 0.75f) * 4.f;
    if (ends(".transform")) v = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    if (name == "synthesis.input.affine.bias")
      v = {1.f, 0.f, 0.f, 0.f};
    else if (ends(".affine.bias"))
      v.assign(v.size(), 1.f);
  }
  return w;
}

void expect_generates(const Graph& g, int res) {
  const HostWeights w = sane_weights(g, 3);
  const int n = 2;
  const std::vector<float> z = randn(size_t(n) * 512, 5);
  const std::vector<float> img = stylegan3_generate_reference(g, w, z, n);
  ASSERT_EQ(img.size(), size_t(n) * 3 * res * res);
  double ss = 0;
  size_t saturated = 0;
  for (float v : img) {
    ASSERT_TRUE(std::isfinite(v));
    ss += double(v) * v;
    saturated += std::abs(v) >= 256.f * 0.25f;  // the clamp, then the output scale
  }
  EXPECT_GT(ss, 0);
  EXPECT_LT(saturated, img.size() / 10) << "the image is mostly at the clamp";
  // The two images differ (their own latents), and a latent gives the same image whatever the
  // batch (but for the style RMS, which NVlabs takes over the whole batch: so only finiteness and
  // size are asked of a batch of one here).
  EXPECT_NE(std::vector<float>(img.begin(), img.begin() + 3 * res * res),
            std::vector<float>(img.begin() + 3 * res * res, img.end()));
  const std::vector<float> one =
      stylegan3_generate_reference(g, w, std::vector<float>(z.begin(), z.begin() + 512), 1);
  ASSERT_EQ(one.size(), size_t(3) * res * res);
  for (float v : one) ASSERT_TRUE(std::isfinite(v));
}

TEST(Stylegan3Generator, TinyTGraphGivesFiniteImagesOfTheResolution) {
  expect_generates(stylegan3_generator(16, false, 2, 256, 16), 16);
}

TEST(Stylegan3Generator, TinyRGraphGivesFiniteImagesOfTheResolution) {
  expect_generates(stylegan3_generator(16, true, 2, 256, 16), 16);
}

TEST(Stylegan3Generator, AMissingTensorIsNamed) {
  const Graph g = stylegan3_generator(16, false, 2, 256, 16);
  HostWeights w = sane_weights(g, 3);
  w.erase("synthesis.L3_36_16.magnitude_ema");
  try {
    stylegan3_generate_reference(g, w, randn(512, 5), 1);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("synthesis.L3_36_16.magnitude_ema"), std::string::npos)
        << e.what();
  }
}

// Against PyTorch: CNNBENCH_SG3_CASE="DIR:RESOLUTION:CHANNEL_BASE:CHANNEL_MAX[:t|r]" names a case
// of `tools/stylegan3_reference.py write-case` (weights.safetensors, input.safetensors with z as
// [n, 512, 1, 1], reference.safetensors with the image as output0), a StyleGAN3-T (or, with
// ":r", -R) with mapping depth 2. Skipped without it.
// An environment variable's colon-separated fields, or empty where it is not set.
std::vector<std::string> case_fields(const char* var) {
  const char* spec = std::getenv(var);
  std::vector<std::string> parts;
  if (!spec) return parts;
  const std::string s(spec);
  for (size_t at = 0;;) {
    const size_t colon = s.find(':', at);
    parts.push_back(s.substr(at, colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  return parts;
}

// The host generator on a torch case's weights and input (DIR/weights.safetensors,
// input.safetensors "input", reference.safetensors "output0"): relative L2 under 1e-4.
void expect_host_generator_matches_case(const Graph& g, const std::string& dir, int input_width,
                                        const std::string& label) {
  const HostWeights w = load_weights(g, dir + "/weights.safetensors");
  const std::vector<float> x = SafetensorsFile::load(dir + "/input.safetensors").to_float("input");
  const int n = int(x.size() / size_t(input_width));
  const std::vector<float> ref =
      SafetensorsFile::load(dir + "/reference.safetensors").to_float("output0");
  const std::vector<float> got = stylegan3_generate_reference(g, w, x, n);
  ASSERT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i)
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]), den += double(ref[i]) * ref[i];
  const double err = std::sqrt(num / den);
  std::printf("  %s, batch %d: rel_l2 %.3e\n", label.c_str(), n, err);
  EXPECT_LT(err, 1e-4);
}

// CNNBENCH_SG3_CASE=DIR:RES:CBASE:CMAX[:t|r], a case of tools/stylegan3_reference.py write-case.
TEST(Stylegan3Ops, HostGeneratorMatchesATorchCase) {
  const std::vector<std::string> parts = case_fields("CNNBENCH_SG3_CASE");
  if (parts.empty()) GTEST_SKIP() << "CNNBENCH_SG3_CASE is not set (DIR:RES:CBASE:CMAX)";
  ASSERT_TRUE(parts.size() == 4u || (parts.size() == 5u && (parts[4] == "t" || parts[4] == "r")))
      << "DIR:RES:CBASE:CMAX[:t|r]";
  const int res = std::stoi(parts[1]), cbase = std::stoi(parts[2]), cmax = std::stoi(parts[3]);
  const bool r_config = parts.size() == 5u && parts[4] == "r";
  expect_host_generator_matches_case(
      stylegan3_generator(res, r_config, 2, cbase, cmax), parts[0], 512,
      std::string("stylegan3-") + (r_config ? "R " : "T ") + parts[1] + " px, channel_base " +
          parts[2] + ", channel_max " + parts[3]);
}

// CNNBENCH_XL_CASE=DIR:RES:SYN_LAYERS:HEAD_LAYERS:CLASSES:CBASE:CMAX, a case of
// tools/stylegan_xl_reference.py write-case (the input: z then the one-hot class).
TEST(Stylegan3Ops, XlHostGeneratorMatchesATorchCase) {
  const std::vector<std::string> parts = case_fields("CNNBENCH_XL_CASE");
  if (parts.empty())
    GTEST_SKIP()
        << "CNNBENCH_XL_CASE is not set (DIR:RES:SYN_LAYERS:HEAD_LAYERS:CLASSES:CBASE:CMAX)";
  ASSERT_EQ(parts.size(), 7u) << "DIR:RES:SYN_LAYERS:HEAD_LAYERS:CLASSES:CBASE:CMAX";
  int v[6];
  for (int i = 0; i < 6; ++i) v[i] = std::stoi(parts[size_t(i) + 1]);
  expect_host_generator_matches_case(stylegan_xl_generator(v[0], v[1], v[2], 16, v[3], v[4], v[5]),
                                     parts[0], 64 + v[3], "stylegan-xl " + parts[1] + " px");
}

}  // namespace

// StyleGAN-XL's host generator on a small grown graph: images of the resolution, and both the
// latent and the class change them (the embedding is read at the one-hot's argmax).
TEST(Stylegan3Generator, XlClassAndLatentBothMatter) {
  const int classes = 6, n = 3;
  const Graph g = stylegan_xl_generator(32, 4, 3, 16, classes, 256, 16);
  HostWeights w = random_weights(g, 4);
  stylegan3_random_buffers(w);
  std::vector<float> x(size_t(n) * (64 + classes), 0.f);
  std::mt19937 rng(6);
  std::normal_distribution<float> nd;
  for (int k = 0; k < 64; ++k) x[k] = nd(rng);
  std::copy(x.begin(), x.begin() + 64, x.begin() + (64 + classes));  // image 1: same z
  for (int k = 0; k < 64; ++k) x[2 * (64 + classes) + k] = nd(rng);  // image 2: another z
  x[64 + 1] = 1.f;                                                   // image 0: class 1
  x[(64 + classes) + 64 + 4] = 1.f;                                  // image 1: class 4
  x[2 * (64 + classes) + 64 + 1] = 1.f;                              // image 2: class 1
  const std::vector<float> img = stylegan3_generate_reference(g, w, x, n);
  const size_t per = size_t(3) * 32 * 32;
  ASSERT_EQ(img.size(), n * per);
  auto differ = [&](int a, int b) {
    double d = 0;
    for (size_t i = 0; i < per; ++i)
      d = std::max(d, double(std::fabs(img[a * per + i] - img[b * per + i])));
    return d;
  };
  for (float v : img) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(differ(0, 1), 1e-6);  // the class matters
  EXPECT_GT(differ(0, 2), 1e-6);  // z matters
}
