// StyleGAN's synthesis ops on the host (kernels/stylegan.h): upfirdn2d's geometry and values
// against a separable 1D form written here, bias_act, and the modulated conv's demodulation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "harness/safetensors.h"
#include "kernels/stylegan_ref.h"
#include "networks/weights.h"
#include "networks/zoo.h"

using namespace cnnbench;

namespace {

// 1D upfirdn of one row: zero insertion, padding, a true convolution with t, down-sampling.
std::vector<double> upfirdn1d(const std::vector<double>& x, const std::vector<double>& t, int up,
                              int down, int p0, int p1) {
  std::vector<double> u(x.size() * up + p0 + p1, 0.0);
  for (size_t i = 0; i < x.size(); ++i) u[p0 + i * up] = x[i];
  const int n = int(u.size()) - int(t.size()) + 1;
  std::vector<double> y;
  for (int o = 0; o < n; o += down) {
    double acc = 0;
    for (size_t k = 0; k < t.size(); ++k) acc += u[o + k] * t[t.size() - 1 - k];
    y.push_back(acc);
  }
  return y;
}

std::vector<float> random_vec(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

}  // namespace

TEST(StyleganOps, Upsample2dGeometryIsNvlabs) {
  const FirSpec s = upsample2d_spec(4);
  EXPECT_EQ(s.pad_x0, 2);
  EXPECT_EQ(s.pad_x1, 1);
  EXPECT_EQ(s.gain, 4.f);
  EXPECT_EQ(s.out_h(8), 16);
  EXPECT_EQ(s.out_w(5), 10);
  const std::vector<float> f = fir_2d(stylegan2_fir_1d());
  ASSERT_EQ(f.size(), 16u);
  EXPECT_FLOAT_EQ(f[0], 1.f / 64);
  EXPECT_FLOAT_EQ(f[5], 9.f / 64);
}

// The 2D filter is separable: upfirdn2d equals the 1D form on the rows, then on the columns
// (each 1D pass with sqrt of the gain), for up-sampling, a padded filter and down-sampling.
TEST(StyleganOps, Upfirdn2dIsTheSeparable1dFormTwice) {
  std::mt19937 rng(3);
  const int n = 2, c = 3, h = 5, w = 7;
  const std::vector<float> x = random_vec(size_t(n) * c * h * w, rng);
  const std::vector<float> t1 = stylegan2_fir_1d();
  double sum = 0;
  for (float v : t1) sum += v;
  std::vector<double> t(t1.begin(), t1.end());
  for (double& v : t) v /= sum;
  FirSpec down;
  down.down = 2, down.fh = down.fw = 4, down.pad_x0 = down.pad_y0 = 1;
  down.pad_x1 = down.pad_y1 = 1;
  FirSpec padded;
  padded.fh = padded.fw = 4, padded.pad_x0 = padded.pad_y0 = 2, padded.pad_x1 = padded.pad_y1 = 1;
  for (const FirSpec& s : {upsample2d_spec(4), down, padded}) {
    const std::vector<float> y = upfirdn2d_reference(x, n, c, h, w, fir_2d(t1), s);
    const int oh = s.out_h(h), ow = s.out_w(w);
    ASSERT_EQ(y.size(), size_t(n) * c * oh * ow);
    const double g = std::sqrt(double(s.gain));
    for (int p = 0; p < n * c; ++p) {
      std::vector<std::vector<double>> rows;
      for (int r = 0; r < h; ++r) {
        std::vector<double> row(x.begin() + (size_t(p) * h + r) * w,
                                x.begin() + (size_t(p) * h + r + 1) * w);
        rows.push_back(upfirdn1d(row, t, s.up, s.down, s.pad_x0, s.pad_x1));
        for (double& v : rows.back()) v *= g;
      }
      ASSERT_EQ(int(rows[0].size()), ow);
      for (int ox = 0; ox < ow; ++ox) {
        std::vector<double> col;
        for (int r = 0; r < h; ++r) col.push_back(rows[r][ox]);
        const std::vector<double> out = upfirdn1d(col, t, s.up, s.down, s.pad_y0, s.pad_y1);
        ASSERT_EQ(int(out.size()), oh);
        for (int oy = 0; oy < oh; ++oy)
          EXPECT_NEAR(y[(size_t(p) * oh + oy) * ow + ox], out[oy] * g, 1e-5)
              << "plane " << p << " at " << oy << "," << ox << " up " << s.up << " down " << s.down;
      }
    }
  }
}

// Up-sampling a constant image by 2 keeps it constant away from the border (the filter sums to
// 1 and the gain of 4 makes up for the inserted zeros).
TEST(StyleganOps, Upsample2dKeepsAConstant) {
  const int h = 6, w = 6;
  const std::vector<float> x(size_t(h) * w, 2.5f);
  const std::vector<float> y =
      upfirdn2d_reference(x, 1, 1, h, w, fir_2d(stylegan2_fir_1d()), upsample2d_spec(4));
  for (int oy = 2; oy < 10; ++oy)
    for (int ox = 2; ox < 10; ++ox) EXPECT_NEAR(y[size_t(oy) * 12 + ox], 2.5f, 1e-6);
}

TEST(StyleganOps, BiasActLreluGainClampAndNoise) {
  const std::vector<float> x{-1.f, 0.5f, 300.f, -300.f};  // n 1, c 2, 1 x 2
  BiasActSpec s;
  s.clamp = 256.f;
  s.noise_strength = 0.5f;
  const std::vector<float> y = bias_act_reference(x, 1, 2, 1, 2, {0.25f, -0.25f}, {2.f, -2.f}, s);
  const double g = std::sqrt(2.0);
  EXPECT_NEAR(y[0], (-1 + 1 + 0.25) * g, 1e-6);          // pixel 0: noise +1; channel 0: bias +0.25
  EXPECT_NEAR(y[1], (0.5 - 1 + 0.25) * 0.2 * g, 1e-6);   // negative: slope 0.2
  EXPECT_NEAR(y[2], 256.f, 0);                           // clamped
  EXPECT_NEAR(y[3], (-300 - 1 - 0.25) * 0.2 * g, 1e-4);  // pixel 1: noise -1
  BiasActSpec linear;
  linear.slope = 1.f, linear.gain = 1.f;
  EXPECT_EQ(bias_act_reference(x, 1, 2, 1, 2, {}, {}, linear), x);
}

// Demodulation makes each image's modulated weight of unit norm per output channel, so the
// modulated conv is blind to the scale of the styles; without it the output scales with them.
TEST(StyleganOps, DemodulationNormalizesEachOutputChannel) {
  std::mt19937 rng(5);
  const int n = 2, c = 4, k = 3, r = 3, h = 5, w = 4;
  const std::vector<float> wt = random_vec(size_t(k) * c * r * r, rng);
  std::vector<float> styles = random_vec(size_t(n) * c, rng);
  const std::vector<float> d = demod_reference(wt, k, c, r, r, styles, n);
  for (int ni = 0; ni < n; ++ni)
    for (int ki = 0; ki < k; ++ki) {
      double norm = 0;
      for (int ci = 0; ci < c; ++ci)
        for (int q = 0; q < r * r; ++q) {
          const double v =
              double(wt[(size_t(ki) * c + ci) * r * r + q]) * styles[ni * c + ci] * d[ni * k + ki];
          norm += v * v;
        }
      EXPECT_NEAR(norm, 1.0, 1e-5);
    }
  const std::vector<float> x = random_vec(size_t(n) * c * h * w, rng);
  const std::vector<float> a = modconv_reference(x, n, c, h, w, wt, k, r, styles, true);
  const std::vector<float> plain = modconv_reference(x, n, c, h, w, wt, k, r, styles, false);
  for (float& s : styles) s *= 3.f;
  const std::vector<float> b = modconv_reference(x, n, c, h, w, wt, k, r, styles, true);
  const std::vector<float> tripled = modconv_reference(x, n, c, h, w, wt, k, r, styles, false);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(a[i])));
    EXPECT_NEAR(tripled[i], 3 * plain[i], 1e-4 * (1 + std::fabs(tripled[i])));
  }
}

// The host generator (stylegan2_generate_reference) at 16 px with narrow channels: finite,
// deterministic, and blind to the scale of every demodulated conv weight (conv0 with its
// up-sampling included), as demodulation promises; ToRGB's weight is not demodulated, so scaling
// it does change the image.
TEST(StyleganOps, HostGeneratorIsDemodulated) {
  const int res = 16, cbase = 256, maps = 2, n = 2;
  HostWeights w = random_weights(stylegan2_generator(res, cbase, maps), 9);
  std::mt19937 rng(10);
  const std::vector<float> z = random_vec(size_t(n) * 512, rng);
  const std::vector<float> a = stylegan2_generate_reference(w, res, cbase, maps, z, n);
  ASSERT_EQ(a.size(), size_t(n) * 3 * res * res);
  double energy = 0;
  for (float v : a) {
    ASSERT_TRUE(std::isfinite(v));
    energy += double(v) * v;
  }
  EXPECT_GT(energy, 0.0);
  EXPECT_EQ(a, stylegan2_generate_reference(w, res, cbase, maps, z, n));
  HostWeights scaled = w;
  for (auto& [name, t] : scaled)
    if (name.find(".conv") != std::string::npos && name.size() > 7 &&
        name.compare(name.size() - 7, 7, ".weight") == 0 &&
        name.find("affine") == std::string::npos)
      for (float& v : t) v *= 3.f;
  const std::vector<float> b = stylegan2_generate_reference(scaled, res, cbase, maps, z, n);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  EXPECT_LT(std::sqrt(diff / energy), 1e-5);
  for (float& v : scaled.at("synthesis.b16.torgb.weight")) v *= 2.f;
  const std::vector<float> c = stylegan2_generate_reference(scaled, res, cbase, maps, z, n);
  diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += (double(a[i]) - c[i]) * (double(a[i]) - c[i]);
  EXPECT_GT(std::sqrt(diff / energy), 1e-2);
}

// Against PyTorch: CNNBENCH_SG2_CASE="DIR:RESOLUTION:CHANNEL_BASE:MAPPING_LAYERS" names a case of
// `tools/stylegan_reference.py write-case` (weights.safetensors, input.safetensors with z as
// [n, 512, 1, 1], reference.safetensors with the image as output0). Skipped without it.
TEST(StyleganOps, HostGeneratorMatchesATorchCase) {
  const char* spec = std::getenv("CNNBENCH_SG2_CASE");
  if (!spec) GTEST_SKIP() << "CNNBENCH_SG2_CASE is not set";
  std::string s(spec);
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t colon = s.find(':', at);
    parts.push_back(s.substr(at, colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  ASSERT_EQ(parts.size(), 4u) << spec;
  const int res = std::stoi(parts[1]), cbase = std::stoi(parts[2]), maps = std::stoi(parts[3]);
  const HostWeights w =
      load_weights(stylegan2_generator(res, cbase, maps), parts[0] + "/weights.safetensors");
  const SafetensorsFile in = SafetensorsFile::load(parts[0] + "/input.safetensors");
  const std::vector<float> z = in.to_float("input");
  const int n = int(z.size() / 512);
  const std::vector<float> ref =
      SafetensorsFile::load(parts[0] + "/reference.safetensors").to_float("output0");
  const std::vector<float> got = stylegan2_generate_reference(w, res, cbase, maps, z, n);
  ASSERT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i)
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]), den += double(ref[i]) * ref[i];
  const double err = std::sqrt(num / den);
  std::printf("  stylegan2 %d px, channel_base %d, %d mapping layers, batch %d: rel_l2 %.3e\n", res,
              cbase, maps, n, err);
  EXPECT_LT(err, 1e-4);
}

// The graph carries the gains the host generator applies (what compile() reads from the nodes).
TEST(StyleganOps, GraphCarriesTheEqualizedLrGainsAndClamp) {
  const Graph g = stylegan2_generator(16, 256, 2);
  int fcs = 0, rgbs = 0, convs = 0;
  for (const Node& n : g.nodes()) {
    if (n.kind == OpKind::Linear) {
      ++fcs;
      EXPECT_FLOAT_EQ(n.weight_gain, float(0.01 / std::sqrt(512.0)));
      EXPECT_FLOAT_EQ(n.bias_gain, 0.01f);
    }
    if (n.kind != OpKind::ModConv) continue;
    EXPECT_FLOAT_EQ(n.weight_gain, float(1 / std::sqrt(512.0))) << n.name;
    EXPECT_FLOAT_EQ(n.clamp, 256.f) << n.name;
    const int in_c = g.node(n.inputs[0]).out.c;
    if (n.demodulate) {
      ++convs;
      EXPECT_FLOAT_EQ(n.style_gain, 1.f) << n.name;
    } else {
      ++rgbs;
      EXPECT_FLOAT_EQ(n.style_gain, float(1 / std::sqrt(double(in_c)))) << n.name;
    }
  }
  EXPECT_EQ(fcs, 2);
  EXPECT_EQ(rgbs, 3);   // b4, b8, b16
  EXPECT_EQ(convs, 5);  // b4.conv1, then conv0 and conv1 of b8 and b16
}
