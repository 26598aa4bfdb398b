// Each op against a CPU reference in double on fresh random inputs (the inputs rounded to the
// storage type first), by relative L2 error: 1e-5 fp32, 1e-3 tf32, 1e-2 fp16/bf16. Outputs are
// poisoned with NaN before every run, so an element left unwritten fails.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdio>

#include "gpu_util.h"
#include "kernels/conv.h"
#include "kernels/depthwise.h"
#include "kernels/matmul.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/stem.h"
#include "kernels/storage.h"
#include "kernels/stylegan.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

const Precision kAll[] = {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16};

struct ConvCase {
  int n, c, h, k, kernel, stride, pad;
  bool residual, relu;
  bool after_act = false;  // y = silu(conv + b) + z (YOLOR), instead of relu?(conv + b + z)
};

// x NHWC, w KRSC, out NHWC.
std::vector<double> conv_reference(const ConvSpec& s, const std::vector<float>& x,
                                   const std::vector<float>& w, const std::vector<float>& b,
                                   const std::vector<float>& z) {
  const Dims X = s.x, Y = s.y;
  const int R = s.kernel;
  std::vector<double> y(size_t(Y.numel()));
  for (int n = 0; n < Y.n; ++n)
    for (int oh = 0; oh < Y.h; ++oh)
      for (int ow = 0; ow < Y.w; ++ow)
        for (int k = 0; k < Y.c; ++k) {
          double acc = b[k];
          for (int r = 0; r < R; ++r) {
            const int ih = oh * s.stride - s.pad + r;
            if (ih < 0 || ih >= X.h) continue;
            for (int q = 0; q < R; ++q) {
              const int iw = ow * s.stride - s.pad + q;
              if (iw < 0 || iw >= X.w) continue;
              const float* xp = &x[((size_t(n) * X.h + ih) * X.w + iw) * X.c];
              const float* wp = &w[((size_t(k) * R + r) * R + q) * X.c];
              for (int c = 0; c < X.c; ++c) acc += double(xp[c]) * wp[c];
            }
          }
          const size_t i = ((size_t(n) * Y.h + oh) * Y.w + ow) * Y.c + k;
          if (s.residual && !s.residual_after_act) acc += z[i];
          acc = act_ref(s.act, acc);
          if (s.residual && s.residual_after_act) acc += z[i];
          y[i] = acc;
        }
  return y;
}

LayerRecord check_conv(const ConvCase& cc, Precision p, EngineMode mode, std::mt19937& rng,
                       double graph_tune_us = 100) {
  GpuContext ctx;
  ctx.graph_tune_below_us = graph_tune_us;
  ConvSpec s;
  s.name = "test.conv";
  s.x = {cc.n, cc.c, cc.h, cc.h};
  const int oh = (cc.h + 2 * cc.pad - cc.kernel) / cc.stride + 1;
  s.y = {cc.n, cc.k, oh, oh};
  s.kernel = cc.kernel, s.stride = cc.stride, s.pad = cc.pad;
  s.precision = p;
  s.residual = cc.residual;
  s.residual_after_act = cc.after_act;
  s.act = cc.after_act ? Act::SiLU : cc.relu ? Act::ReLU : Act::None;
  const DType t = storage_type(p);
  const float wb = std::sqrt(3.0f / float(cc.c * cc.kernel * cc.kernel));
  const auto x = rounded(random_vector(size_t(s.x.numel()), rng), t);
  const auto w =
      rounded(random_vector(size_t(cc.k) * cc.c * cc.kernel * cc.kernel, rng, -wb, wb), t);
  const auto b = rounded(random_vector(size_t(cc.k), rng, -0.5f, 0.5f), t);
  const auto z = rounded(random_vector(size_t(s.y.numel()), rng), t);
  DeviceBuffer dx(x, t), dw(w, t), db(b, t), dz(z, t), dy(size_t(s.y.numel()), t);
  ConvOp op(s, {dx.get(), dw.get(), db.get(), cc.residual ? dz.get() : nullptr, dy.get()});
  TuneScratch scratch;
  scratch.bytes = size_t(64) << 20;
  DeviceBuffer ws(scratch.bytes, DType::F32);
  scratch.ptr = ws.get();
  op.prepare(ctx, mode, 4, scratch);
  op.bind_workspace(ws.get(), scratch.bytes);
  dy.poison();
  op.run(ctx.stream);
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  const double err = rel_l2(dy.download(), conv_reference(s, x, w, b, z));
  std::printf("  %-26s %-4s %-9s rel_l2 %.2e  %s %s\n", s.op_name().c_str(), precision_name(p),
              engine_mode_name(mode), err, op.record().engine.c_str(),
              op.fused() ? "fused" : "unfused");
  EXPECT_LT(err, tolerance(p)) << s.signature() << " " << op.record().engine;
  return op.record();
}

}  // namespace

TEST(GpuOps, FusedConvMatchesReference) {
  std::mt19937 rng(std::random_device{}());
  const ConvCase cases[] = {
      {2, 32, 14, 64, 3, 1, 1, false, true},        // 3x3 + bias + relu
      {2, 64, 14, 256, 1, 1, 0, true, true},        // bottleneck conv3: + residual + relu
      {2, 64, 14, 64, 3, 2, 1, false, false},       // strided 3x3, bias only
      {2, 3, 32, 64, 7, 2, 3, false, true},         // the stem
      {2, 64, 14, 128, 1, 2, 0, false, false},      // downsample projection
      {2, 32, 14, 32, 3, 1, 1, true, false, true},  // YOLOR's bottleneck: x + silu(conv + b)
  };
  for (Precision p : kAll)
    for (const ConvCase& c : cases) check_conv(c, p, EngineMode::Heuristic, rng);
  check_conv(cases[1], Precision::FP16, EngineMode::Autotune, rng);
  check_conv(cases[0], Precision::FP32, EngineMode::Autotune, rng);
  check_conv(cases[5], Precision::FP16, EngineMode::Autotune, rng);
}

// Autotune's graph round (GpuContext::graph_tune_below_us): a conv whose fastest eager time is
// under the threshold is timed again replayed from a CUDA graph, and its record says so; with the
// round off, or a threshold below every candidate's eager time, the eager time stands.
TEST(GpuOps, AutotuneGraphRoundRetimesSmallConvsAsReplayed) {
  std::mt19937 rng(17);
  const ConvCase small{1, 64, 14, 256, 1, 1, 0, true, true};  // a batch-1 bottleneck conv3
  const LayerRecord g = check_conv(small, Precision::FP16, EngineMode::Autotune, rng, 1e5);
  EXPECT_TRUE(g.tuned_in_graph) << g.engine;
  EXPECT_GT(g.tuned_us, 0.0);
  EXPECT_GT(g.tuned_eager_us, 0.0);
  EXPECT_TRUE(g.rejected.empty()) << g.rejected.front();
  std::printf("  graph round: %s %.2f us replayed, %.2f us eager\n", g.engine.c_str(), g.tuned_us,
              g.tuned_eager_us);
  const LayerRecord off = check_conv(small, Precision::FP16, EngineMode::Autotune, rng, 0);
  EXPECT_FALSE(off.tuned_in_graph);
  EXPECT_DOUBLE_EQ(off.tuned_us, off.tuned_eager_us);
  const LayerRecord under = check_conv(small, Precision::FP16, EngineMode::Autotune, rng, 1e-3);
  EXPECT_FALSE(under.tuned_in_graph);  // no candidate runs under a nanosecond
  const LayerRecord heur = check_conv(small, Precision::FP16, EngineMode::Heuristic, rng, 1e5);
  EXPECT_FALSE(heur.tuned_in_graph);  // heuristics time nothing
  EXPECT_EQ(heur.tuned_us, 0.0);
}

TEST(GpuOps, PoolingMatchesReference) {
  std::mt19937 rng(std::random_device{}());
  for (Precision p : kAll) {
    const DType t = storage_type(p);
    // kind 0: max 3x3/2; 1: average counting padding; 2: average of the valid positions; 3: the
    // average counting padding at stride 2; 4: max at stride 1. 24 channels take the vectorised
    // kernels in every type; 12 the per-element one in fp16 and bf16 (12 is no multiple of 8).
    for (int C : {24, 12})
      for (int kind = 0; kind < 5; ++kind) {
        const bool is_max = kind == 0 || kind == 4;
        PoolSpec s;
        s.x = {2, C, 15, 15};
        s.kernel = 3, s.stride = kind == 0 || kind == 3 ? 2 : 1, s.pad = 1;
        s.count_include_pad = kind != 2;
        const int o = (15 + 2 - 3) / s.stride + 1;
        s.y = {2, C, o, o};
        const auto x = rounded(random_vector(size_t(s.x.numel()), rng), t);
        DeviceBuffer dx(x, t), dy(size_t(s.y.numel()), t);
        if (is_max)
          launch_maxpool(t, dx.get(), dy.get(), s, nullptr);
        else
          launch_avgpool(t, dx.get(), dy.get(), s, nullptr);
        std::vector<double> ref(size_t(s.y.numel()));
        for (int n = 0; n < 2; ++n)
          for (int oh = 0; oh < o; ++oh)
            for (int ow = 0; ow < o; ++ow)
              for (int c = 0; c < C; ++c) {
                double acc = is_max ? -DBL_MAX : 0;
                int count = 0;
                for (int r = 0; r < 3; ++r)
                  for (int q = 0; q < 3; ++q) {
                    const int h = oh * s.stride - 1 + r, w = ow * s.stride - 1 + q;
                    if (h < 0 || h >= 15 || w < 0 || w >= 15) continue;
                    const double v = x[((size_t(n) * 15 + h) * 15 + w) * C + c];
                    acc = is_max ? std::max(acc, v) : acc + v;
                    ++count;
                  }
                // PyTorch's padded count stops at the padded image's far edge (15 + 1).
                const int h0 = oh * s.stride - 1, w0 = ow * s.stride - 1;
                const int padded = (std::min(h0 + 3, 16) - h0) * (std::min(w0 + 3, 16) - w0);
                if (!is_max) acc /= s.count_include_pad ? padded : count;
                ref[((size_t(n) * o + oh) * o + ow) * C + c] = acc;
              }
        const double err = rel_l2(dy.download(), ref);
        EXPECT_LT(err, tolerance(p))
            << "pool kind " << kind << ", " << C << " channels, " << precision_name(p);
      }
    // Global average pool.
    const Dims d{3, 40, 7, 7};
    const auto x = rounded(random_vector(size_t(d.numel()), rng), t);
    DeviceBuffer dx(x, t), dy(size_t(d.n * d.c), t);
    PoolSpec gs;
    gs.x = d;
    gs.y = {d.n, d.c, 1, 1};
    launch_global_avgpool(t, dx.get(), dy.get(), gs, nullptr);
    std::vector<double> ref(size_t(d.n * d.c), 0.0);
    for (int n = 0; n < d.n; ++n)
      for (int i = 0; i < 49; ++i)
        for (int c = 0; c < d.c; ++c)
          ref[size_t(n) * d.c + c] += x[(size_t(n) * 49 + i) * d.c + c] / 49.0;
    EXPECT_LT(rel_l2(dy.download(), ref), tolerance(p)) << "global avgpool " << precision_name(p);
  }
}

TEST(GpuOps, LinearWithBiasMatchesReference) {
  std::mt19937 rng(std::random_device{}());
  for (Precision p : kAll)
    for (EngineMode mode : {EngineMode::Heuristic, EngineMode::Autotune}) {
      GpuContext ctx;
      const DType t = storage_type(p);
      LinearSpec s;
      s.name = "test.fc";
      s.batch = 5, s.in_features = 512, s.out_features = 100, s.precision = p;
      const auto x = rounded(random_vector(size_t(s.batch) * s.in_features, rng), t);
      const auto w =
          rounded(random_vector(size_t(s.out_features) * s.in_features, rng, -0.05f, 0.05f), t);
      const auto b = rounded(random_vector(size_t(s.out_features), rng), t);
      DeviceBuffer dx(x, t), dw(w, t), db(b, t), dy(size_t(s.batch) * s.out_features, t);
      LinearOp op(s, dx.get(), dw.get(), db.get(), dy.get());
      TuneScratch scratch;
      scratch.bytes = size_t(32) << 20;
      DeviceBuffer ws(scratch.bytes, DType::F32);
      scratch.ptr = ws.get();
      op.prepare(ctx, mode, 4, scratch);
      op.bind_workspace(ws.get(), scratch.bytes);
      dy.poison();
      op.run(ctx.stream);
      std::vector<double> ref(size_t(s.batch) * s.out_features);
      for (int n = 0; n < s.batch; ++n)
        for (int o = 0; o < s.out_features; ++o) {
          double acc = b[o];
          for (int i = 0; i < s.in_features; ++i)
            acc += double(x[size_t(n) * s.in_features + i]) * w[size_t(o) * s.in_features + i];
          ref[size_t(n) * s.out_features + o] = acc;
        }
      const double err = rel_l2(dy.download(), ref);
      std::printf("  linear+bias %-4s %-9s rel_l2 %.2e  %s\n", precision_name(p),
                  engine_mode_name(mode), err, op.record().engine.c_str());
      EXPECT_LT(err, tolerance(p)) << precision_name(p);
    }
}

TEST(GpuOps, StandaloneEpilogueMatchesReference) {
  std::mt19937 rng(std::random_device{}());
  for (Precision p : kAll) {
    const DType t = storage_type(p);
    const int C = 48, numel = 4 * 9 * C;
    const auto x = rounded(random_vector(numel, rng), t), z = rounded(random_vector(numel, rng), t);
    const auto sc = rounded(random_vector(C, rng, 0.5f, 1.5f), t),
               b = rounded(random_vector(C, rng), t);
    DeviceBuffer dx(x, t), dz(z, t), ds(sc, t), db(b, t), dy(numel, t);
    RowLayout l;
    l.rows = numel / C;
    l.channels = C;
    launch_epilogue(t, dy.get(), dx.get(), ds.get(), db.get(), dz.get(), Act::ReLU, l, nullptr);
    std::vector<double> ref(numel);
    for (int i = 0; i < numel; ++i)
      ref[i] = std::max(0.0, double(x[i]) * sc[i % C] + b[i % C] + z[i]);
    EXPECT_LT(rel_l2(dy.download(), ref), tolerance(p)) << precision_name(p);
  }
}

// DepthwiseOp beside the ConvOp it owns, on depthwise layers like EfficientNet's (k3 s2, k5 s1,
// 1344 channels at batch 2; SiLU): whichever engine it keeps, its output is the ConvOp's. Under
// autotune (auto) it times both and says so; forced to ours it needs no workspace; forced to
// cuDNN it is the ConvOp; its verify() passes every way. Autotuned in fp16 only (the race does not
// depend on the type; every autotune of a new shape may compile cuDNN engines at run time, and in
// every precision the test took over 80 s on a fresh H100 in device call 67), heuristic in all.
TEST(GpuOps, DepthwiseOpMatchesConvOp) {
  std::mt19937 rng(std::random_device{}());
  struct Layer {
    Dims x;
    int k, stride;
  };
  const Layer layers[] = {
      {{1, 96, 112, 112}, 3, 2}, {{1, 240, 28, 28}, 5, 1}, {{2, 1344, 17, 17}, 5, 1}};
  for (Precision p : kAll)
    for (const Layer& l : layers) {
      GpuContext ctx;
      ConvSpec s;
      s.name = "test.dwconv";
      s.x = l.x;
      s.kernel = l.k, s.stride = l.stride, s.pad = l.k / 2, s.groups = l.x.c;
      const int o = (l.x.h + 2 * s.pad - l.k) / l.stride + 1;
      s.y = {l.x.n, l.x.c, o, o};
      s.precision = p;
      s.act = Act::SiLU;
      const DType t = storage_type(p);
      const int C = l.x.c;
      const float wb = 1.0f / float(l.k);
      const auto x = rounded(random_vector(size_t(s.x.numel()), rng), t);
      const auto w = rounded(random_vector(size_t(C) * l.k * l.k, rng, -wb, wb), t);
      const auto b = rounded(random_vector(size_t(C), rng, -0.5f, 0.5f), t);
      DeviceBuffer dx(x, t), dw(w, t), db(b, t), dyc(size_t(s.y.numel()), t),
          dyd(size_t(s.y.numel()), t);
      TuneScratch scratch;
      scratch.bytes = size_t(64) << 20;
      DeviceBuffer ws(scratch.bytes, DType::F32);
      scratch.ptr = ws.get();
      ConvOp conv(s, {dx.get(), dw.get(), db.get(), nullptr, dyc.get()});
      conv.prepare(ctx, EngineMode::Heuristic, 4, scratch);
      conv.bind_workspace(ws.get(), scratch.bytes);
      conv.run(ctx.stream);
      CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
      const std::vector<float> by_conv = dyc.download();
      DepthwiseSpec ds = depthwise_spec(s);
      const std::vector<double> ref = depthwise_reference(x, w, b, ds);
      EXPECT_LT(rel_l2(by_conv, ref), tolerance(p)) << "the ConvOp itself";
      for (DepthwiseChoice choice :
           {DepthwiseChoice::Auto, DepthwiseChoice::Cnnbench, DepthwiseChoice::Cudnn})
        for (EngineMode mode : {EngineMode::Autotune, EngineMode::Heuristic}) {
          if (mode == EngineMode::Autotune && p != Precision::FP16) continue;
          const std::string what =
              std::string(precision_name(p)) + " " + s.x.str() + " k" + std::to_string(l.k) +
              " --depthwise=" + depthwise_choice_name(choice) + " " + engine_mode_name(mode);
          DepthwiseOp op(s, {dx.get(), dw.get(), db.get(), nullptr, dyd.get()}, choice);
          op.prepare(ctx, mode, 4, scratch);
          op.bind_workspace(ws.get(), scratch.bytes);
          op.poison_output(ctx.stream);
          op.run(ctx.stream);
          CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
          const std::vector<float> got = dyd.download();
          EXPECT_LT(relative_l2(got, by_conv), tolerance(p)) << what;
          EXPECT_LT(rel_l2(got, ref), tolerance(p)) << what;
          EXPECT_LT(op.verify(256, 3), tolerance(p)) << what;
          const LayerRecord& r = op.record();
          EXPECT_TRUE(r.rejected.empty())
              << what << ": " << (r.rejected.empty() ? "" : r.rejected[0]);
          EXPECT_EQ(r.name, "test.dwconv");
          const bool ours = r.engine == "cnnbench depthwise kernel";
          EXPECT_EQ(ours, !op.runs_cudnn()) << what;
          if (ours) {
            EXPECT_EQ(op.workspace_bytes(), 0u) << what;
            EXPECT_TRUE(r.fused);
          } else {
            EXPECT_EQ(r.engine.rfind("eng", 0), 0u) << what << ": " << r.engine;
          }
          EXPECT_EQ(r.workspace_bytes, op.workspace_bytes()) << what;
          if (choice == DepthwiseChoice::Cnnbench ||
              (choice == DepthwiseChoice::Auto && mode == EngineMode::Heuristic))
            EXPECT_TRUE(ours) << what;
          if (choice == DepthwiseChoice::Cudnn) EXPECT_FALSE(ours) << what;
          if (choice == DepthwiseChoice::Auto && mode == EngineMode::Autotune) {
            EXPECT_GT(r.tuned_us, 0.0) << what;
            EXPECT_EQ(r.engine_notes.rfind("cudnn ", 0), 0u) << what << ": " << r.engine_notes;
            EXPECT_NE(r.engine_notes.find(", ours "), std::string::npos) << r.engine_notes;
            std::printf("  depthwise %-4s %-12s k%d s%d: %s (%s)\n", precision_name(p),
                        s.x.str().c_str(), l.k, l.stride, r.engine.c_str(), r.engine_notes.c_str());
          }
        }
    }
}

// StyleGAN2's modulated conv in the scale-conv-scale form cnnbench runs (modulated_conv2d with
// fused_modconv=False): the input scaled by each image's styles, cuDNN's conv with the shared
// weight, then each image's demodulation coefficients; against the explicit per-sample conv, whose
// weight is W * styles (* d) for each image (kernels/stylegan_ref.h). With and without
// demodulation (ToRGB's), in every precision.
TEST(GpuOps, StyleganModulatedConvEqualsThePerSampleConv) {
  std::mt19937 rng(41);
  const int n = 3, c = 16, h = 6, w = 6, k = 8, r = 3;
  const std::vector<float> x = random_vector(size_t(n) * c * h * w, rng);
  const std::vector<float> wt = random_vector(size_t(k) * c * r * r, rng);
  std::vector<float> styles = random_vector(size_t(n) * c, rng);
  for (float& v : styles) v += 1.f;  // the affine's bias init: styles around 1
  std::vector<float> wsq(size_t(k) * c, 0.f);
  for (size_t i = 0; i < wt.size(); ++i) wsq[i / (r * r)] += wt[i] * wt[i];
  GpuContext ctx;
  for (Precision p : kAll)
    for (const bool demodulate : {true, false}) {
      const DType t = storage_type(p);
      const std::vector<float> xr = rounded(x, t), wr = rounded(wt, t);
      ConvSpec s;
      s.name = "test.modconv";
      s.x = {n, c, h, w};
      s.y = {n, k, h, w};
      s.kernel = r, s.stride = 1, s.pad = r / 2;
      s.precision = p;
      DeviceBuffer dx(nchw_to_nhwc(xr, s.x), t), dw(nchw_to_nhwc(wr, {k, c, r, r}), t);
      DeviceBuffer db(std::vector<float>(size_t(k), 0.f), t), dy(size_t(s.y.numel()), t);
      DeviceBuffer dstyles(styles, DType::F32), dwsq(wsq, DType::F32);
      DeviceBuffer dd(size_t(n) * k, DType::F32);
      ConvOp op(s, {dx.get(), dw.get(), db.get(), nullptr, dy.get()});
      TuneScratch scratch;
      scratch.bytes = size_t(64) << 20;
      DeviceBuffer ws(scratch.bytes, DType::F32);
      scratch.ptr = ws.get();
      op.prepare(ctx, EngineMode::Heuristic, 1, scratch);
      op.bind_workspace(ws.get(), scratch.bytes);
      launch_channel_scale(dx.get(), dx.get(), s.x, t, static_cast<const float*>(dstyles.get()),
                           ctx.stream);
      op.run(ctx.stream);
      if (demodulate) {
        launch_demod(static_cast<const float*>(dstyles.get()),
                     static_cast<const float*>(dwsq.get()), n, c, k, static_cast<float*>(dd.get()),
                     ctx.stream);
        launch_channel_scale(dy.get(), dy.get(), s.y, t, static_cast<const float*>(dd.get()),
                             ctx.stream);
      }
      CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
      const std::vector<float> got = nhwc_to_nchw(dy.download(), s.y);
      const std::vector<float> want =
          modconv_reference(xr, n, c, h, w, wr, k, r, styles, demodulate);
      const double err = relative_l2(got, want);
      std::printf("  modconv %s %s: rel_l2 %.2e (%s)\n", precision_name(p),
                  demodulate ? "demodulated" : "plain", err, op.record().engine.c_str());
      EXPECT_LT(err, 2 * tolerance(p)) << precision_name(p) << (demodulate ? " demod" : "");
    }
}

// The stem kernel (kernels/stem.h) on the GPU against its own thread code run on the host
// (stem_emulate: the same gather, staging and epilogue, the product in float) and so against the
// convolution the CPU tests hold that code to: ResNet's 7x7/2 at 224 (batch 2, 784 tiles, on a
// grid smaller than the tiles so blocks loop), VGG's 3x3/1, AlexNet's 11x11/4, EfficientNet's
// 3x3/2 with 40 outputs and SiLU, a slice, a one-channel image with rows of 260 pixels (the rows
// kernel's full and partial tiles), a grid of more blocks than tiles, fp16 and bf16; both kernels
// (tile and rows, each against its own host code; the rows kernel's blocks walk down the rows
// with the ring of kernels/stem_rows.cuh, on the small grids across images too). The weights'
// padding channels are NaN (never read); y starts as NaN and a slice's other channels must stay so.
TEST(GpuOps, StemKernelMatchesItsHostCode) {
  std::mt19937 rng(23);
  struct Case {
    Dims x;
    int k, kernel, stride, pad, w_ld, ld_y, grid;
    Act act;
  };
  const Case cases[] = {
      {{2, 3, 224, 224}, 64, 7, 2, 3, 8, 0, 100, Act::ReLU},
      {{1, 3, 40, 36}, 64, 3, 1, 1, 8, 0, 0, Act::ReLU},
      {{1, 3, 67, 67}, 64, 11, 4, 2, 8, 0, 0, Act::ReLU},
      {{2, 3, 33, 31}, 40, 3, 2, 1, 8, 0, 0, Act::SiLU},
      {{1, 3, 21, 19}, 48, 5, 1, 2, 4, 96, 3, Act::None},
      {{2, 1, 12, 260}, 16, 3, 1, 1, 1, 0, 0, Act::ReLU},   // one channel; rows of 260 pixels
      {{2, 3, 20, 20}, 64, 7, 2, 3, 8, 0, 500, Act::ReLU},  // a grid over the tiles (20): clamped
  };
  for (StemVariant variant : {StemVariant::Tile, StemVariant::Rows})
    for (DType t : {DType::F16, DType::BF16})
      for (const Case& c : cases) {
        StemSpec s;
        s.x = c.x;
        s.kernel = c.kernel, s.stride = c.stride, s.pad = c.pad, s.w_ld = c.w_ld, s.ld_y = c.ld_y;
        s.y = {c.x.n, c.k, (c.x.h + 2 * c.pad - c.kernel) / c.stride + 1,
               (c.x.w + 2 * c.pad - c.kernel) / c.stride + 1};
        s.act = c.act;
        const StemGeometry g = stem_geometry(s);
        std::uniform_real_distribution<float> ux(-1, 1), uw(-0.2f, 0.2f), ub(-0.5f, 0.5f);
        std::vector<float> x(size_t(s.x.numel())), w(size_t(c.k) * c.kernel * c.kernel * c.w_ld),
            b(size_t(c.k));
        for (float& v : x) v = ux(rng);
        for (size_t i = 0; i < w.size(); ++i)
          w[i] = int(i % c.w_ld) < c.x.c ? uw(rng) : std::nanf("");
        for (float& v : b) v = ub(rng);
        const size_t ycount = size_t(g.pixels - 1) * s.ldy() + c.k;
        DeviceBuffer dx(x, t), dw(w, t), db(b, t), dy(ycount, t);
        launch_stem(t, dx.get(), dw.get(), db.get(), dy.get(), s, c.grid, nullptr, variant);
        CNN_CHECK_CUDA(cudaDeviceSynchronize());
        const std::vector<float> got = dy.download();
        const std::vector<uint8_t> xs = to_storage(x, t), ws = to_storage(w, t),
                                   bs = to_storage(b, t);
        std::vector<uint8_t> ys(ycount * dtype_size(t), 0xFF);
        stem_emulate(t, xs.data(), ws.data(), bs.data(), ys.data(), s, variant);
        const std::vector<float> want = from_storage(ys, t);
        double num = 0, den = 0;
        int bad = 0, stray = 0;
        for (size_t i = 0; i < ycount; ++i) {
          const bool written = int(i % s.ldy()) < c.k;
          if (!written) {
            stray += !std::isnan(got[i]);
            continue;
          }
          bad += !std::isfinite(got[i]);
          num += double(got[i] - want[i]) * (got[i] - want[i]);
          den += double(want[i]) * want[i];
        }
        const std::string what = std::string(stem_variant_name(variant)) + " " + dtype_name(t) +
                                 " " + s.x.str() + " k" + std::to_string(c.kernel) + " s" +
                                 std::to_string(c.stride);
        const double err = std::sqrt(num / std::max(den, 1e-300));
        std::printf("  stem %-26s -> %-16s grid %3d: rel_l2 against its host code %.2e\n",
                    what.c_str(), s.y.str().c_str(), c.grid, err);
        EXPECT_EQ(bad, 0) << what;
        EXPECT_EQ(stray, 0) << what << ": wrote outside its channels";
        EXPECT_LT(err, t == DType::F16 ? 2e-3 : 1e-2) << what;
      }
}
