// StyleGAN3's FIR design (kernels/fir_design.h) against scipy's documented figures: kaiser_beta(65)
// = 6.20426 and kaiser_atten(211, 0.0375) = 64.48099630593983 (their docstrings), firwin(3, 0.1)
// = [0.06799017, 0.86401967, 0.06799017] with the default Hamming window (firwin's docstring);
// the Kaiser window against its definition; and the filters StyleGAN3 designs.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/fir_design.h"
#include "networks/zoo.h"

using namespace cnnbench;

TEST(FirDesign, KaiserFormulasAreScipys) {
  EXPECT_NEAR(kaiser_beta(65), 6.20426, 1e-9);
  EXPECT_NEAR(kaiser_atten(211, 0.0375), 64.48099630593983, 1e-12);
  EXPECT_NEAR(kaiser_beta(30), 0.5842 * std::pow(9.0, 0.4) + 0.07886 * 9, 1e-12);
  EXPECT_EQ(kaiser_beta(20), 0.0);
  // kaiserord(65, 24 / 500) gives 167 taps: the smallest whose attenuation reaches 65 dB.
  EXPECT_GE(kaiser_atten(167, 24.0 / 500), 65.0);
  EXPECT_LT(kaiser_atten(166, 24.0 / 500), 65.0);
}

TEST(FirDesign, FirwinMatchesScipysExample) {
  const std::vector<double> h = firwin_lowpass(3, 0.1, 2.0, hamming_window(3));
  ASSERT_EQ(h.size(), 3u);
  EXPECT_NEAR(h[0], 0.06799017, 5e-9);
  EXPECT_NEAR(h[1], 0.86401967, 5e-9);
  EXPECT_NEAR(h[2], 0.06799017, 5e-9);
}

TEST(FirDesign, KaiserWindowAndFilters) {
  const double beta = 6.20426;
  const std::vector<double> w = kaiser_window(9, beta);
  EXPECT_NEAR(w[4], 1.0, 1e-15);                                 // the centre
  EXPECT_NEAR(w[0], 1.0 / std::cyl_bessel_i(0.0, beta), 1e-15);  // the ends: 1 / I0(beta)
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(w[k], w[8 - k], 1e-15);
  // With beta 0 the Kaiser window is a boxcar: firwin with a narrow transition is the
  // normalised sinc.
  const std::vector<double> box = firwin_lowpass(6, 1.0, 4.0, kaiser_window(6, 0.0));
  double s = 0;
  std::vector<double> sinc(6);
  for (int k = 0; k < 6; ++k) {
    const double m = k - 2.5, c = 0.5;
    sinc[k] = c * std::sin(M_PI * c * m) / (M_PI * c * m);
    s += sinc[k];
  }
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(box[k], sinc[k] / s, 1e-12);
  // StyleGAN3-T 1024's first layer: up 2 (the lrelu's), 12 taps at fs = 2 x 16, cutoff and
  // half-width from the schedule: unit DC gain, symmetric, the centre taps the largest.
  const std::vector<Sg3Layer> sch = stylegan3_schedule(1024, 32768, 512);
  const std::vector<double> up =
      design_lowpass_filter(12, sch[0].cutoff, sch[0].half_width * 2, sch[0].sampling_rate * 2);
  ASSERT_EQ(up.size(), 12u);
  EXPECT_NEAR(std::accumulate(up.begin(), up.end(), 0.0), 1.0, 1e-12);
  for (int k = 0; k < 12; ++k) EXPECT_NEAR(up[k], up[11 - k], 1e-15);
  EXPECT_GT(up[5], up[4]);
  EXPECT_GT(up[4], up[0]);
  EXPECT_TRUE(design_lowpass_filter(1, 2.0, 1.0, 16.0).empty());
  // Radial (StyleGAN3-R): n x n, sums to 1, symmetric under both flips and the transpose.
  const std::vector<double> rad = design_lowpass_filter(12, 4.0, 3.0, 32.0, true);
  ASSERT_EQ(rad.size(), 144u);
  EXPECT_NEAR(std::accumulate(rad.begin(), rad.end(), 0.0), 1.0, 1e-12);
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 12; ++j) {
      EXPECT_NEAR(rad[i * 12 + j], rad[(11 - i) * 12 + j], 1e-15);
      EXPECT_NEAR(rad[i * 12 + j], rad[j * 12 + i], 1e-15);
    }
}
