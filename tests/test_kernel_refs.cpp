// The host references the GPU kernels are checked against, checked themselves against values
// worked out by hand (so a wrong formula in a reference cannot pass the GPU tests silently).
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/lrn.h"
#include "kernels/pointwise.h"
#include "kernels/se.h"
#include "kernels/storage.h"

using namespace cnnbench;

TEST(KernelRefs, Activations) {
  EXPECT_EQ(act_ref(Act::ReLU, -1.0), 0.0);
  EXPECT_EQ(act_ref(Act::ReLU, 2.5), 2.5);
  EXPECT_EQ(act_ref(Act::None, -3.0), -3.0);
  EXPECT_DOUBLE_EQ(act_ref(Act::Sigmoid, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(act_ref(Act::SiLU, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(act_ref(Act::SiLU, 1.0), 1.0 / (1.0 + std::exp(-1.0)));
  EXPECT_DOUBLE_EQ(act_ref(Act::SiLU, -2.0), -2.0 / (1.0 + std::exp(2.0)));
  EXPECT_STREQ(act_name(Act::SiLU), "silu");
}

TEST(KernelRefs, LrnDividesAlphaBySizeAndClipsTheWindow) {
  // One pixel, channels 1, 2, 3; alpha / size = 1, beta = 1, k = 1.
  LrnSpec s;
  s.x = {1, 3, 1, 1};
  s.size = 3, s.alpha = 3.0, s.beta = 1.0, s.k = 1.0;
  const std::vector<double> y = lrn_reference({1, 2, 3}, s);
  EXPECT_DOUBLE_EQ(y[0], 1.0 / (1 + 1 + 4));      // window {0, 1}
  EXPECT_DOUBLE_EQ(y[1], 2.0 / (1 + 1 + 4 + 9));  // window {0, 1, 2}
  EXPECT_DOUBLE_EQ(y[2], 3.0 / (1 + 4 + 9));      // window {1, 2}
  // An even size takes one more channel above than below: window(0) = {0, 1, 2} for size 4.
  s.size = 4, s.alpha = 4.0, s.beta = 0.5, s.k = 2.0;
  const std::vector<double> z = lrn_reference({1, 2, 3}, s);
  EXPECT_DOUBLE_EQ(z[0], 1.0 / std::sqrt(2 + 1 + 4 + 9));
}

TEST(KernelRefs, SqueezeExcitationGatesEachChannelByItsImage) {
  // Two pixels, two channels: pooled = (2, 4). fc1 = [1, 0.5], so the hidden unit is
  // silu(2 + 2) = silu(4); fc2 has zero weights and biases (0, ln 3): gates 1/2 and 3/4.
  SeSpec s;
  s.x = {1, 2, 1, 2};
  s.squeeze = 1;
  const std::vector<float> x = {1, 3, 3, 5};  // NHWC: pixel 0 = (1, 3), pixel 1 = (3, 5)
  const std::vector<double> y =
      se_reference(x, {1.0f, 0.5f}, {0.0f}, {0.0f, 0.0f}, {0.0f, float(std::log(3.0))}, s);
  EXPECT_NEAR(y[0], 0.5, 1e-12);
  EXPECT_NEAR(y[1], 3 * 0.75, 1e-6);
  EXPECT_NEAR(y[2], 1.5, 1e-12);
  EXPECT_NEAR(y[3], 5 * 0.75, 1e-6);
  // With fc2 reading the hidden unit, the gate depends on it: sigmoid(silu(4)).
  const std::vector<double> g = se_reference(x, {1.0f, 0.5f}, {0.0f}, {1.0f, 0.0f}, {0, 0}, s);
  const double h = 4.0 / (1.0 + std::exp(-4.0));
  EXPECT_NEAR(g[0], 1.0 / (1.0 + std::exp(-h)), 1e-7);
  EXPECT_NEAR(g[1], 1.5, 1e-7);
}

TEST(KernelRefs, SqueezeExcitationPicksItsKernelsBySize) {
  // fc1 runs in the pool's last block while its weights are small (B0's widest, 1152 x 48), in
  // a kernel of its own beyond (B7's widest, 3840 x 160), at any batch.
  SeSpec s;
  s.x = {1, 1152, 7, 7};
  s.squeeze = 48;
  EXPECT_EQ(se_kernels(s, SeVariant::Split), "pool+fc1 | fc2+scale");
  EXPECT_EQ(se_kernels(s, SeVariant::OneBlock), "pool+excite | scale");
  EXPECT_EQ(se_heuristic(s), SeVariant::OneBlock);
  s.x = {32, 3840, 19, 19};
  s.squeeze = 160;
  EXPECT_EQ(se_kernels(s, SeVariant::Split), "pool | fc1 | fc2+scale");
  EXPECT_EQ(se_heuristic(s), SeVariant::Split);
  // The scratch holds at least the pooled and hidden values and a counter per image, and grows
  // with the batch.
  const size_t b32 = se_scratch_bytes(s);
  EXPECT_GE(b32, size_t(32) * (3840 + 160) * sizeof(float) + 32 * sizeof(unsigned));
  s.x.n = 1;
  EXPECT_LT(se_scratch_bytes(s), b32);
  // A large image goes to the split variant under heuristics, whatever its fc1.
  s.x = {1, 64, 300, 300};
  s.squeeze = 16;
  EXPECT_EQ(se_heuristic(s), SeVariant::Split);
}

TEST(KernelRefs, LayoutPermutationsRoundTrip) {
  // 2 x 3 x 2 x 2 NCHW: element (n, c, h, w) holds n*1000 + c*100 + h*10 + w.
  const Dims d{2, 3, 2, 2};
  std::vector<float> nchw;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w) nchw.push_back(float(n * 1000 + c * 100 + h * 10 + w));
  const std::vector<float> nhwc = nchw_to_nhwc(nchw, d);
  // NHWC index of (1, 2, 1, 0): ((1 * 2 + 1) * 2 + 0) * 3 + 2 = 20.
  EXPECT_EQ(nhwc[20], 1210.0f);
  EXPECT_EQ(nhwc[1], 100.0f);  // (0, 1, 0, 0)
  EXPECT_EQ(nhwc_to_nchw(nhwc, d), nchw);
}
