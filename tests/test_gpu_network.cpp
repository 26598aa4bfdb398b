// Whole networks on the GPU: a small ResNet against a CPU interpreter of the unfused graph (so
// BatchNorm folding, fusion, the residual wiring and the classifier are all checked), and
// ResNet-50 itself: finite, the same on a repeat, graph replay equal to eager, and the arena back
// to its baseline after teardown.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstdlib>

#include "gpu_util.h"
#include "harness/arena.h"
#include "harness/detect_post.h"
#include "harness/plan_cache.h"
#include "harness/runner.h"
#include "harness/session.h"
#include "interpreter.h"
#include "kernels/storage.h"
#include "networks/registry.h"
#include "networks/resnet.h"
#include "networks/stylegan3_reference.h"
#include "networks/zoo.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

// Every op kind of the zoo in one small network: an MXNet-style LRN stem, an Inception block
// whose concat nests another and takes a pool branch, 1x7 / 7x1 convs, an MBConv with depthwise
// conv, squeeze-excitation and a residual, a non-trivial adaptive pool, and a ReLU classifier.
Graph mixed_ops_net() {
  Graph g("mixed_ops");
  int x = g.input(3, 33, 33);
  x = g.relu(g.conv(x, "stem", 24, 5, 2, 1, true));                     // 16x16, bias + relu
  x = g.maxpool(g.lrn(x, 5, 1e-2, 0.75, 2.0, "lrn"), 3, 2, 1, "pool");  // 8x8
  const int b1 = g.conv_bn(x, "b1.conv", "b1.bn", 16, 1, 1, 0, true);
  int b7 = g.conv_rect(x, "b7a.conv", 16, 1, 7, 1, 0, 3);
  b7 = g.relu(g.batchnorm(b7, "b7a.bn", 1e-3));
  const int b7x = g.relu(g.conv_rect(b7, "b7b.conv", 8, 7, 1, 1, 3, 0, true));
  const int b7y = g.relu(g.conv_rect(b7, "b7c.conv", 8, 1, 3, 1, 0, 1, true));
  const int bp = g.maxpool(x, 3, 1, 1, "bpool");
  const int ba = g.conv(g.avgpool(x, 3, 1, 1, true), "bavg", 8, 1, 1, 0, true);
  x = g.concat({b1, g.concat({b7x, b7y}), bp, ba}, "mixed");  // 16 + 16 + 24 + 8 = 64
  // MBConv: expand 64 -> 128, depthwise 3x3, SE (squeeze 16), project back to 64, residual.
  int y = g.silu(g.batchnorm(g.conv(x, "mb.expand", 128, 1), "mb.expand_bn"));
  y = g.silu(g.batchnorm(g.conv(y, "mb.dw", 128, 3, 1, 1, false, 128), "mb.dw_bn"));
  int s = g.global_avgpool(y, "mb.se.avgpool");
  s = g.sigmoid(
      g.conv(g.silu(g.conv(s, "mb.se.fc1", 16, 1, 1, 0, true)), "mb.se.fc2", 128, 1, 1, 0, true));
  y = g.scale(y, s);
  y = g.batchnorm(g.conv(y, "mb.project", 64, 1), "mb.project_bn");
  x = g.add(y, x);
  x = g.flatten(g.adaptive_avgpool(x, 3, 3, "avgpool"));  // 8x8 -> 3x3: overlapping bins
  x = g.relu(g.linear(x, "fc1", 32));
  g.set_output(g.linear(x, "fc2", 10));
  return g;
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

// YOLOR-CSP-X's inference form at 64 px (the implicits folded into the heads, the FPN's
// upsamples written into their routes' buffers, SPP's stride-1 max-pools) against the CPU
// interpreter, on the reference's weights folded by fold_yolor_implicits: all three heads.
TEST(GpuNetwork, YolorFoldedMatchesCpuInterpreter) {
  const Graph g = yolor_csp_x(64, 80, true);
  const HostWeights w = fold_yolor_implicits(random_weights(yolor_csp_x(64), 21));
  std::mt19937 rng(22);
  const std::vector<float> x = random_vector(size_t(3) * 64 * 64, rng);
  const std::vector<int> heads{g.output(), g.extra_outputs().at(0), g.extra_outputs().at(1)};
  const std::vector<std::vector<double>> values = interpret_values(g, w, x, 1);
  std::vector<std::vector<double>> ref;
  for (int h : heads) ref.push_back(values[h]);
  GpuContext ctx;
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CompileOptions opt;
    opt.precision = p;
    opt.batch = 1;
    Model m(ctx, g, w, opt);
    ASSERT_EQ(m.output_count(), 3u);
    m.set_input(x);
    Runner r(m, ctx);
    r.launch(true);
    r.sync();
    for (size_t k = 0; k < 3; ++k) {
      const double err = rel_l2(m.output(k), ref[k]);
      std::printf("  yolor_csp_x 64 px %s head %zu: rel_l2 %.2e\n", precision_name(p), k, err);
      EXPECT_LT(err, 10 * tolerance(p)) << precision_name(p) << " head " << k;
    }
  }
}

// Mode detect's post-processing on YOLOR at 64 px, batch 2, fp32: DetectPost's rows equal the
// host decode of the model's own head outputs (to float rounding), and its NMS, replayed as a CUDA
// graph after the network's, keeps exactly nms_reference's detections on those rows. Once with
// plain random weights (most rows pass conf 0.25: thousands of candidates) and once with the
// registry's weights (the head prior: a few candidates an image, as a trained detector gives).
TEST(GpuNetwork, YolorDetectPostMatchesTheHostReference) {
  const Graph g = build_network("yolor_csp_x", 64);
  std::mt19937 rng(23);
  const int batch = 2, classes = 80, no = 5 + classes;
  const std::vector<float> x = random_vector(size_t(batch) * 3 * 64 * 64, rng);
  GpuContext ctx;
  int64_t total[2] = {0, 0};  // candidates of both images, without and with the prior
  for (const bool prior : {false, true}) {
    SCOPED_TRACE(prior ? "with the head prior" : "plain random weights");
    const HostWeights w = prior ? network_random_weights("yolor_csp_x", 64, 0, 24)
                                : fold_yolor_implicits(random_weights(yolor_csp_x(64), 24));
    CompileOptions opt;
    opt.precision = Precision::FP32;
    opt.batch = batch;
    Model m(ctx, g, w, opt);
    m.set_input(x);
    Runner r(m, ctx);
    NmsOptions o;
    DetectPost post(m, yolor_heads(), classes, o, 1 << 16);
    for (int rep = 0; rep < 2; ++rep) {  // the second from the captured post graph, replayed
      r.launch(true);
      post.launch(r.stream());
    }
    const DetectPost::Result got = post.download(r.stream());
    ASSERT_EQ(got.overflow, 0);
    const int64_t rows = post.rows_per_image();
    ASSERT_EQ(rows, 3 * (8 * 8 + 4 * 4 + 2 * 2));
    const std::vector<float> rows_d = download(post.rows(), size_t(batch * rows * no), DType::F32);
    for (int n = 0; n < batch; ++n) {
      std::vector<float> want;
      for (size_t k = 0; k < 3; ++k) {
        const Dims d = m.output_dims(k);
        const std::vector<float> all = nchw_to_nhwc(m.output(k), d);
        const size_t per = size_t(d.c) * d.h * d.w;
        yolo_decode_reference(all.data() + n * per, d.h, d.w, yolor_heads()[k], classes, want);
      }
      const std::vector<float> mine(rows_d.begin() + n * rows * no,
                                    rows_d.begin() + (n + 1) * rows * no);
      EXPECT_LT(rel_l2(mine, std::vector<double>(want.begin(), want.end())), 1e-6) << n;
      const std::vector<Detection> keep = nms_reference(mine, classes, o);
      ASSERT_EQ(got.detections[n].size(), keep.size()) << "image " << n;
      for (size_t i = 0; i < keep.size(); ++i) {
        EXPECT_EQ(got.detections[n][i].cls, keep[i].cls);
        EXPECT_EQ(got.detections[n][i].score, keep[i].score);
        EXPECT_EQ(got.detections[n][i].x1, keep[i].x1);
        EXPECT_EQ(got.detections[n][i].y2, keep[i].y2);
      }
      std::printf("  yolor 64 px %s, image %d: %d candidates, %zu kept\n",
                  prior ? "prior" : "plain", n, got.candidates[n], keep.size());
      total[prior] += got.candidates[n];
    }
  }
  // The prior is what keeps a random detector's NMS realistic: far fewer candidates.
  EXPECT_GT(total[false], 0);
  EXPECT_LT(total[true] * 10, total[false]);
}

// A generator compiled in fp32 and fp16, run eager and as a graph replay on `input` (n images),
// against the host reference's images: relative L2 under 1e-4 (fp32) and 3e-2 (fp16).
static void expect_generator_matches(const Graph& g, const HostWeights& w,
                                     const std::vector<float>& input, int n,
                                     const std::vector<float>& ref, const char* label) {
  const std::vector<double> want(ref.begin(), ref.end());
  GpuContext ctx;
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    CompileOptions opt;
    opt.precision = p;
    opt.batch = n;
    Model m(ctx, g, w, opt);
    m.set_input(input);
    Runner r(m, ctx);
    for (const bool graph : {false, true}) {
      r.launch(graph);
      r.sync();
      const double err = rel_l2(m.output(), want);
      std::printf("  %s %s %s: rel_l2 %.2e, %zu ops\n", label, precision_name(p),
                  graph ? "graph" : "eager", err, m.op_count());
      EXPECT_LT(err, p == Precision::FP32 ? 1e-4 : 3e-2) << label << " " << precision_name(p);
    }
  }
}

// StyleGAN2's generator compiled (normalize_2nd_moment, the mapping's Linear + lrelu with their
// equalized-lr gains, the constant, modulated convs as styles scale + cuDNN conv + demodulation +
// noise/bias/lrelu/clamp, conv0's up-sampling by upfirdn2d and a flipped valid conv, ToRGB, the
// skip images' upfirdn2d and adds) against the host generator (stylegan2_generate_reference,
// itself held to PyTorch's on the CPU at 1.25e-6), at 16 px with narrow channels, batch 2.
TEST(GpuNetwork, Stylegan2GeneratorMatchesTheHostReference) {
  const int res = 16, cbase = 256, maps = 2, n = 2;
  const Graph g = stylegan2_generator(res, cbase, maps);
  const HostWeights w = random_weights(g, 9);
  std::mt19937 rng(10);
  const std::vector<float> z = random_vector(size_t(n) * 512, rng);
  const std::vector<float> ref = stylegan2_generate_reference(w, res, cbase, maps, z, n);
  expect_generator_matches(g, w, z, n, ref, "stylegan2 16 px");
}

// StyleGAN3-T's compiled generator (the Fourier input, the modulated convs with their
// pre-normalisation, demodulation and input gain, filtered_lrelu's passes, ToRGB and the output
// scale) against the host reference, on a small -T (16 px, channel_base 256, channel_max 32).
TEST(GpuNetwork, Stylegan3GeneratorMatchesTheHostReference) {
  const int res = 16, n = 2;
  const Graph g = stylegan3_generator(res, false, 2, 256, 32);
  HostWeights w = random_weights(g, 9);
  stylegan3_random_buffers(w);
  std::mt19937 rng(11);
  const std::vector<float> z = random_vector(size_t(n) * 512, rng);
  const std::vector<float> ref = stylegan3_generate_reference(g, w, z, n);
  expect_generator_matches(g, w, z, n, ref, "stylegan3-t 16 px");
}

// StyleGAN-XL's compiled generator (the class embedding beside z, the stem and one grown head)
// against the host reference, on a small one (32 px from a 16 px stem of 4 layers, 3-layer
// head, 10 classes, channel_base 256, channel_max 32).
TEST(GpuNetwork, StyleganXlGeneratorMatchesTheHostReference) {
  const int n = 3, classes = 10;
  const Graph g = stylegan_xl_generator(32, 4, 3, 16, classes, 256, 32);
  HostWeights w = random_weights(g, 12);
  stylegan3_random_buffers(w);
  std::mt19937 rng(13);
  std::vector<float> x = random_vector(size_t(n) * (64 + classes), rng);
  for (int i = 0; i < n; ++i) {  // one-hot classes 2, 7, 7
    float* c = x.data() + size_t(i) * (64 + classes) + 64;
    std::fill(c, c + classes, 0.f);
    c[i == 0 ? 2 : 7] = 1.f;
  }
  const std::vector<float> ref = stylegan3_generate_reference(g, w, x, n);
  expect_generator_matches(g, w, x, n, ref, "stylegan-xl 32 px");
}

// --profile's loop: exactly the forwards asked, in graph and eager mode, between
// cudaProfilerStart and cudaProfilerStop (which succeed without a profiler attached), and the
// output still the same as a plain forward's.
TEST(GpuNetwork, ProfileRunsExactlyTheForwardsAsked) {
  const Graph g = build_resnet("resnet_small", {1, 1, 1, 1}, 64, 10);
  const HostWeights w = random_weights(g, 5);
  GpuContext ctx;
  CompileOptions opt;
  opt.precision = Precision::FP16;
  opt.batch = 2;
  Model m(ctx, g, w, opt);
  Runner r(m, ctx);
  r.launch(true);
  r.sync();
  const std::vector<float> first = m.output();
  for (bool graph : {true, false}) {
    const int64_t before = r.launches();
    EXPECT_EQ(r.profile(graph, 7), 7);
    EXPECT_EQ(r.launches() - before, 7) << (graph ? "graph" : "eager");
  }
  EXPECT_EQ(m.output(), first);
}

// The per-layer breakdown's parts (cnnbench_infer --breakdown): the ops' FLOPs add up to the
// network's, every op moves some bytes, and the layers timed alone add up to the whole graph's
// replay within a stated band: 0.7x to 1.5x (alone, a layer loses the overlap with its
// neighbours that programmatic launches give, and keeps its own launch gaps).
TEST(GpuNetwork, BreakdownLayersAddUpToTheGraph) {
  const Graph g = build_network("resnet50");
  const HostWeights w = random_weights(g, 6);
  GpuContext ctx;
  CompileOptions opt;
  opt.precision = Precision::FP16;
  opt.batch = 32;
  Model m(ctx, g, w, opt);
  Runner r(m, ctx);
  r.capture();
  const double graph_us = r.time_ms(true, 20) * 1000.0 / 20;
  double flops = 0;
  for (const Model::OpCost& c : m.op_costs()) {
    flops += c.flops;
    EXPECT_GT(c.bytes, 0.0);
  }
  EXPECT_EQ(m.op_costs().size(), m.op_count());
  EXPECT_NEAR(flops, m.flops_per_image() * 32, 1e-6 * flops);
  const std::vector<double> us = m.time_each_op(20);
  double sum = 0;
  for (double u : us) sum += u;
  std::printf("  resnet50 fp16 batch 32: layers alone %.1f us, graph %.1f us (%.2f)\n", sum,
              graph_us, sum / graph_us);
  EXPECT_GT(sum / graph_us, 0.7);
  EXPECT_LT(sum / graph_us, 1.5);
}

TEST(GpuNetwork, MixedOpsNetMatchesCpuInterpreter) {
  const Graph g = mixed_ops_net();
  const int batch = 3;
  const HostWeights w = random_weights(g, uint64_t(std::random_device{}()));
  std::mt19937 rng(std::random_device{}());
  const std::vector<float> x = random_vector(size_t(batch) * 3 * 33 * 33, rng);
  const std::vector<double> ref = interpret(g, w, x, batch);
  GpuContext ctx;
  for (EngineMode mode : {EngineMode::Heuristic, EngineMode::Autotune})
    for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16}) {
      CompileOptions opt;
      opt.precision = p;
      opt.batch = batch;
      opt.engine = mode;
      Model m(ctx, g, w, opt);
      m.set_input(x);
      Runner r(m, ctx);
      r.launch(false);
      const std::vector<float> eager = m.output();
      r.launch(true);
      const std::vector<float> replay = m.output();
      const double err = rel_l2(replay, ref);
      std::printf("  mixed ops %s %s: rel_l2 %.2e\n", precision_name(p), engine_mode_name(mode),
                  err);
      EXPECT_LT(err, 10 * tolerance(p)) << precision_name(p);
      EXPECT_EQ(replay, eager) << precision_name(p);
      for (const auto& [name, e] : m.verify_layers(256, 9))
        EXPECT_LE(e, tolerance(p)) << name << " " << precision_name(p);
    }
}

// g compiled at `batch` in `p` under `mode` on ctx, x set as its input, one graph replay: its
// output, and its layer table in *layers.
static std::vector<float> replay_once(GpuContext& ctx, const Graph& g, const HostWeights& w,
                                      Precision p, int batch, EngineMode mode,
                                      const std::vector<float>& x,
                                      std::vector<LayerRecord>* layers) {
  CompileOptions opt;
  opt.precision = p;
  opt.batch = batch;
  opt.engine = mode;
  Model m(ctx, g, w, opt);
  m.set_input(x);
  Runner r(m, ctx);
  r.launch(true);
  *layers = m.layers();
  return m.output();
}

// --plan_cache (issue 9): a second build with the file autotune wrote takes every plan from it
// (the convs' cuDNN engines and the classifier's cuBLASLt algorithms alike), times nothing again,
// picks the same engines and gives the same output.
TEST(GpuNetwork, PlanCacheSecondBuildTakesEveryPlanFromDisk) {
  const Graph g = mixed_ops_net();
  const int batch = 2;
  const HostWeights w = random_weights(g, 11);
  std::mt19937 rng(5);
  const std::vector<float> x = random_vector(size_t(batch) * 3 * 33 * 33, rng);
  const std::string path = testing::TempDir() + "/gpu_plan_cache.json";
  std::remove(path.c_str());
  std::vector<std::vector<float>> outs;
  std::vector<std::vector<LayerRecord>> layers;
  std::vector<int> used, misses, stale;
  for (int build = 0; build < 2; ++build) {
    DiskPlanCache cache(path);
    cache.set_scope("test device", "test library", "test search");
    GpuContext ctx;
    ctx.excluded.push_back(kNondeterministic);
    ctx.disk_plans = &cache;
    layers.emplace_back();
    outs.push_back(
        replay_once(ctx, g, w, Precision::FP16, batch, EngineMode::Autotune, x, &layers.back()));
    cache.save();
    used.push_back(cache.used), misses.push_back(cache.misses), stale.push_back(cache.stale);
  }
  EXPECT_EQ(used[0], 0);
  EXPECT_GT(misses[0], 2);
  EXPECT_EQ(misses[1], 0) << "the second build tuned a layer the first had tuned";
  EXPECT_EQ(stale[1], 0);
  EXPECT_EQ(used[1], misses[0]);
  ASSERT_EQ(layers[0].size(), layers[1].size());
  int linears = 0;
  for (size_t i = 0; i < layers[0].size(); ++i) {
    const LayerRecord &a = layers[0][i], &b = layers[1][i];
    EXPECT_EQ(a.engine, b.engine) << a.name;
    if (a.op.rfind("linear", 0) == 0) {
      ++linears;
      EXPECT_TRUE(b.from_plan_cache) << a.name << " " << b.engine;
    }
  }
  EXPECT_EQ(linears, 2);
  EXPECT_EQ(outs[0], outs[1]);
  std::remove(path.c_str());
}

// Plans built ahead on helper threads (each with a cuDNN handle of its own) must be the plans a
// single thread builds: under heuristics the same engines, and bitwise the same output.
TEST(GpuNetwork, ParallelPlanBuildingMatchesSerial) {
  const Graph g = mixed_ops_net();
  const int batch = 2;
  const HostWeights w = random_weights(g, 11);
  std::mt19937 rng(5);
  const std::vector<float> x = random_vector(size_t(batch) * 3 * 33 * 33, rng);
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    std::vector<std::vector<float>> outs;
    std::vector<std::vector<std::string>> engines;
    for (int threads : {1, 8}) {
      GpuContext ctx;
      ctx.build_threads = threads;
      std::vector<LayerRecord> layers;
      outs.push_back(replay_once(ctx, g, w, p, batch, EngineMode::Heuristic, x, &layers));
      engines.emplace_back();
      for (const LayerRecord& l : layers) engines.back().push_back(l.name + " " + l.engine);
    }
    EXPECT_EQ(engines[0], engines[1]) << precision_name(p);
    EXPECT_EQ(outs[0], outs[1]) << precision_name(p);
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
      // Built as the binaries build it: where the capture departs from eager, the departing
      // layer's engine is banned and the model rebuilt (the repairs are printed).
      std::unique_ptr<Model> mp;
      std::unique_ptr<Runner> rp;
      std::vector<std::string> repairs;
      build_and_capture(
          ctx, [&] { return std::make_unique<Model>(ctx, g, w, opt); }, mp, rp, repairs);
      Model& m = *mp;
      Runner& r = *rp;
      EXPECT_GT(Arena::live_device_bytes(), live_before);
      r.launch(true);
      const std::vector<float> a = m.output();
      r.launch(true);
      const std::vector<float> b = m.output();
      r.launch(false);
      const std::vector<float> c = m.output();
      r.launch(false);
      const std::vector<float> d = m.output();
      for (const std::string& rep : repairs)
        std::printf("  resnet50 %s batch 4: banned %s\n", precision_name(p), rep.c_str());
      ASSERT_EQ(a.size(), size_t(4 * 1000));
      double max_abs = 0;
      for (float v : a) {
        ASSERT_TRUE(std::isfinite(v)) << precision_name(p);
        max_abs = std::max(max_abs, double(std::fabs(v)));
      }
      EXPECT_GT(max_abs, 0.0);
      EXPECT_EQ(a, b) << "graph replay is not repeatable in " << precision_name(p);
      EXPECT_EQ(a, c) << "graph replay differs from eager in " << precision_name(p);
      EXPECT_EQ(c, d) << "eager is not repeatable in " << precision_name(p);
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

// Every network of the zoo at batch 1 and 2 in every precision (heuristic engines): finite and
// non-zero outputs, the same on a second replay, and graph replay equal to eager execution.
// One test per network, so that gtest's sharding (GTEST_TOTAL_SHARDS) can spread them over
// processes sharing the GPU.
class GpuZoo : public testing::TestWithParam<std::string> {};

TEST_P(GpuZoo, FiniteDeterministicGraphEqualsEager) {
  GpuContext ctx;
  // --deterministic: bitwise-equal replays are only promised without the engines cuDNN marks
  // nondeterministic (call 38: StyleGAN-XL in fp32 and tf32 took one, and its replays differed).
  ctx.excluded.push_back(kNondeterministic);
  {
    const NetworkInfo& info = find_network(GetParam());
    const Graph g = build_network(info.name);
    // The registry's weights: folded (YOLOR), with the buffers' initialisation (StyleGAN3).
    const HostWeights w = network_random_weights(info.name, 0, 0, 17);
    for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16})
      for (int batch : {1, 2}) {
        SCOPED_TRACE(info.name + " " + precision_name(p) + " batch " + std::to_string(batch));
        CompileOptions opt;
        opt.precision = p;
        opt.batch = batch;
        Model m(ctx, g, w, opt);
        EXPECT_EQ(nondeterministic_layers(m.layers()), 0);
        Runner r(m, ctx);
        r.launch(false);
        const std::vector<float> eager = m.output();
        r.launch(true);
        const std::vector<float> a = m.output();
        r.launch(true);
        const std::vector<float> b = m.output();
        double max_abs = 0;
        bool finite = true;
        for (float v : a)
          finite &= std::isfinite(v), max_abs = std::max(max_abs, double(std::fabs(v)));
        EXPECT_TRUE(finite);
        EXPECT_GT(max_abs, 0.0);
        EXPECT_EQ(a, b) << "replays differ";
        EXPECT_EQ(a, eager) << "graph replay differs from eager, rel L2 " << relative_l2(a, eager);
        std::printf("  %s %s batch %d: %zu ops, max |logit| %.3g\n", info.name.c_str(),
                    precision_name(p), batch, m.op_count(), max_abs);
      }
  }
}

static std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const NetworkInfo& info : network_registry()) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Zoo, GpuZoo, testing::ValuesIn(zoo_names()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// --se_fold: at batch 1 each squeeze-excitation's gates go into the next 1x1 conv's weights
// instead of scaling the activations. The logits must stay those of the scale pass (fp32 to
// 1e-5, fp16 to 5e-3), the folds must happen (B0: one per MBConv with SE, 16), and at batch 2
// nothing is folded.
TEST(GpuNetwork, SeFoldMatchesTheScalePass) {
  const Graph g = build_network("efficientnet_b0");
  const HostWeights w = random_weights(g, 4);
  GpuContext ctx;
  for (Precision p : {Precision::FP32, Precision::FP16})
    for (int batch : {1, 2}) {
      std::vector<float> out[2];
      int folds[2] = {0, 0};
      for (int f = 0; f < 2; ++f) {
        CompileOptions opt;
        opt.precision = p;
        opt.batch = batch;
        opt.se_fold = f == 1;
        std::unique_ptr<Model> mp;
        std::unique_ptr<Runner> rp;
        std::vector<std::string> repairs;
        build_and_capture(
            ctx, [&] { return std::make_unique<Model>(ctx, g, w, opt); }, mp, rp, repairs);
        rp->launch(true);
        out[f] = mp->output();
        for (const LayerRecord& r : mp->layers()) folds[f] += r.op == "se_fold";
      }
      const double err = relative_l2(out[1], out[0]);
      std::printf("  efficientnet_b0 %s batch %d: %d folds, rel_l2 %.2e\n", precision_name(p),
                  batch, folds[1], err);
      EXPECT_EQ(folds[0], 0);
      EXPECT_EQ(folds[1], batch == 1 ? 16 : 0) << precision_name(p) << " batch " << batch;
      EXPECT_LT(err, p == Precision::FP32 ? 1e-4 : 1e-2) << precision_name(p) << " batch " << batch;
    }
}

// --depthwise: EfficientNet-B0's 16 depthwise convs in our kernel (cnnbench) against cuDNN
// (cudnn) under heuristics, fp32 and fp16 at batch 1 and 2: the logits agree (fp32 1e-4, fp16
// 1e-2: summation order and half rounding through 80 layers, far below a wrong kernel's ~1).
// Then auto under autotune (fp16, batch 1): every depthwise layer timed both ways, the logits
// again cuDNN's, and each depthwise layer's host check (verify_layers) within 1e-2.
// One graph replay of g under `opt`: its output, and where asked its layer table and the layers'
// host checks (verify_layers, `samples` each).
static std::vector<float> forward_once(GpuContext& ctx, const Graph& g, const HostWeights& w,
                                       const CompileOptions& opt, std::vector<LayerRecord>* layers,
                                       std::vector<std::pair<std::string, double>>* checks,
                                       int samples = 128, uint64_t seed = 11) {
  std::unique_ptr<Model> mp;
  std::unique_ptr<Runner> rp;
  std::vector<std::string> repairs;
  build_and_capture(
      ctx, [&] { return std::make_unique<Model>(ctx, g, w, opt); }, mp, rp, repairs);
  rp->launch(true);
  std::vector<float> out = mp->output();
  if (layers) *layers = mp->layers();
  if (checks) *checks = mp->verify_layers(samples, seed);
  return out;
}

TEST(GpuNetwork, DepthwiseKernelMatchesCudnn) {
  const Graph g = build_network("efficientnet_b0");
  const HostWeights w = random_weights(g, 5);
  GpuContext ctx;
  auto forward = [&](Precision p, int batch, EngineMode mode, DepthwiseChoice choice,
                     std::vector<LayerRecord>* layers,
                     std::vector<std::pair<std::string, double>>* checks) {
    CompileOptions opt;
    opt.precision = p;
    opt.batch = batch;
    opt.engine = mode;
    opt.depthwise = choice;
    return forward_once(ctx, g, w, opt, layers, checks);
  };
  auto ours = [](const std::vector<LayerRecord>& layers) {
    int n = 0;
    for (const LayerRecord& r : layers) n += r.engine == "cnnbench depthwise kernel";
    return n;
  };
  for (Precision p : {Precision::FP32, Precision::FP16})
    for (int batch : {1, 2}) {
      std::vector<LayerRecord> lc, lo;
      const std::vector<float> a =
          forward(p, batch, EngineMode::Heuristic, DepthwiseChoice::Cudnn, &lc, nullptr);
      const std::vector<float> b =
          forward(p, batch, EngineMode::Heuristic, DepthwiseChoice::Cnnbench, &lo, nullptr);
      const double err = relative_l2(b, a);
      std::printf("  efficientnet_b0 %s batch %d: ours against cuDNN rel_l2 %.2e\n",
                  precision_name(p), batch, err);
      EXPECT_EQ(ours(lc), 0);
      EXPECT_EQ(ours(lo), 16);
      EXPECT_LT(err, p == Precision::FP32 ? 1e-4 : 1e-2) << precision_name(p) << " batch " << batch;
    }
  const std::vector<float> ref =
      forward(Precision::FP16, 1, EngineMode::Heuristic, DepthwiseChoice::Cudnn, nullptr, nullptr);
  std::vector<LayerRecord> la;
  std::vector<std::pair<std::string, double>> checks;
  const std::vector<float> c =
      forward(Precision::FP16, 1, EngineMode::Autotune, DepthwiseChoice::Auto, &la, &checks);
  EXPECT_LT(relative_l2(c, ref), 1e-2);
  std::vector<std::string> depthwise;
  double ours_us = 0, winner_us = 0;
  for (const LayerRecord& r : la) {
    if (r.engine_notes.rfind("cudnn ", 0) != 0) continue;
    depthwise.push_back(r.name);
    winner_us += r.tuned_us;
    std::printf("  %-22s %-26s %s\n", r.name.c_str(), r.engine.c_str(), r.engine_notes.c_str());
    const size_t at = r.engine_notes.find(", ours ");
    if (at != std::string::npos) ours_us += std::atof(r.engine_notes.c_str() + at + 7);
  }
  std::printf(
      "  efficientnet_b0 fp16 batch 1: %d of 16 depthwise layers ours; %.1f us kept, "
      "%.1f us all ours\n",
      ours(la), winner_us, ours_us);
  EXPECT_EQ(depthwise.size(), 16u);
  for (const auto& [name, err] : checks)
    if (std::find(depthwise.begin(), depthwise.end(), name) != depthwise.end())
      EXPECT_LT(err, 1e-2) << name;
}

// --stem: the padded stems of ResNet-50, VGG-16, AlexNet and EfficientNet-B0 in our stem kernel
// (cnnbench) against the pad op plus cuDNN's conv (cudnn), fp16 and bf16 at batch 2, heuristics:
// the logits agree to 1e-2 (fp16 summation order, not a wrong kernel's ~1), the stem's record
// names the engine, and the stem layer's host check holds. Then auto under autotune (ResNet-50,
// fp16, batch 1): both timed, the record's notes give both times.
TEST(GpuNetwork, StemKernelMatchesCudnn) {
  GpuContext ctx;
  auto forward = [&](const Graph& g, const HostWeights& w, Precision p, int batch, EngineMode mode,
                     StemChoice choice, std::vector<LayerRecord>* layers,
                     std::vector<std::pair<std::string, double>>* checks) {
    CompileOptions opt;
    opt.precision = p;
    opt.batch = batch;
    opt.engine = mode;
    opt.stem = choice;
    return forward_once(ctx, g, w, opt, layers, checks, 256, 13);
  };
  for (const char* net : {"resnet50", "vgg16", "alexnet", "efficientnet_b0"}) {
    const Graph g = build_network(net);
    const HostWeights w = random_weights(g, 6);
    for (Precision p : {Precision::FP16, Precision::BF16}) {
      std::vector<LayerRecord> lc, lo;
      std::vector<std::pair<std::string, double>> checks;
      const std::vector<float> a =
          forward(g, w, p, 2, EngineMode::Heuristic, StemChoice::Cudnn, &lc, nullptr);
      const std::vector<float> b =
          forward(g, w, p, 2, EngineMode::Heuristic, StemChoice::Cnnbench, &lo, &checks);
      const double err = relative_l2(b, a);
      std::printf("  %s %s batch 2: stem kernel against pad + cuDNN rel_l2 %.2e (%s)\n", net,
                  precision_name(p), err, lo.front().engine.c_str());
      EXPECT_LT(err, 1e-2) << net << " " << precision_name(p);
      EXPECT_EQ(lo.front().engine, "cnnbench stem kernel") << net;
      EXPECT_EQ(lc.front().engine.rfind("cnnbench kernel", 0), 0u) << lc.front().engine;  // pad
      EXPECT_EQ(lo.size() + 1, lc.size()) << net << ": the pad op is not needed";
      ASSERT_FALSE(checks.empty());
      EXPECT_EQ(checks.front().first, lo.front().name);
      EXPECT_LT(checks.front().second, 1e-2) << net;
    }
  }
  const Graph g = build_network("resnet50");
  const HostWeights w = random_weights(g, 7);
  std::vector<LayerRecord> la;
  const std::vector<float> ref =
      forward(g, w, Precision::FP16, 1, EngineMode::Heuristic, StemChoice::Cudnn, nullptr, nullptr);
  const std::vector<float> c =
      forward(g, w, Precision::FP16, 1, EngineMode::Autotune, StemChoice::Auto, &la, nullptr);
  EXPECT_LT(relative_l2(c, ref), 1e-2);
  const LayerRecord& stem = la.front();
  std::printf("  resnet50 fp16 batch 1, autotune: %s (%s)\n", stem.engine.c_str(),
              stem.engine_notes.c_str());
  EXPECT_GT(stem.tuned_us, 0.0);
  EXPECT_TRUE(stem.tuned_in_graph);
  EXPECT_NE(stem.engine_notes.find(", ours "), std::string::npos) << stem.engine_notes;
  EXPECT_TRUE(stem.rejected.empty()) << stem.rejected.front();
}
