// The training references (kernels/train_refs.h): every backward against central finite
// differences of its forward in double, the forwards and the optimizers against values worked
// out by hand, so that a wrong formula cannot pass the future GPU training tests silently.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "kernels/lrn.h"
#include "kernels/train_refs.h"

using namespace cnnbench;

namespace {

RefVec random_vec(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  RefVec v(n);
  for (double& x : v) x = u(rng);
  return v;
}

// The gradient of L(x) = sum_i f(x)_i * dy_i by central differences, step h.
RefVec numeric_grad(const std::function<RefVec(const RefVec&)>& f, RefVec x, const RefVec& dy,
                    double h = 1e-5) {
  RefVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    double lp = 0, lm = 0;
    x[i] = keep + h;
    const RefVec yp = f(x);
    x[i] = keep - h;
    const RefVec ym = f(x);
    x[i] = keep;
    for (size_t j = 0; j < dy.size(); ++j) lp += yp[j] * dy[j], lm += ym[j] * dy[j];
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

// ||analytic - numeric|| / ||numeric||; fails outright if the gradient is zero (a test that
// checks nothing) or the sizes differ.
double rel_error(const RefVec& analytic, const RefVec& numeric) {
  EXPECT_EQ(analytic.size(), numeric.size());
  double d = 0, n = 0;
  for (size_t i = 0; i < numeric.size() && i < analytic.size(); ++i)
    d += (analytic[i] - numeric[i]) * (analytic[i] - numeric[i]), n += numeric[i] * numeric[i];
  EXPECT_GT(n, 1e-12) << "a zero gradient checks nothing";
  return std::sqrt(d / std::max(n, 1e-300));
}

constexpr double kTol = 1e-6;

}  // namespace

TEST(TrainRefs, SoftmaxCrossEntropy) {
  // By hand: logits (0, ln 3), label 1: softmax (1/4, 3/4), loss -ln(3/4), dlogits (1/4, -1/4).
  XentRef r = softmax_xent_ref({0.0, std::log(3.0)}, {1}, 2);
  EXPECT_NEAR(r.loss, -std::log(0.75), 1e-15);
  EXPECT_NEAR(r.dlogits[0], 0.25, 1e-15);
  EXPECT_NEAR(r.dlogits[1], -0.25, 1e-15);
  // The mean over the batch and the head's weight (0.4 for an auxiliary head): image 2 has
  // logits (0, 0), label 0: loss ln 2.
  r = softmax_xent_ref({0.0, std::log(3.0), 0.0, 0.0}, {1, 0}, 2, 0.4);
  EXPECT_NEAR(r.loss, 0.4 * (-std::log(0.75) + std::log(2.0)) / 2, 1e-15);
  EXPECT_NEAR(r.dlogits[2], 0.4 * (0.5 - 1) / 2, 1e-15);
  // Large logits do not overflow.
  EXPECT_NEAR(softmax_xent_ref({1000.0, 1000.0}, {0}, 2).loss, std::log(2.0), 1e-12);
  // dlogits is the gradient of the loss.
  const int N = 3, K = 5;
  const std::vector<int> labels{4, 0, 2};
  const RefVec z = random_vec(N * K, 1, -3, 3);
  auto loss = [&](const RefVec& v) { return RefVec{softmax_xent_ref(v, labels, K, 0.4).loss}; };
  EXPECT_LT(rel_error(softmax_xent_ref(z, labels, K, 0.4).dlogits, numeric_grad(loss, z, {1.0})),
            kTol);
}

TEST(TrainRefs, BatchNormTraining) {
  // By hand: one channel, rows 1, 2, 3, 4: mean 2.5, biased variance 1.25.
  BnRef f = bn_forward_train_ref({1, 2, 3, 4}, 1, {2.0}, {0.5}, 0.0);
  EXPECT_DOUBLE_EQ(f.mean[0], 2.5);
  EXPECT_NEAR(f.invstd[0], 1 / std::sqrt(1.25), 1e-15);
  EXPECT_NEAR(f.y[0], 2 * (1 - 2.5) / std::sqrt(1.25) + 0.5, 1e-14);
  // Running statistics: momentum 0.1 and the unbiased variance 5/3.
  RefVec rm{0.0}, rv{1.0};
  bn_running_update_ref(rm, rv, {1, 2, 3, 4}, 1);
  EXPECT_NEAR(rm[0], 0.25, 1e-15);
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-15);

  // The backward against differences in x, gamma and beta: 2 x 3 x 2 pixels, 3 channels.
  const int C = 3;
  const RefVec x = random_vec(12 * C, 2, -2, 2), gamma = random_vec(C, 3, 0.5, 1.5),
               beta = random_vec(C, 4), dy = random_vec(12 * C, 5);
  const double eps = 1e-3;
  const BnRef fw = bn_forward_train_ref(x, C, gamma, beta, eps);
  const BnGradRef b = bn_backward_ref(x, dy, C, gamma, fw.mean, fw.invstd);
  auto in_x = [&](const RefVec& v) { return bn_forward_train_ref(v, C, gamma, beta, eps).y; };
  auto in_gamma = [&](const RefVec& v) { return bn_forward_train_ref(x, C, v, beta, eps).y; };
  auto in_beta = [&](const RefVec& v) { return bn_forward_train_ref(x, C, gamma, v, eps).y; };
  EXPECT_LT(rel_error(b.dx, numeric_grad(in_x, x, dy)), kTol);
  EXPECT_LT(rel_error(b.dgamma, numeric_grad(in_gamma, gamma, dy)), kTol);
  EXPECT_LT(rel_error(b.dbeta, numeric_grad(in_beta, beta, dy)), kTol);
}

TEST(TrainRefs, Activations) {
  RefVec x = random_vec(64, 6, -3, 3);
  for (double& v : x)
    if (std::fabs(v) < 0.05) v = 0.5;  // away from ReLU's kink
  const RefVec dy = random_vec(64, 7);
  auto relu = [](const RefVec& v) {
    RefVec y(v);
    for (double& e : y) e = std::max(e, 0.0);
    return y;
  };
  auto sigmoid = [](const RefVec& v) {
    RefVec y(v);
    for (double& e : y) e = 1 / (1 + std::exp(-e));
    return y;
  };
  auto silu = [&](const RefVec& v) {
    RefVec y = sigmoid(v);
    for (size_t i = 0; i < y.size(); ++i) y[i] *= v[i];
    return y;
  };
  EXPECT_LT(rel_error(relu_backward_ref(relu(x), dy), numeric_grad(relu, x, dy)), kTol);
  EXPECT_LT(rel_error(sigmoid_backward_ref(sigmoid(x), dy), numeric_grad(sigmoid, x, dy)), kTol);
  EXPECT_LT(rel_error(silu_backward_ref(x, dy), numeric_grad(silu, x, dy)), kTol);
  // By hand: SiLU'(0) = 1/2, sigmoid'(0) = 1/4.
  EXPECT_DOUBLE_EQ(silu_backward_ref({0.0}, {1.0})[0], 0.5);
  EXPECT_DOUBLE_EQ(sigmoid_backward_ref({0.5}, {1.0})[0], 0.25);
}

TEST(TrainRefs, Pooling) {
  // By hand: one 2x2 channel (1, 3 / 2, 0), 2x2 max: 3, and its gradient goes there.
  const PoolGeom one = pool_geom({1, 1, 2, 2}, 2, 2, 0);
  EXPECT_EQ(maxpool_forward_ref({1, 3, 2, 0}, one), RefVec{3});
  EXPECT_EQ(maxpool_backward_ref({1, 3, 2, 0}, {5}, one), (RefVec{0, 5, 0, 0}));
  // 3x3 average, stride 1, pad 1, at the corner of a 2x2 input: 4 values over 9 with padding
  // counted (PyTorch's default, Inception's), over 4 without.
  const RefVec x4{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(avgpool_forward_ref(x4, pool_geom({1, 1, 2, 2}, 3, 1, 1, true))[0], 10.0 / 9);
  EXPECT_DOUBLE_EQ(avgpool_forward_ref(x4, pool_geom({1, 1, 2, 2}, 3, 1, 1, false))[0], 2.5);
  // Padded positions never win a max: all-negative input.
  EXPECT_EQ(maxpool_forward_ref({-4, -3, -2, -1}, pool_geom({1, 1, 2, 2}, 3, 1, 1))[0], -1);

  for (const PoolGeom& g :
       {pool_geom({2, 3, 7, 7}, 3, 2, 0), pool_geom({2, 3, 6, 5}, 3, 2, 1),
        pool_geom({1, 4, 5, 5}, 3, 1, 1, true), pool_geom({1, 4, 5, 5}, 3, 1, 1, false),
        pool_geom({2, 2, 4, 4}, 4, 1, 0)}) {  // global
    SCOPED_TRACE(g.x.str() + " k" + std::to_string(g.kernel) + " s" + std::to_string(g.stride) +
                 " p" + std::to_string(g.pad));
    const RefVec x = random_vec(size_t(g.x.numel()), 8, -1, 1);
    const RefVec dy = random_vec(size_t(g.y.numel()), 9);
    auto mx = [&](const RefVec& v) { return maxpool_forward_ref(v, g); };
    auto av = [&](const RefVec& v) { return avgpool_forward_ref(v, g); };
    EXPECT_LT(rel_error(maxpool_backward_ref(x, dy, g), numeric_grad(mx, x, dy)), kTol);
    EXPECT_LT(rel_error(avgpool_backward_ref(dy, g), numeric_grad(av, x, dy)), kTol);
  }
}

TEST(TrainRefs, SqueezeExcitationScale) {
  const Dims d{2, 3, 2, 2};
  const RefVec x = random_vec(size_t(d.numel()), 10), gate = random_vec(6, 11, 0, 1),
               dy = random_vec(size_t(d.numel()), 12);
  const ScaleGradRef b = scale_backward_ref(x, gate, dy, d);
  auto in_x = [&](const RefVec& v) { return scale_forward_ref(v, gate, d); };
  auto in_gate = [&](const RefVec& v) { return scale_forward_ref(x, v, d); };
  EXPECT_LT(rel_error(b.dx, numeric_grad(in_x, x, dy)), kTol);
  EXPECT_LT(rel_error(b.dgate, numeric_grad(in_gate, gate, dy)), kTol);
  // By hand: image 1, channel 2 at pixel 0 is x[(1 * 4 + 0) * 3 + 2] times gate[1 * 3 + 2].
  EXPECT_DOUBLE_EQ(scale_forward_ref(x, gate, d)[14], x[14] * gate[5]);
}

TEST(TrainRefs, Lrn) {
  // The forward is kernels/lrn.h's reference.
  LrnSpec s;
  s.x = {2, 7, 2, 3};
  s.size = 5, s.alpha = 0.5, s.beta = 0.75, s.k = 2.0;
  const RefVec x = random_vec(size_t(s.x.numel()), 13, -2, 2);
  const std::vector<float> xf(x.begin(), x.end());
  const RefVec xr(xf.begin(), xf.end());
  const std::vector<double> want = lrn_reference(xf, s);
  const RefVec got = lrn_forward_ref(xr, {s.x, s.size, s.alpha, s.beta, s.k});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  // The backward, odd and even windows, with an alpha large enough that the window matters.
  for (const LrnGeom& g : {LrnGeom{s.x, 5, 0.5, 0.75, 2.0}, LrnGeom{s.x, 4, 3.0, 0.5, 1.0},
                           LrnGeom{{1, 3, 1, 1}, 3, 3.0, 1.0, 1.0}}) {
    SCOPED_TRACE(g.size);
    const RefVec xx = random_vec(size_t(g.x.numel()), 14, -2, 2);
    const RefVec dy = random_vec(xx.size(), 15);
    auto f = [&](const RefVec& v) { return lrn_forward_ref(v, g); };
    EXPECT_LT(rel_error(lrn_backward_ref(xx, dy, g), numeric_grad(f, xx, dy)), kTol);
  }
}

TEST(TrainRefs, Convolution) {
  // By hand: a 3x3 image 1..9, a 2x2 kernel of ones: 1+2+4+5, 2+3+5+6, 4+5+7+8, 5+6+8+9.
  const ConvGeom one = conv_geom({1, 1, 3, 3}, 1, 2, 2, 1, 0, 0);
  EXPECT_EQ(conv_forward_ref({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 1, 1}, {}, one),
            (RefVec{12, 16, 24, 28}));
  // Groups: two channels, two groups of 1x1 weights 2 and 3, bias (1, -1): each channel alone.
  const ConvGeom grouped = conv_geom({1, 2, 1, 1}, 2, 1, 1, 1, 0, 0, 1, 2);
  EXPECT_EQ(conv_forward_ref({5, 7}, {2, 3}, {1, -1}, grouped), (RefVec{11, 20}));

  struct Case {
    const char* what;
    ConvGeom g;
  };
  const Case cases[] = {
      {"3x3 stride 2 pad 1", conv_geom({2, 4, 5, 6}, 6, 3, 3, 2, 1, 1)},
      {"1x3 pad (0, 1), 2 groups", conv_geom({2, 4, 4, 5}, 6, 1, 3, 1, 0, 1, 1, 2)},
      {"7x1 pad (3, 0)", conv_geom({1, 3, 7, 4}, 2, 7, 1, 1, 3, 0)},
      {"depthwise 3x3, dilation 2", conv_geom({2, 4, 6, 6}, 4, 3, 3, 1, 2, 2, 2, 4)},
      {"depthwise 5x5 stride 2", conv_geom({1, 3, 7, 7}, 3, 5, 5, 2, 2, 2, 1, 3)},
      {"1x1 with bias", conv_geom({2, 5, 3, 3}, 4, 1, 1, 1, 0, 0)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const ConvGeom& g = c.g;
    const size_t wsize = size_t(g.y.c) * g.kernel * g.kernel_w * (g.x.c / g.groups);
    const RefVec x = random_vec(size_t(g.x.numel()), 16), w = random_vec(wsize, 17),
                 bias = random_vec(size_t(g.y.c), 18), dy = random_vec(size_t(g.y.numel()), 19);
    auto in_x = [&](const RefVec& v) { return conv_forward_ref(v, w, bias, g); };
    auto in_w = [&](const RefVec& v) { return conv_forward_ref(x, v, bias, g); };
    auto in_b = [&](const RefVec& v) { return conv_forward_ref(x, w, v, g); };
    EXPECT_LT(rel_error(conv_backward_data_ref(dy, w, g), numeric_grad(in_x, x, dy)), kTol);
    EXPECT_LT(rel_error(conv_backward_filter_ref(x, dy, g), numeric_grad(in_w, w, dy)), kTol);
    EXPECT_LT(rel_error(bias_backward_ref(dy, g.y.c), numeric_grad(in_b, bias, dy)), kTol);
  }
}

TEST(TrainRefs, Linear) {
  // By hand: x (1, 2), w rows (3, 4) and (5, 6), b (1, 0): 12, 17.
  EXPECT_EQ(linear_forward_ref({1, 2}, {3, 4, 5, 6}, {1, 0}, 1, 2, 2), (RefVec{12, 17}));
  const int N = 3, I = 4, O = 5;
  const RefVec x = random_vec(N * I, 20), w = random_vec(O * I, 21), b = random_vec(O, 22),
               dy = random_vec(N * O, 23);
  const LinearGradRef r = linear_backward_ref(x, w, dy, N, I, O);
  auto in_x = [&](const RefVec& v) { return linear_forward_ref(v, w, b, N, I, O); };
  auto in_w = [&](const RefVec& v) { return linear_forward_ref(x, v, b, N, I, O); };
  auto in_b = [&](const RefVec& v) { return linear_forward_ref(x, w, v, N, I, O); };
  EXPECT_LT(rel_error(r.dx, numeric_grad(in_x, x, dy)), kTol);
  EXPECT_LT(rel_error(r.dw, numeric_grad(in_w, w, dy)), kTol);
  EXPECT_LT(rel_error(r.db, numeric_grad(in_b, b, dy)), kTol);
}

TEST(TrainRefs, Dropout) {
  const std::vector<uint8_t> mask{1, 0, 1, 1, 0, 1};
  EXPECT_EQ(dropout_forward_ref({1, 2, 3, 4, 5, 6}, mask, 0.5), (RefVec{2, 0, 6, 8, 0, 12}));
  const RefVec x = random_vec(6, 24), dy = random_vec(6, 25);
  auto f = [&](const RefVec& v) { return dropout_forward_ref(v, mask, 0.2); };
  EXPECT_LT(rel_error(dropout_backward_ref(dy, mask, 0.2), numeric_grad(f, x, dy)), kTol);
}

// torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01) on p = 1 with gradient 0.5, twice:
//   step 1: d = 0.5 + 0.01 * 1 = 0.51; buf = d = 0.51 (no decay of an empty buffer);
//           p = 1 - 0.1 * 0.51 = 0.949
//   step 2: d = 0.5 + 0.01 * 0.949 = 0.50949; buf = 0.9 * 0.51 + 0.50949 = 0.96849;
//           p = 0.949 - 0.1 * 0.96849 = 0.852151
// Nesterov, step 1: d = 0.51 + 0.9 * 0.51 = 0.969, p = 1 - 0.0969 = 0.9031.
// Without momentum no buffer is kept: p = 1 - 0.1 * 0.51 each time.
TEST(TrainRefs, SgdAsTorchDefinesIt) {
  SgdRef h;
  h.lr = 0.1, h.momentum = 0.9, h.weight_decay = 0.01;
  RefVec p{1.0};
  SgdState s;
  sgd_step_ref(p, {0.5}, s, h);
  EXPECT_NEAR(p[0], 0.949, 1e-15);
  EXPECT_NEAR(s.momentum_buffer[0], 0.51, 1e-15);
  sgd_step_ref(p, {0.5}, s, h);
  EXPECT_NEAR(s.momentum_buffer[0], 0.96849, 1e-15);
  EXPECT_NEAR(p[0], 0.852151, 1e-15);
  h.nesterov = true;
  RefVec q{1.0};
  SgdState t;
  sgd_step_ref(q, {0.5}, t, h);
  EXPECT_NEAR(q[0], 0.9031, 1e-15);
  SgdRef plain;
  plain.lr = 0.1, plain.weight_decay = 0.01;
  RefVec r{1.0};
  SgdState u;
  sgd_step_ref(r, {0.5}, u, plain);
  EXPECT_TRUE(u.momentum_buffer.empty());
  EXPECT_NEAR(r[0], 0.949, 1e-15);
}

// torch.optim.Adam(lr=0.001) (betas 0.9, 0.999, eps 1e-8) on p = 1:
//   step 1, g = 0.5: m = 0.05, v = 0.00025; m / (1 - 0.9) = 0.5, v / (1 - 0.999) = 0.25,
//           sqrt 0.5; p = 1 - 0.001 * 0.5 / (0.5 + 1e-8) = 0.999000000020 (the first step moves
//           every parameter by about lr, whatever its gradient's size)
//   step 2, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225;
//           m_hat = 0.02 / 0.19 = 0.105263157894737, v_hat = 0.00031225 / 0.001999
//           = 0.156203101550775, sqrt 0.395225380...; p -= 0.001 * 0.105263 / 0.395225
//           = 0.000266337..., so p = 0.998733663...
// With weight_decay 0.1 (L2, added to the gradient, not AdamW's decoupled decay), step 1 sees
// g = 0.5 + 0.1 = 0.6 and still moves p by lr * 0.6 / (0.6 + 1e-8).
TEST(TrainRefs, AdamAsTorchDefinesIt) {
  AdamRef h;
  RefVec p{1.0};
  AdamState s;
  adam_step_ref(p, {0.5}, s, h);
  EXPECT_EQ(s.step, 1);
  EXPECT_NEAR(s.m[0], 0.05, 1e-16);
  EXPECT_NEAR(s.v[0], 0.00025, 1e-18);
  EXPECT_NEAR(p[0], 1 - 0.001 * 0.5 / (0.5 + 1e-8), 1e-15);
  adam_step_ref(p, {-0.25}, s, h);
  EXPECT_NEAR(s.m[0], 0.02, 1e-16);
  EXPECT_NEAR(s.v[0], 0.00031225, 1e-18);
  const double m_hat = 0.02 / 0.19, v_hat = 0.00031225 / 0.001999;
  EXPECT_NEAR(v_hat, 0.156203101550775, 1e-14);
  const double want = 1 - 0.001 * 0.5 / (0.5 + 1e-8) - 0.001 * m_hat / (std::sqrt(v_hat) + 1e-8);
  EXPECT_NEAR(p[0], want, 1e-15);
  EXPECT_NEAR(p[0], 0.998733663, 1e-9);
  AdamRef wd;
  wd.weight_decay = 0.1;
  RefVec q{1.0};
  AdamState t;
  adam_step_ref(q, {0.5}, t, wd);
  EXPECT_NEAR(t.m[0], 0.06, 1e-16);
  EXPECT_NEAR(q[0], 1 - 0.001 * 0.6 / (0.6 + 1e-8), 1e-15);
}

// GradScaler with growth_interval 3: three clean steps double the scale, an overflow halves it,
// skips the step and restarts the count.
TEST(TrainRefs, DynamicLossScaling) {
  LossScaleRef s;
  s.interval = 3;
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale, 65536.0);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale, 131072.0);
  EXPECT_TRUE(s.update(false));
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale, 65536.0);
  EXPECT_EQ(s.good_steps, 0);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale, 65536.0);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale, 131072.0);
}
