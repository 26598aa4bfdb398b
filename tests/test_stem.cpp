// The stem kernel (kernels/stem.h) without a GPU: its geometry's limits, and its threads' own code
// (the window gather, the weights' staging, the epilogue) run on the host by stem_emulate against
// a double-precision convolution, for the zoo's stem shapes at small sizes. The weights' padding
// channels hold NaN, so a kernel that read them would fail; y's channels past K in a slice, and
// the bytes past y, must stay as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "harness/check.h"
#include "kernels/conv_ref.h"
#include "kernels/stem.h"
#include "kernels/stem_wgrad.h"
#include "kernels/stem_wgrad_op.h"
#include "kernels/storage.h"
#include "kernels/train_kernels.h"
#include "kernels/train_refs.h"
#include "tests/stem_pool_case.h"

using namespace cnnbench;

namespace {

StemSpec spec_of(Dims x, int k, int kernel, int stride, int pad, Act act, int w_ld, int ld_y = 0,
                 int kernel_w = 0, int pad_w = -1) {
  StemSpec s;
  s.x = x;
  s.kernel = kernel, s.stride = stride, s.pad = pad, s.kernel_w = kernel_w, s.pad_w = pad_w;
  s.y = {x.n, k, (x.h + 2 * pad - kernel) / stride + 1, (x.w + 2 * s.pw() - s.kw()) / stride + 1};
  s.w_ld = w_ld, s.ld_y = ld_y;
  s.act = act;
  return s;
}

}  // namespace

TEST(Stem, KernelCodeMatchesTheConvolutionOnTheHost) {
  std::mt19937 rng(5);
  struct Case {
    Dims x;
    int k, kernel, stride, pad, w_ld, ld_y;
    Act act;
    int kernel_w = 0, pad_w = -1;  // a window wider than tall, and its own pad
  };
  // ResNet's 7x7/2 (w padded to 8), VGG's 3x3/1, AlexNet's 11x11/4 (pad 2), EfficientNet's
  // 3x3/2 with 32 and 40 outputs (SiLU), Inception-v3's 3x3/2 unpadded; a slice (ld_y 96); a
  // single channel; more pixels than one tile, and a partial last tile; output rows longer than
  // the rows kernel's 128 pixels (a full tile, then a partial one).
  const Case cases[] = {
      {{2, 3, 19, 17}, 64, 7, 2, 3, 8, 0, Act::ReLU},
      {{1, 3, 12, 13}, 64, 3, 1, 1, 8, 0, Act::ReLU},
      {{1, 3, 31, 29}, 64, 11, 4, 2, 8, 0, Act::ReLU},
      {{2, 3, 15, 15}, 32, 3, 2, 1, 8, 0, Act::SiLU},
      {{1, 3, 14, 16}, 40, 3, 2, 1, 8, 0, Act::SiLU},
      {{1, 3, 17, 17}, 32, 3, 2, 0, 3, 0, Act::None},
      {{1, 3, 9, 11}, 48, 5, 1, 2, 4, 96, Act::ReLU},
      {{2, 1, 10, 10}, 8, 3, 1, 1, 1, 0, Act::Sigmoid},
      {{2, 3, 13, 21}, 16, 3, 2, 1, 8, 0, Act::ReLU, 7, 3},  // 3x7 windows, pads 1 and 3
      {{1, 3, 4, 300}, 16, 3, 1, 1, 8, 0, Act::ReLU},        // rows of 300: tiles of 128, 128, 44
  };
  int n = 0;
  for (StemVariant variant : {StemVariant::Tile, StemVariant::Rows})
    for (DType t : {DType::F16, DType::BF16})
      for (const Case& c : cases) {
        const StemSpec s = spec_of(c.x, c.k, c.kernel, c.stride, c.pad, c.act, c.w_ld, c.ld_y,
                                   c.kernel_w, c.pad_w);
        const StemGeometry g = stem_geometry(s);
        const int C = c.x.c, R = c.kernel, S = s.kw(), K = c.k, ld = s.ldy();
        std::uniform_real_distribution<float> ux(-1, 1), uw(-0.2f, 0.2f), ub(-0.5f, 0.5f);
        std::vector<float> x(size_t(s.x.numel())), w(size_t(K) * R * S * c.w_ld), b(K);
        for (float& v : x) v = ux(rng);
        for (size_t i = 0; i < w.size(); ++i)
          w[i] = int(i % c.w_ld) < C ? uw(rng) : std::nanf("");  // padding: never to be read
        for (float& v : b) v = ub(rng);
        const std::vector<uint8_t> xs = to_storage(x, t), ws = to_storage(w, t),
                                   bs = to_storage(b, t);
        x = from_storage(xs, t), w = from_storage(ws, t), b = from_storage(bs, t);
        std::vector<float> wn(size_t(K) * R * S * C);  // the real channels, for the reference
        for (size_t row = 0; row < size_t(K) * R * S; ++row)
          for (int ch = 0; ch < C; ++ch) wn[row * C + ch] = w[row * c.w_ld + ch];
        const size_t es = dtype_size(t), pixels = size_t(g.pixels), tail = 64;
        const size_t ybytes = ((pixels - 1) * ld + K) * es;
        std::vector<float4> ybuf((ybytes + tail) / 16 + 1);
        uint8_t* yp = reinterpret_cast<uint8_t*>(ybuf.data());
        std::memset(yp, 0xFF, ybytes + tail);
        stem_emulate(t, xs.data(), ws.data(), bs.data(), yp, s, variant);
        const std::vector<float> y = from_storage(std::vector<uint8_t>(yp, yp + ybytes), t);
        ConvGeometry geom;
        geom.x = s.x, geom.y = s.y, geom.kernel_h = R, geom.kernel_w = S, geom.stride = c.stride;
        geom.pad_h = c.pad, geom.pad_w = s.pw();
        double num = 0, den = 0;
        int bad = 0, stray = 0;
        for (size_t p = 0; p < pixels; ++p) {
          const int ow = int(p % s.y.w), oh = int(p / s.y.w % s.y.h), nn = int(p / s.y.w / s.y.h);
          for (int k = 0; k < K; ++k) {
            const double ref =
                act_ref(c.act, b[k] + conv_window(geom, x.data(), wn.data(), nn, k, oh, ow));
            const float got = y[p * ld + k];
            bad += !std::isfinite(got);
            num += (got - ref) * (got - ref), den += ref * ref;
          }
          if (p + 1 < pixels)  // a slice's other channels are the other layers'
            for (size_t i = (p * ld + K) * es; i < (p + 1) * ld * es; ++i) stray += yp[i] != 0xFF;
        }
        for (size_t i = ybytes; i < ybytes + tail; ++i) stray += yp[i] != 0xFF;
        const std::string what = std::string(stem_variant_name(variant)) + " " + dtype_name(t) +
                                 " " + s.x.str() + " -> " + s.y.str() + " k" + std::to_string(R) +
                                 "x" + std::to_string(S) + " s" + std::to_string(c.stride) + " " +
                                 act_name(c.act);
        EXPECT_EQ(bad, 0) << what << ": outputs not finite or not written";
        EXPECT_LT(std::sqrt(num / std::max(den, 1e-300)), 1e-2) << what;
        EXPECT_EQ(stray, 0) << what << ": wrote outside its channels";
        EXPECT_EQ(g.taps, R * S * C) << what;
        EXPECT_EQ(g.taps_pad % 16, 0);
        EXPECT_EQ(g.tiles, int64_t((pixels + kStemTile - 1) / kStemTile));
        ++n;
      }
  EXPECT_EQ(n, 40);
  // ResNet-50's stem at 224: 147 taps padded to 160, and the shared memory it asks.
  const StemGeometry r = stem_geometry(spec_of({256, 3, 224, 224}, 64, 7, 2, 3, Act::ReLU, 8));
  EXPECT_EQ(r.taps, 147);
  EXPECT_EQ(r.taps_pad, 160);
  EXPECT_EQ(r.pixels, int64_t(256) * 112 * 112);
  EXPECT_EQ(r.smem, size_t(64) * 168 * 2 + size_t(128) * 168 * 2);
  // The rows kernel's ring for it: 7 rows and the next tile's 2, each of 127 * 2 * 3 + 24 = 786
  // elements (7 a thread, so loaded ahead), beside the weights' rows of 200 (ldw).
  const StemRowsGeometry rr =
      stem_rows_geometry(spec_of({256, 3, 224, 224}, 64, 7, 2, 3, Act::ReLU, 8));
  EXPECT_EQ(rr.row_width, 786);
  EXPECT_EQ(rr.ring_rows, 9);
  EXPECT_EQ(rr.tiles, int64_t(256) * 112);
  EXPECT_EQ(rr.smem, (size_t(64) * 200 + size_t(9) * 786) * 2);
  // Its tiles take the code with ResNet's shape compiled in (weights' rows of 200 included); the
  // same conv into 32 outputs, EfficientNet's 3x3/2 and a 4-channel image do not.
  EXPECT_TRUE(rr.resnet);
  EXPECT_TRUE(stem_rows_geometry(spec_of({1, 3, 20, 20}, 64, 7, 2, 3, Act::ReLU, 8)).resnet);
  EXPECT_FALSE(stem_rows_geometry(spec_of({2, 3, 224, 224}, 32, 7, 2, 3, Act::ReLU, 8)).resnet);
  EXPECT_FALSE(stem_rows_geometry(spec_of({2, 3, 224, 224}, 32, 3, 2, 1, Act::SiLU, 8)).resnet);
  EXPECT_FALSE(stem_rows_geometry(spec_of({2, 4, 224, 224}, 64, 7, 2, 3, Act::ReLU, 8)).resnet);
}

TEST(Stem, GeometryRefusesWhatTheKernelCannotRun) {
  auto refuses = [](StemSpec s, const char* needle) {
    try {
      stem_geometry(s);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const StemSpec ok = spec_of({1, 3, 32, 32}, 64, 7, 2, 3, Act::ReLU, 8);
  EXPECT_NO_THROW(stem_geometry(ok));
  StemSpec s = ok;
  s.x.c = 9;
  refuses(s, "channels, not 1 to 8");
  s = ok, s.y.c = 72;
  refuses(s, "outputs");
  s = ok, s.y.c = 60;
  refuses(s, "outputs");
  s = ok, s.ld_y = 68;
  refuses(s, "row stride");
  s = ok, s.w_ld = 2;
  refuses(s, "narrower");
  s = ok, s.y.h += 1;
  refuses(s, "what the kernel, stride and pads give");
  s = spec_of({1, 8, 64, 64}, 64, 9, 1, 4, Act::ReLU, 8);  // 648 taps
  refuses(s, "taps");
  // ConvSpec eligibility: fp16 and bf16 only, no residual, no groups.
  ConvSpec c;
  c.x = {1, 8, 32, 32}, c.y = {1, 64, 16, 16}, c.kernel = 7, c.stride = 2, c.pad = 3;
  c.precision = Precision::FP16;
  std::string why;
  EXPECT_TRUE(stem_eligible(c, 3, &why)) << why;
  EXPECT_EQ(stem_spec(c, 3).x.c, 3);
  EXPECT_EQ(stem_spec(c, 3).wld(), 8);
  c.precision = Precision::FP32;
  EXPECT_FALSE(stem_eligible(c, 3, &why));
  EXPECT_EQ(why, "fp16 and bf16 only");
  c.precision = Precision::BF16, c.residual = true;
  EXPECT_FALSE(stem_eligible(c, 3, &why));
  c.residual = false;
  EXPECT_TRUE(stem_eligible(c, 3));
  EXPECT_EQ(parse_stem_choice("cnnbench"), StemChoice::Cnnbench);
  EXPECT_STREQ(stem_choice_name(StemChoice::Auto), "auto");
  EXPECT_THROW(parse_stem_choice("ours"), UserError);
}

// An infinite input element reaches only the outputs whose windows hold it: both kernels read
// past a window's taps (the tile kernel's zero padding, the rows kernel's neighbouring columns,
// masked), and a zero weight times infinity would be NaN.
TEST(Stem, AnInfiniteInputReachesOnlyTheWindowsThatHoldIt) {
  const StemSpec s = spec_of({1, 3, 19, 17}, 16, 7, 2, 3, Act::None, 8);
  const int ih = 9, iw = 8;
  for (StemVariant variant : {StemVariant::Tile, StemVariant::Rows})
    for (DType t : {DType::F16, DType::BF16}) {
      std::vector<float> x(size_t(s.x.numel()), 0.5f), w(size_t(16) * 7 * 7 * 8, 0.01f), b(16);
      x[(size_t(ih) * s.x.w + iw) * 3 + 1] = INFINITY;
      const std::vector<uint8_t> xs = to_storage(x, t), ws = to_storage(w, t),
                                 bs = to_storage(b, t);
      const size_t count = size_t(s.y.numel());
      std::vector<uint8_t> ys(count * dtype_size(t));
      stem_emulate(t, xs.data(), ws.data(), bs.data(), ys.data(), s, variant);
      const std::vector<float> y = from_storage(ys, t);
      int wrong = 0, reached = 0;
      for (int oh = 0; oh < s.y.h; ++oh)
        for (int ow = 0; ow < s.y.w; ++ow) {
          const int dh = ih - (oh * 2 - 3), dw = iw - (ow * 2 - 3);
          const bool holds = dh >= 0 && dh < 7 && dw >= 0 && dw < 7;
          reached += holds;
          for (int k = 0; k < 16; ++k) {
            const float v = y[(size_t(oh) * s.y.w + ow) * 16 + k];
            wrong += holds ? !std::isinf(v) : !std::isfinite(v);
          }
        }
      EXPECT_GT(reached, 0);
      EXPECT_EQ(wrong, 0) << stem_variant_name(variant) << " " << dtype_name(t);
    }
}

// ---- The stem pool's backward kernel (kernels/train_kernels.cu), its threads run on the host ----
namespace cnnbench {
namespace {

// maxpool_k3s2p1_backward's ownership (a thread per output window owns a 2x2 block of inputs and
// judges the four windows holding them) against the reference's routing to each window's first
// maximum: odd and even sizes, ties (values from {-1, 0, 1}), ±0, ±inf and NaN, accumulate, fp32,
// fp16 and bf16;
// the form that reads a row's five packs at once and the one that reads a pack at a time
// (CNNBENCH_MAXPOOL_ONE_LOAD=1) bit for bit.
TEST(StemPool, K3S2P1BackwardThreadsMatchTheReference) {
  std::mt19937 rng(11);
  int cases = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int hw : {1, 2, 5, 8, 9})
      for (int values : {0, 1, 2})  // uniform; ties from {-1, 0, 1}; with ±0, ±inf and NaN
        for (bool accumulate : {false, true}) {
          const int C = t == DType::F32 ? 8 : 16;
          const Dims d{2, C, hw, hw + 1};
          const StemPoolCase pc = stem_pool_case(t, d, values, rng);
          const PoolGeom& g = pc.g;
          const PoolSpec& s = pc.s;
          const std::vector<uint8_t>&xs = pc.x, &dys = pc.dy;
          std::vector<uint8_t> dxs = pc.dx0;
          const std::vector<float> x = from_storage(xs, t), dy = from_storage(dys, t),
                                   dx0 = from_storage(dxs, t);
          if (!accumulate) std::fill(dxs.begin(), dxs.end(), uint8_t(0xFF));  // must be overwritten
          std::vector<uint8_t> dxs1 = dxs;
          maxpool_k3s2p1_backward_emulate(t, xs.data(), dys.data(), dxs.data(), s, accumulate);
          maxpool_k3s2p1_backward_emulate(t, xs.data(), dys.data(), dxs1.data(), s, accumulate,
                                          /*one_load=*/true);
          EXPECT_EQ(dxs, dxs1) << "the two forms differ: " << dtype_name(t) << " " << d.str();
          const RefVec ref =
              maxpool_backward_ref(RefVec(x.begin(), x.end()), RefVec(dy.begin(), dy.end()), g);
          const std::vector<float> got = from_storage(dxs, t);
          double worst = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double want = ref[i] + (accumulate ? dx0[i] : 0.0);
            worst = std::max(worst, std::abs(got[i] - want) / (1.0 + std::abs(want)));
          }
          // fp32: sums of up to 4 gradients in float; fp16, bf16: one rounding of the stored sum.
          EXPECT_LT(worst, t == DType::F32   ? 1e-6
                           : t == DType::F16 ? 2e-3
                                             : 4e-3)
              << dtype_name(t) << " " << d.str() << " values " << values
              << (accumulate ? " acc" : "");
          ++cases;
        }
  EXPECT_EQ(cases, 90);
}

// The training form that keeps each window's places (maxpool_k3s2p1_forward_places): its y is
// launch_maxpool's (fmaxf from -FLT_MAX), and the backward from its places gives the
// bits of maxpool_k3s2p1_backward (which reads x), over the cases above.
TEST(StemPool, K3S2P1PlacesGiveTheSameBits) {
  std::mt19937 rng(12);
  int cases = 0, taken = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int hw : {1, 2, 5, 8, 9})
      for (int values : {0, 1, 2})  // uniform; ties from {-1, 0, 1}; with ±0, ±inf and NaN
        for (bool accumulate : {false, true}) {
          const int C = t == DType::F32 ? 8 : 16;
          const Dims d{2, C, hw + 1, hw};
          const StemPoolCase pc = stem_pool_case(t, d, values, rng);
          const PoolGeom& g = pc.g;
          const PoolSpec& s = pc.s;
          const std::vector<uint8_t>&xs = pc.x, &dys = pc.dy;
          const std::vector<float> x = from_storage(xs, t);
          ASSERT_TRUE(maxpool_places_apply(t, s));
          ASSERT_EQ(maxpool_places_bytes(s), size_t(g.y.numel()));
          // y: fmaxf over the window's valid inputs from -FLT_MAX, as pool_vec.
          std::vector<float> want_y(size_t(g.y.numel()));
          for (int n = 0; n < d.n; ++n)
            for (int oh = 0; oh < g.y.h; ++oh)
              for (int ow = 0; ow < g.y.w; ++ow)
                for (int c = 0; c < C; ++c) {
                  float m = -FLT_MAX;
                  for (int r = 0; r < 3; ++r)
                    for (int q = 0; q < 3; ++q) {
                      const int ih = 2 * oh - 1 + r, iw = 2 * ow - 1 + q;
                      if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
                      m = fmaxf(m, x[((size_t(n) * d.h + ih) * d.w + iw) * C + c]);
                    }
                  want_y[((size_t(n) * g.y.h + oh) * g.y.w + ow) * C + c] = m;
                }
          std::vector<uint8_t> ys(want_y.size() * dtype_size(t), 0xEE),
              places(maxpool_places_bytes(s), 0xEE);
          maxpool_k3s2p1_forward_places_emulate(t, xs.data(), ys.data(), places.data(), s);
          // The same values (a zero's sign aside: fmaxf(-0, +0) may return either, and the host
          // library's and this test's may differ; on the device y is pool_vec's own fmaxf).
          const std::vector<float> got_y = from_storage(ys, t),
                                   want_ys = from_storage(to_storage(want_y, t), t);
          int differ = 0;
          for (size_t i = 0; i < got_y.size(); ++i)
            differ += !(got_y[i] == want_ys[i] || (std::isnan(got_y[i]) && std::isnan(want_ys[i])));
          EXPECT_EQ(differ, 0) << dtype_name(t) << " " << d.str() << " values " << values;
          for (uint8_t p : places) EXPECT_LE(p, 8) << "a place outside the window";
          std::vector<uint8_t> dx_x = pc.dx0;
          if (!accumulate) std::fill(dx_x.begin(), dx_x.end(), uint8_t(0xFF));  // overwritten
          std::vector<uint8_t> dx_places = dx_x;
          maxpool_k3s2p1_backward_emulate(t, xs.data(), dys.data(), dx_x.data(), s, accumulate);
          maxpool_k3s2p1_backward_places_emulate(t, places.data(), dys.data(), dx_places.data(), s,
                                                 accumulate);
          EXPECT_EQ(dx_places, dx_x)
              << "from the places against from x: " << dtype_name(t) << " " << d.str() << " values "
              << values << (accumulate ? " acc" : "");
          // And the reference's routing (the gather is shared with the form from x).
          const RefVec ref = maxpool_backward_ref(
              RefVec(x.begin(), x.end()),
              [&] {
                const std::vector<float> v = from_storage(dys, t);
                return RefVec(v.begin(), v.end());
              }(),
              g);
          const std::vector<float> got = from_storage(dx_places, t), old = from_storage(pc.dx0, t);
          double worst = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double want = ref[i] + (accumulate ? old[i] : 0.0);
            worst = std::max(worst, std::abs(got[i] - want) / (1.0 + std::abs(want)));
            taken += got[i] != 0.0f;
          }
          EXPECT_LT(worst, t == DType::F32 ? 1e-6 : 4e-3) << dtype_name(t) << " " << d.str();
          ++cases;
        }
  EXPECT_EQ(cases, 90);
  EXPECT_GT(taken, 0);
}

// The fused stem of training (launch_bn_relu_maxpool_forward_places): pooling BatchNorm + ReLU
// of x, computed pixel by pixel as the apply computes and rounds it, gives the bits of the apply
// followed by the pool with places (y and every place), with and without gamma and beta, over
// uniform values, ties and specials. A transform that rounded differently, or skipped the ReLU,
// changes y or a place.
TEST(StemPool, BnReluFusedIntoThePoolGivesTheSameBits) {
  std::mt19937 rng(31);
  int cases = 0, zeros = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int hw : {2, 5, 9})
      for (int values : {0, 1, 2})
        for (bool affine : {false, true}) {
          const int C = t == DType::F32 ? 8 : 16;
          const Dims d{2, C, hw + 1, hw};
          const StemPoolCase pc = stem_pool_case(t, d, values, rng);
          std::uniform_real_distribution<float> u(0, 1);
          std::vector<float> mean(C), invstd(C), gamma, beta;
          for (int c = 0; c < C; ++c) mean[c] = 2 * u(rng) - 1, invstd[c] = 0.5f + 1.5f * u(rng);
          if (affine)
            for (int c = 0; c < C; ++c)
              gamma.push_back(0.5f + u(rng)), beta.push_back(u(rng) - 0.5f);
          const std::vector<uint8_t> a = bn_relu_stored(t, pc.x, d, mean, invstd, gamma, beta);
          std::vector<uint8_t> y_two(size_t(pc.g.y.numel()) * dtype_size(t), 0xEE),
              pl_two(maxpool_places_bytes(pc.s), 0xEE);
          maxpool_k3s2p1_forward_places_emulate(t, a.data(), y_two.data(), pl_two.data(), pc.s);
          std::vector<uint8_t> y_one(y_two.size(), 0xDD), pl_one(pl_two.size(), 0xDD);
          bn_relu_maxpool_k3s2p1_forward_places_emulate(
              t, pc.x.data(), mean.data(), invstd.data(), affine ? gamma.data() : nullptr,
              affine ? beta.data() : nullptr, y_one.data(), pl_one.data(), pc.s);
          const std::string what = std::string(dtype_name(t)) + " " + d.str() + " values " +
                                   std::to_string(values) + (affine ? " affine" : "");
          EXPECT_EQ(y_one, y_two) << what << " y";
          EXPECT_EQ(pl_one, pl_two) << what << " places";
          for (float v : from_storage(y_one, t)) zeros += v == 0.0f;
          ++cases;
        }
  EXPECT_EQ(cases, 54);
  EXPECT_GT(zeros, 0);  // the ReLU took whole windows to 0: ties at zero were compared
}

TEST(StemPool, K3S2P1PlacesRefuseWhatTheyCannotServe) {
  std::vector<float> b(4096);
  std::vector<uint8_t> pl(4096);
  PoolSpec s;
  s.x = {1, 8, 8, 8}, s.y = {1, 8, 4, 4}, s.kernel = 2, s.stride = 2, s.pad = 0;  // not k3 s2 p1
  EXPECT_FALSE(maxpool_places_apply(DType::F32, s));
  EXPECT_THROW(maxpool_k3s2p1_forward_places_emulate(DType::F32, b.data(), b.data(), pl.data(), s),
               std::invalid_argument);
  s.kernel = 3, s.pad = 1;
  EXPECT_TRUE(maxpool_places_apply(DType::F32, s));
  s.ld_x = 12;  // rows wider than the channels
  EXPECT_FALSE(maxpool_places_apply(DType::F32, s));
  EXPECT_THROW(
      maxpool_k3s2p1_backward_places_emulate(DType::F32, pl.data(), b.data(), b.data(), s, false),
      std::invalid_argument);
  s.ld_x = 0, s.x.c = s.y.c = 12;  // 12 fp16 channels: not packs of 8
  EXPECT_FALSE(maxpool_places_apply(DType::F16, s));
}

TEST(StemPool, K3S2P1BackwardRefusesOtherPools) {
  PoolSpec s;
  s.x = {1, 8, 8, 8}, s.y = {1, 8, 4, 4}, s.kernel = 2, s.stride = 2, s.pad = 0;
  std::vector<float> b(512);
  EXPECT_THROW(maxpool_k3s2p1_backward_emulate(DType::F32, b.data(), b.data(), b.data(), s, false),
               std::invalid_argument);
}

}  // namespace
}  // namespace cnnbench

// ---- The stem's weight gradient (kernels/stem_wgrad.cu), its threads run on the host ----
namespace cnnbench {
namespace {

struct WgradCase {
  Dims x;
  int K, kernel, stride, pad;
  int max_blocks = 0;  // fewer blocks than tiles: each block walks the ring over many tiles
};

// The kernels' own thread code, the fragments multiplied in float, against the direct loops of
// conv_backward_filter_ref: ResNet's stem geometry (7x7/2, pad 3, 3 channels) at small sizes, a
// row wider than a tile (two tiles, the second partial), and a 3x3/1 conv of 4 channels into 32
// outputs; fp16 and bf16; dw overwritten and accumulated. With fewer blocks than tiles, a block's
// tiles run down an image's rows (the next tile's new rows into the ring), across to the next image
// or column segment (the ring filled whole), and with a stride as large as the kernel (no rows
// shared: filled whole every tile).
TEST(StemWgrad, EmulationMatchesTheReference) {
  std::mt19937 rng(21);
  const WgradCase cases[] = {{{2, 3, 9, 11}, 64, 7, 2, 3},      {{1, 3, 5, 240}, 16, 7, 2, 3},
                             {{2, 4, 6, 7}, 32, 3, 1, 1},       {{2, 3, 9, 11}, 64, 7, 2, 3, 3},
                             {{1, 3, 13, 240}, 16, 7, 2, 3, 2}, {{2, 4, 6, 7}, 32, 3, 1, 1, 2},
                             {{1, 3, 12, 12}, 16, 3, 3, 0, 2}};
  int checked = 0;
  for (DType t : {DType::F16, DType::BF16})
    for (const WgradCase& c : cases)
      for (bool accumulate : {false, true}) {
        const ConvGeom g = conv_geom(c.x, c.K, c.kernel, c.kernel, c.stride, c.pad, c.pad);
        StemWgradSpec s;
        s.x = g.x, s.y = g.y, s.kernel = c.kernel, s.stride = c.stride, s.pad = c.pad;
        s.accumulate = accumulate, s.max_blocks = c.max_blocks;
        std::uniform_real_distribution<float> u(-1, 1);
        std::vector<float> x(size_t(g.x.numel())), dy(size_t(g.y.numel()));
        for (float& v : x) v = u(rng);
        for (float& v : dy) v = u(rng);
        const std::vector<uint8_t> xs = to_storage(x, t), dys = to_storage(dy, t);
        x = from_storage(xs, t), dy = from_storage(dys, t);
        const size_t n = size_t(c.K) * c.kernel * c.kernel * c.x.c;
        std::vector<float> dw(n), dw0(n);
        for (float& v : dw0) v = u(rng);
        dw = dw0;
        stem_wgrad_emulate(t, xs.data(), dys.data(), dw.data(), s);
        const RefVec ref =
            conv_backward_filter_ref(RefVec(x.begin(), x.end()), RefVec(dy.begin(), dy.end()), g);
        double num = 0, den = 0;
        for (size_t i = 0; i < n; ++i) {
          const double want = ref[i] + (accumulate ? dw0[i] : 0.0);
          num += (dw[i] - want) * (dw[i] - want), den += want * want;
        }
        EXPECT_LT(std::sqrt(num / den), 1e-5) << dtype_name(t) << " " << g.x.str() << " -> "
                                              << g.y.str() << (accumulate ? " accumulate" : "");
        ++checked;
      }
  EXPECT_EQ(checked, 28);
}

TEST(StemWgrad, GeometryRefusesWhatTheKernelCannotServe) {
  auto spec = [](Dims x, int K, int kernel, int stride, int pad) {
    const ConvGeom g = conv_geom(x, K, kernel, kernel, stride, pad, pad);
    StemWgradSpec s;
    s.x = g.x, s.y = g.y, s.kernel = kernel, s.stride = stride, s.pad = pad;
    return s;
  };
  const StemWgradSpec r50 = spec({256, 3, 224, 224}, 64, 7, 2, 3);
  const StemWgradGeometry g = stem_wgrad_geometry(r50);
  EXPECT_EQ(g.taps_row, 21);
  EXPECT_EQ(g.kr, 24);
  EXPECT_EQ(g.cols, 168);
  EXPECT_EQ(g.tiles, 256 * 112);
  EXPECT_EQ(g.blocks, kStemWgradBlocks);
  EXPECT_EQ(g.scratch, size_t(kStemWgradBlocks) * 64 * 168 * sizeof(float));
  EXPECT_EQ(g.row_width, 688);  // (111 * 2 + 7) * 3, even
  EXPECT_TRUE(g.rows_ahead);
  EXPECT_EQ(g.ring_rows, 9);  // 7 rows and the next tile's 2
  EXPECT_EQ(g.smem, (9 * 688 + 2 * 112 * 64) * 2u);
  const StemWgradGeometry s3 = stem_wgrad_geometry(spec({1, 3, 12, 12}, 16, 3, 3, 0));
  EXPECT_FALSE(s3.rows_ahead);  // stride 3 = the kernel: no rows shared
  EXPECT_EQ(s3.ring_rows, 3);
  StemWgradSpec few = r50;
  few.max_blocks = 5;
  EXPECT_EQ(stem_wgrad_geometry(few).blocks, 5);
  few.max_blocks = -1;
  EXPECT_THROW(stem_wgrad_geometry(few), std::invalid_argument);
  EXPECT_TRUE(stem_wgrad_eligible(DType::F16, r50));
  EXPECT_FALSE(stem_wgrad_eligible(DType::F32, r50));
  EXPECT_THROW(stem_wgrad_geometry(spec({1, 9, 16, 16}, 64, 7, 2, 3)), std::invalid_argument);
  EXPECT_THROW(stem_wgrad_geometry(spec({1, 3, 16, 16}, 24, 7, 2, 3)), std::invalid_argument);
  EXPECT_THROW(stem_wgrad_geometry(spec({1, 3, 16, 16}, 48, 7, 2, 3)), std::invalid_argument);
  EXPECT_THROW(stem_wgrad_geometry(spec({1, 3, 16, 16}, 80, 7, 2, 3)), std::invalid_argument);
  EXPECT_THROW(stem_wgrad_geometry(spec({1, 8, 32, 32}, 64, 11, 4, 2)),  // 11 x 88 taps
               std::invalid_argument);
  StemWgradSpec wrong = r50;
  wrong.y.h = 111;
  EXPECT_THROW(stem_wgrad_geometry(wrong), std::invalid_argument);
}

// The training step's choice of the stem's weight gradient: CNNBENCH_STEM_WGRAD's values, and the
// race's verdict (kernels/stem_wgrad_op.h): ours only where it was timed and ran faster.
TEST(StemWgrad, ChoiceAndRaceVerdict) {
  EXPECT_EQ(stem_wgrad_choice(0), KernelChoice::Cudnn);
  EXPECT_EQ(stem_wgrad_choice(1), KernelChoice::Cnnbench);
  EXPECT_EQ(stem_wgrad_choice(2), KernelChoice::Auto);
  EXPECT_TRUE(stem_wgrad_ours_wins(481.0, 876.9));   // call 127 at 256
  EXPECT_FALSE(stem_wgrad_ours_wins(876.9, 481.0));  // cuDNN faster
  EXPECT_FALSE(stem_wgrad_ours_wins(500.0, 500.0));  // a tie keeps cuDNN's checked plan
  EXPECT_FALSE(stem_wgrad_ours_wins(0.0, 876.9));    // ours refused (not timed)
  EXPECT_FALSE(stem_wgrad_ours_wins(481.0, 0.0));    // cuDNN not timed
}

}  // namespace
}  // namespace cnnbench
