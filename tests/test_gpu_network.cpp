// Whole networks on the GPU: a small ResNet against a CPU interpreter of the unfused graph (so
// BatchNorm folding, fusion, the residual wiring and the classifier are all checked), and
// ResNet-50 itself: finite, the same on a repeat, graph replay equal to eager, and the arena back
// to its baseline after teardown.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdio>

#include "gpu_util.h"
#include "harness/arena.h"
#include "harness/runner.h"
#include "networks/resnet.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

// Runs the graph node by node in double, NCHW, from torchvision-layout weights.
std::vector<double> interpret(const Graph& g, const HostWeights& w, const std::vector<float>& x,
                              int batch) {
  const auto& nodes = g.nodes();
  std::vector<std::vector<double>> v(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    const Dims o = n.out;
    const size_t per = size_t(o.c) * o.h * o.w;
    std::vector<double>& y = v[id];
    y.assign(per * batch, 0.0);
    if (n.kind == OpKind::Input) {
      y.assign(x.begin(), x.end());
      continue;
    }
    const std::vector<double>& a = v[n.inputs[0]];
    const Dims in = nodes[n.inputs[0]].out;
    switch (n.kind) {
      case OpKind::Conv: {
        const auto& W = w.at(n.name + ".weight");
        const int K = n.kernel;
        for (int b = 0; b < batch; ++b)
          for (int k = 0; k < o.c; ++k)
            for (int oh = 0; oh < o.h; ++oh)
              for (int ow = 0; ow < o.w; ++ow) {
                double acc = n.bias ? w.at(n.name + ".bias")[k] : 0.0;
                for (int c = 0; c < in.c; ++c)
                  for (int r = 0; r < K; ++r) {
                    const int ih = oh * n.stride - n.pad + r;
                    if (ih < 0 || ih >= in.h) continue;
                    for (int q = 0; q < K; ++q) {
                      const int iw = ow * n.stride - n.pad + q;
                      if (iw < 0 || iw >= in.w) continue;
                      acc += a[((size_t(b) * in.c + c) * in.h + ih) * in.w + iw] *
                             W[((size_t(k) * in.c + c) * K + r) * K + q];
                    }
                  }
                y[((size_t(b) * o.c + k) * o.h + oh) * o.w + ow] = acc;
              }
        break;
      }
      case OpKind::BatchNorm: {
        const auto &ga = w.at(n.name + ".weight"), &be = w.at(n.name + ".bias"),
                   &mu = w.at(n.name + ".running_mean"), &va = w.at(n.name + ".running_var");
        for (size_t i = 0; i < y.size(); ++i) {
          const int c = int((i / (size_t(o.h) * o.w)) % o.c);
          y[i] = (a[i] - mu[c]) / std::sqrt(double(va[c]) + n.eps) * ga[c] + be[c];
        }
        break;
      }
      case OpKind::ReLU:
        for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(a[i], 0.0);
        break;
      case OpKind::Add:
        for (size_t i = 0; i < y.size(); ++i) y[i] = a[i] + v[n.inputs[1]][i];
        break;
      case OpKind::MaxPool:
        for (int b = 0; b < batch; ++b)
          for (int c = 0; c < o.c; ++c)
            for (int oh = 0; oh < o.h; ++oh)
              for (int ow = 0; ow < o.w; ++ow) {
                double m = -DBL_MAX;
                for (int r = 0; r < n.kernel; ++r)
                  for (int q = 0; q < n.kernel; ++q) {
                    const int ih = oh * n.stride - n.pad + r, iw = ow * n.stride - n.pad + q;
                    if (ih >= 0 && ih < in.h && iw >= 0 && iw < in.w)
                      m = std::max(m, a[((size_t(b) * in.c + c) * in.h + ih) * in.w + iw]);
                  }
                y[((size_t(b) * o.c + c) * o.h + oh) * o.w + ow] = m;
              }
        break;
      case OpKind::GlobalAvgPool:
        for (int b = 0; b < batch; ++b)
          for (int c = 0; c < o.c; ++c) {
            double s = 0;
            for (int i = 0; i < in.h * in.w; ++i) s += a[(size_t(b) * in.c + c) * in.h * in.w + i];
            y[size_t(b) * o.c + c] = s / (in.h * in.w);
          }
        break;
      case OpKind::Flatten:
        y = a;
        break;
      case OpKind::Linear: {
        const auto& W = w.at(n.name + ".weight");
        for (int b = 0; b < batch; ++b)
          for (int k = 0; k < o.c; ++k) {
            double acc = n.bias ? w.at(n.name + ".bias")[k] : 0.0;
            for (int i = 0; i < in.c; ++i) acc += a[size_t(b) * in.c + i] * W[size_t(k) * in.c + i];
            y[size_t(b) * o.c + k] = acc;
          }
        break;
      }
      default:
        ADD_FAILURE() << "interpreter lacks " << op_kind_name(n.kind);
    }
  }
  return v[g.output()];
}

size_t device_free() {
  size_t free_b = 0, total = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

}  // namespace

TEST(GpuNetwork, SmallResNetMatchesCpuInterpreter) {
  const Graph g = build_resnet("resnet_small", {1, 1, 1, 1}, 64, 10);
  const int batch = 2;
  const HostWeights w = random_weights(g, uint64_t(std::random_device{}()));
  std::mt19937 rng(std::random_device{}());
  const std::vector<float> x = random_vector(size_t(batch) * 3 * 64 * 64, rng);
  const std::vector<double> ref = interpret(g, w, x, batch);
  GpuContext ctx;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16}) {
    CompileOptions opt;
    opt.precision = p;
    opt.batch = batch;
    Model m(ctx, g, w, opt);
    m.set_input(x);
    Runner r(m, ctx);
    r.launch(true);
    r.sync();
    const double err = rel_l2(m.output(), ref);
    std::printf("  small resnet %s: rel_l2 %.2e\n", precision_name(p), err);
    // Errors compound over layers: ten times the single-op tolerance (fp32: 1e-4).
    EXPECT_LT(err, 10 * tolerance(p)) << precision_name(p);
  }
}

TEST(GpuNetwork, ResNet50FiniteRepeatableGraphEqualsEagerAndFreesItsMemory) {
  const Graph g = resnet50();
  const HostWeights w = random_weights(g, 3);
  GpuContext ctx;
  // A first build and teardown loads the libraries' kernels; the baseline is taken after it.
  for (Precision p : {Precision::FP16, Precision::FP32, Precision::TF32, Precision::BF16}) {
    CompileOptions opt;
    opt.precision = p;
    opt.batch = 4;
    { Model warm(ctx, g, w, opt); }
    const size_t live_before = Arena::live_device_bytes();
    const size_t free_before = device_free();
    {
      Model m(ctx, g, w, opt);
      EXPECT_GT(Arena::live_device_bytes(), live_before);
      Runner r(m, ctx);
      r.launch(true);
      const std::vector<float> a = m.output();
      r.launch(true);
      const std::vector<float> b = m.output();
      r.launch(false);
      const std::vector<float> c = m.output();
      ASSERT_EQ(a.size(), size_t(4 * 1000));
      double max_abs = 0;
      for (float v : a) {
        ASSERT_TRUE(std::isfinite(v)) << precision_name(p);
        max_abs = std::max(max_abs, double(std::fabs(v)));
      }
      EXPECT_GT(max_abs, 0.0);
      EXPECT_EQ(a, b) << "graph replay is not repeatable in " << precision_name(p);
      EXPECT_EQ(a, c) << "graph replay differs from eager in " << precision_name(p);
      int fused = 0, convs = 0;
      for (const LayerRecord& rec : m.layers())
        if (rec.op.rfind("conv", 0) == 0) ++convs, fused += rec.fused;
      std::printf("  resnet50 %s batch 4: %d/%d convs fused, %zu graph nodes, arena %.1f MiB\n",
                  precision_name(p), fused, convs, r.graph_nodes(),
                  m.arena().total_bytes() / 1048576.0);
    }
    EXPECT_EQ(Arena::live_device_bytes(), live_before);
    const double diff_mib = (double(free_before) - double(device_free())) / 1048576.0;
    EXPECT_LT(std::fabs(diff_mib), 4.0) << "device memory not back to baseline";
  }
}

// Every conv and linear layer of ResNet-50, recomputed on the host (sampled outputs, double) from
// the inputs it actually read, in each precision, under heuristics and autotune.
TEST(GpuNetwork, ResNet50EveryLayerMatchesHostRecompute) {
  const Graph g = resnet50();
  const HostWeights w = random_weights(g, 11);
  GpuContext ctx;
  struct Case {
    Precision p;
    EngineMode mode;
    int batch;
  };
  const Case cases[] = {
      {Precision::FP32, EngineMode::Heuristic, 4}, {Precision::TF32, EngineMode::Heuristic, 4},
      {Precision::FP16, EngineMode::Heuristic, 4}, {Precision::BF16, EngineMode::Heuristic, 4},
      {Precision::FP16, EngineMode::Autotune, 32}, {Precision::TF32, EngineMode::Autotune, 32}};
  for (const Case& c : cases) {
    CompileOptions opt;
    opt.precision = c.p;
    opt.engine = c.mode;
    opt.batch = c.batch;
    Model m(ctx, g, w, opt);
    const auto layers = m.layers();
    double worst = 0;
    for (bool graph : {false, true})
      for (const auto& [name, err] : m.verify_layers(256, 5, graph)) {
        std::string engine;
        for (const LayerRecord& r : layers)
          if (r.name == name) engine = r.engine + (r.fused ? "" : " unfused");
        EXPECT_LE(err, tolerance(c.p))
            << name << " " << precision_name(c.p) << " " << engine_mode_name(c.mode) << " batch "
            << c.batch << " " << engine;
        worst = std::max(worst, err);
      }
    std::printf("  resnet50 %s %s batch %d: worst layer rel_l2 %.2e\n", precision_name(c.p),
                engine_mode_name(c.mode), c.batch, worst);
  }
}
