// The host references the GPU kernels are checked against, checked themselves against values
// worked out by hand (so a wrong formula in a reference cannot pass the GPU tests silently).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

#include "depthwise_cases.h"
#include "harness/check.h"
#include "kernels/depthwise.h"
#include "kernels/lrn.h"
#include "kernels/pointwise.h"
#include "kernels/se.h"
#include "kernels/storage.h"
#include "networks/registry.h"

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

using cnnbench::test::dw_spec;

TEST(KernelRefs, DepthwiseReferenceByHand) {
  // One 3x3 image, two channels: channel 0 holds 1..9 with all-ones weights (each output is its
  // window's sum), channel 1 holds -(1..9) with only the centre tap (the identity).
  DepthwiseSpec s = dw_spec({1, 2, 3, 3}, 3, 1);
  std::vector<float> x(18), w(18, 0.0f);
  for (int i = 0; i < 9; ++i) x[size_t(i) * 2] = float(i + 1), x[size_t(i) * 2 + 1] = -float(i + 1);
  for (int t = 0; t < 9; ++t) w[size_t(t)] = 1.0f;  // channel 0: [0][r][s]
  w[9 + 4] = 1.0f;                                  // channel 1: the centre
  const std::vector<double> y = depthwise_reference(x, w, {0.5f, 0.0f}, s);
  const double sums[9] = {12, 21, 16, 27, 45, 33, 24, 39, 28};  // 3x3 window sums, zero padded
  for (int i = 0; i < 9; ++i) {
    EXPECT_DOUBLE_EQ(y[size_t(i) * 2], sums[i] + 0.5) << i;
    EXPECT_DOUBLE_EQ(y[size_t(i) * 2 + 1], -double(i + 1)) << i;
  }
  // Stride 2 keeps the corners' windows; ReLU zeroes the negative channel.
  s = dw_spec({1, 2, 3, 3}, 3, 2, Act::ReLU);
  ASSERT_EQ(s.y.h, 2);
  const std::vector<double> z = depthwise_reference(x, w, {}, s);
  const double corners[4] = {12, 16, 24, 28};
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(z[size_t(i) * 2], corners[i]) << i;
    EXPECT_DOUBLE_EQ(z[size_t(i) * 2 + 1], 0.0) << i;
  }
  // A spec whose output size does not follow from the kernel is refused.
  s.y.h = 3;
  EXPECT_THROW(depthwise_reference(x, w, {}, s), std::invalid_argument);
}

TEST(KernelRefs, DepthwiseGeometry) {
  // EfficientNet-B6's largest depthwise layer at batch 1 (fp16): 7 groups of 8 channels, 36
  // strips of 4 pixels per block, 484 blocks; the weights take 9 taps x 56 floats.
  DepthwiseSpec s = dw_spec({1, 56, 264, 264}, 3, 1);
  DepthwiseGeometry g = depthwise_geometry(DType::F16, s, true);
  EXPECT_EQ(g.vec, 8);
  EXPECT_TRUE(g.fast);
  EXPECT_EQ(g.groups, 7);
  EXPECT_EQ(g.tx, 7);
  EXPECT_EQ(g.ty, 36);
  EXPECT_EQ(g.px, 4);
  EXPECT_EQ(g.strips_w, 66);
  EXPECT_EQ(g.grid_x, (264 * 66 + 35) / 36);
  EXPECT_EQ(g.grid_y, 1);
  EXPECT_EQ(g.smem, size_t(9 * 56 * 4));
  // Its last: 17x17x1344, k5. 168 groups in tiles of 28 (none wasted); too few blocks at any
  // strip width, so strips of one pixel.
  s = dw_spec({1, 1344, 17, 17}, 5, 1);
  g = depthwise_geometry(DType::F16, s, true);
  EXPECT_EQ(g.tx, 28);
  EXPECT_EQ(g.grid_y, 6);
  EXPECT_EQ(g.px, 1);
  EXPECT_EQ(depthwise_px_choices(DType::F16, s, true), (std::vector<int>{4, 2, 1}));
  // fp32 loads 4 channels at a time; 36 channels split into 4s but not into 8s.
  s = dw_spec({2, 36, 9, 11}, 3, 2);
  EXPECT_EQ(depthwise_geometry(DType::F32, s, true).vec, 4);
  g = depthwise_geometry(DType::BF16, s, true);
  EXPECT_EQ(g.vec, 1);
  EXPECT_FALSE(g.fast);
  EXPECT_EQ(g.px, 1);
  EXPECT_EQ(depthwise_px_choices(DType::BF16, s, true), std::vector<int>{1});
  EXPECT_THROW(depthwise_geometry(DType::BF16, s, true, 4), std::invalid_argument);
  // Pointers that are not 16-byte aligned take scalar loads; kernel 7 the generic kernel.
  s = dw_spec({1, 64, 20, 20}, 3, 1);
  EXPECT_EQ(depthwise_geometry(DType::F16, s, false).vec, 1);
  s = dw_spec({1, 64, 20, 20}, 7, 1);
  g = depthwise_geometry(DType::F16, s, true);
  EXPECT_EQ(g.vec, 8);
  EXPECT_FALSE(g.fast);
  // More than 2^31 elements (batch 256 at 264x264x128): the strips and grid in 64 bits.
  s = dw_spec({256, 128, 264, 264}, 3, 1);
  ASSERT_GT(s.x.numel(), int64_t(1) << 31);
  g = depthwise_geometry(DType::F16, s, true);
  EXPECT_EQ(g.strips, int64_t(256) * 264 * 66);
  EXPECT_GE(g.grid_x * g.ty, g.strips);
  // Every block fits: at most 256 threads, 48 KiB of weights; every strip and channel covered.
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int c : {1, 3, 8, 36, 56, 96, 296, 1344, 3840})
      for (int k : {3, 5, 7, 11})
        for (int stride : {1, 2})
          for (bool aligned : {true, false}) {
            const DepthwiseSpec d = dw_spec({3, c, 13, 10}, k, stride);
            for (int px : depthwise_px_choices(t, d, aligned)) {
              const DepthwiseGeometry q = depthwise_geometry(t, d, aligned, px);
              const std::string what = std::string(dtype_name(t)) + " C " + std::to_string(c) +
                                       " k" + std::to_string(k) + " px" + std::to_string(px);
              EXPECT_LE(q.tx * q.ty, 256) << what;
              EXPECT_LE(q.smem, size_t(48 * 1024)) << what;
              EXPECT_EQ(q.groups * q.vec, c) << what;
              EXPECT_GE(int64_t(q.grid_y) * q.tx, q.groups) << what;
              EXPECT_LT(int64_t(q.grid_y - 1) * q.tx, q.groups) << what;
              EXPECT_GE(q.grid_x * q.ty, q.strips) << what;
              EXPECT_EQ(q.strips, int64_t(3) * d.y.h * ((d.y.w + px - 1) / px)) << what;
            }
          }
}

TEST(KernelRefs, DepthwiseCoversEveryEfficientNetLayer) {
  // Each depthwise conv of B0..B7 at batch 1 and 256 takes the unrolled kernel with 16-byte
  // loads in every storage type, and our op would take it.
  int layers = 0;
  for (int v = 0; v <= 7; ++v) {
    const Graph g = build_network("efficientnet_b" + std::to_string(v));
    for (const Node& n : g.nodes()) {
      if (n.kind != OpKind::Conv || n.groups == 1) continue;
      const Dims in = g.node(n.inputs[0]).out;
      for (int batch : {1, 256})
        for (Precision p : {Precision::FP32, Precision::FP16, Precision::BF16}) {
          ConvSpec c;
          c.name = n.name;
          c.x = batched(in, batch), c.y = batched(n.out, batch);
          c.kernel = n.kernel, c.kernel_w = n.kernel_w, c.stride = n.stride;
          c.pad = n.pad, c.pad_w = n.pad_w, c.groups = n.groups, c.precision = p;
          c.act = Act::SiLU;
          std::string why;
          EXPECT_TRUE(depthwise_eligible(c, &why)) << n.name << ": " << why;
          const DepthwiseGeometry q = depthwise_geometry(storage_type(p), depthwise_spec(c), true);
          EXPECT_TRUE(q.fast) << n.name;
          EXPECT_EQ(q.vec, p == Precision::FP32 ? 4 : 8) << n.name;
        }
      ++layers;
    }
  }
  EXPECT_EQ(layers, 16 + 23 + 23 + 26 + 32 + 39 + 45 + 55);  // MBConv blocks of B0 .. B7
}

TEST(KernelRefs, DepthwiseEligibility) {
  ConvSpec c;
  c.x = {2, 32, 10, 10}, c.y = {2, 32, 10, 10};
  c.kernel = 3, c.pad = 1, c.groups = 32;
  std::string why;
  EXPECT_TRUE(depthwise_eligible(c, &why)) << why;
  c.stride = 2, c.y.h = c.y.w = 5;
  EXPECT_TRUE(depthwise_eligible(c, &why)) << why;
  ConvSpec d = c;
  d.groups = 1;
  EXPECT_FALSE(depthwise_eligible(d, &why));
  d = c, d.groups = 16;  // grouped, not depthwise
  EXPECT_FALSE(depthwise_eligible(d));
  d = c, d.residual = true;
  EXPECT_FALSE(depthwise_eligible(d, &why));
  EXPECT_EQ(why, "adds a residual");
  d = c, d.ld_y = 64;  // a slice of a concat buffer
  EXPECT_FALSE(depthwise_eligible(d));
  d = c, d.dilation = 2;
  EXPECT_FALSE(depthwise_eligible(d));
  d = c, d.kernel_w = 1;
  EXPECT_FALSE(depthwise_eligible(d));
  d = c, d.y.h = 6;  // not the size kernel, stride and pad give
  EXPECT_FALSE(depthwise_eligible(d, &why));
  EXPECT_NE(why.find("output size"), std::string::npos) << why;
}

TEST(KernelRefs, DepthwiseChoiceNames) {
  EXPECT_EQ(parse_depthwise_choice("auto"), DepthwiseChoice::Auto);
  EXPECT_EQ(parse_depthwise_choice("cudnn"), DepthwiseChoice::Cudnn);
  EXPECT_EQ(parse_depthwise_choice("cnnbench"), DepthwiseChoice::Cnnbench);
  EXPECT_STREQ(depthwise_choice_name(DepthwiseChoice::Cnnbench), "cnnbench");
  try {
    parse_depthwise_choice("ours");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--depthwise takes auto, cudnn or cnnbench, not 'ours'");
  }
}

// The kernels' own thread code, run on the host block by block (depthwise_emulate), against the
// reference: every kernel variant (unrolled k3/k5 at strides 1 and 2 and each px; generic for
// kernel 7, channels that do not split into 16-byte vectors, unaligned pointers), every
// activation, odd sizes, batch 2, partial channel tiles. Outputs start as NaN, and the bytes past
// the output must stay so.
TEST(KernelRefs, DepthwiseKernelCodeMatchesReferenceOnTheHost) {
  std::mt19937 rng(7);
  struct Case {
    Dims x;
    int k, stride;
  };
  const Case cases[] = {
      {{2, 64, 9, 11}, 3, 1},  {{1, 56, 13, 12}, 3, 2}, {{2, 48, 8, 7}, 5, 1},
      {{1, 40, 11, 13}, 5, 2}, {{2, 36, 7, 9}, 3, 1},   {{1, 13, 6, 7}, 5, 2},
      {{1, 24, 9, 9}, 7, 1},   {{1, 296, 5, 6}, 3, 1},  {{1, 1344, 3, 5}, 5, 1},
      {{2, 16, 1, 1}, 3, 1},   {{1, 8, 2, 9}, 5, 2},
  };
  const Act acts[] = {Act::None, Act::ReLU, Act::SiLU, Act::Sigmoid};
  int variants = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (const Case& c : cases)
      for (bool aligned : {true, false}) {
        const Act act = acts[variants % 4];
        const DepthwiseSpec s = dw_spec(c.x, c.k, c.stride, act);
        const int C = c.x.c;
        const float wb = 1.0f / float(c.k);
        std::uniform_real_distribution<float> ux(-2, 2), uw(-wb, wb), ub(-0.5f, 0.5f);
        std::vector<float> x(size_t(s.x.numel())), w(size_t(C) * c.k * c.k), b(C);
        for (float& v : x) v = ux(rng);
        for (float& v : w) v = uw(rng);
        for (float& v : b) v = ub(rng);
        // Rounded to the storage type, as the device holds them.
        const std::vector<uint8_t> xs = to_storage(x, t), ws = to_storage(w, t),
                                   bs = to_storage(b, t);
        x = from_storage(xs, t), w = from_storage(ws, t), b = from_storage(bs, t);
        const std::vector<double> ref = depthwise_reference(x, w, b, s);
        const size_t es = dtype_size(t), ybytes = size_t(s.y.numel()) * es, tail = 64;
        // Unaligned: x and y one element past a 16-byte boundary.
        const size_t off = aligned ? 0 : es;
        std::vector<float4> xbuf((xs.size() + off) / 16 + 1), ybuf((ybytes + off + tail) / 16 + 1);
        uint8_t* xp = reinterpret_cast<uint8_t*>(xbuf.data()) + off;
        uint8_t* yp = reinterpret_cast<uint8_t*>(ybuf.data()) + off;
        std::memcpy(xp, xs.data(), xs.size());
        for (int px : depthwise_px_choices(t, s, aligned)) {
          std::memset(yp, 0xFF, ybytes + tail);
          depthwise_emulate(t, xp, ws.data(), bs.data(), yp, s, px, aligned);
          const std::vector<float> y = from_storage(std::vector<uint8_t>(yp, yp + ybytes), t);
          double num = 0, den = 0;
          int bad = 0;
          for (size_t i = 0; i < y.size(); ++i) {
            bad += !std::isfinite(y[i]);
            num += (y[i] - ref[i]) * (y[i] - ref[i]);
            den += ref[i] * ref[i];
          }
          const std::string what = std::string(dtype_name(t)) + " " + s.x.str() + " k" +
                                   std::to_string(c.k) + " s" + std::to_string(c.stride) + " px" +
                                   std::to_string(px) + (aligned ? "" : " unaligned") + " " +
                                   act_name(act);
          EXPECT_EQ(bad, 0) << what << ": outputs left unwritten";
          EXPECT_LT(std::sqrt(num / std::max(den, 1e-300)), t == DType::F32 ? 1e-6 : 1e-2) << what;
          int stray = 0;
          for (size_t i = ybytes; i < ybytes + tail; ++i) stray += yp[i] != 0xFF;
          EXPECT_EQ(stray, 0) << what << ": wrote past the output";
          ++variants;
        }
      }
  EXPECT_GT(variants, 100);
}

// The engines' replay check (kernels/storage.h): inf and NaN must sit where the direct run put
// them, the finite rest agree to the tolerance.
TEST(ReplayCheck, NonFiniteValuesInPlaceAndTheRestClose) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  EXPECT_TRUE(cnnbench::replay_matches({1, 2, inf, nan}, {1, 2, inf, nan}));
  EXPECT_TRUE(cnnbench::replay_matches({1.0005f, 2}, {1, 2}));
  EXPECT_FALSE(cnnbench::replay_matches({1, 2, 3, nan}, {1, 2, inf, nan}));
  EXPECT_FALSE(cnnbench::replay_matches({1.1f, 2}, {1, 2}));
  EXPECT_FALSE(cnnbench::replay_matches({1, 2}, {1, 2, 3}));
  EXPECT_TRUE(cnnbench::replay_matches({nan}, {nan}));
}
