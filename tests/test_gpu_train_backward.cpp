// The backward of convolution (kernels/conv_backward.h, cuDNN) and of the linear layer
// (kernels/linear_backward.h, cuBLASLt) against the double-precision references of
// kernels/train_refs.h (conv_backward_data_ref, conv_backward_filter_ref, linear_backward_ref), in
// every precision, on fresh random batch sizes and odd heights and widths each run (the seed is in
// every failure message). Inputs are rounded to the storage type before the reference sees them;
// outputs start poisoned (NaN), so an output left unwritten fails. Relative L2 error below
// tolerance() of gpu_util.h: 1e-5 fp32 (TF32 off), 1e-3 tf32, 1e-2 fp16/bf16. The linear layer's
// fp32 dw and db from fp16/bf16 inputs are held to 1e-4: the products of two such inputs are exact
// in fp32 and only fp32 accumulation (in the tensor cores' order) stands between them and the
// reference, so the storage type's 1e-2 would hide a wrong reduction. Accumulation (beta = 1) is
// checked against the reference plus what the buffer held, and a captured backward-data plus
// backward-filter pair replayed from a CUDA graph must give what a direct run gave.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "kernels/conv_backward.h"
#include "kernels/linear_backward.h"
#include "kernels/train_refs.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

const Precision kAll[] = {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16};

RefVec to_ref(const std::vector<float>& v) {
  return RefVec(v.begin(), v.end());
}

std::string seed_note(unsigned seed) {
  return "seed " + std::to_string(seed);
}

// A conv's geometry; the batch and the odd height and width are drawn per run.
struct ConvCase {
  const char* name;
  int c, k, kernel, kernel_w, stride, pad, pad_w, groups;
};

const ConvCase kConvCases[] = {
    {"1x1", 16, 24, 1, 1, 1, 0, 0, 1},
    {"1x1 s2 (downsample)", 16, 32, 1, 1, 2, 0, 0, 1},
    {"3x3 s1 p1", 8, 16, 3, 3, 1, 1, 1, 1},
    {"3x3 s2 p1", 12, 8, 3, 3, 2, 1, 1, 1},
    {"7x7 s2 p3 (stem)", 3, 16, 7, 7, 2, 3, 3, 1},
    {"1x7 p0x3", 8, 12, 1, 7, 1, 0, 3, 1},
    {"7x1 p3x0", 12, 8, 7, 1, 1, 3, 0, 1},
    {"3x3 s1 g4", 16, 32, 3, 3, 1, 1, 1, 4},
    {"3x3 s2 g2", 8, 16, 3, 3, 2, 1, 1, 2},
    {"depthwise 3x3 s1", 24, 24, 3, 3, 1, 1, 1, 24},
    {"depthwise 3x3 s2", 24, 24, 3, 3, 2, 1, 1, 24},
    {"depthwise 5x5 s1", 16, 16, 5, 5, 1, 2, 2, 16},
    {"depthwise 5x5 s2", 16, 16, 5, 5, 2, 2, 2, 16},
};

// Batch 2..3, odd height and width 7..15 (a 7x7 kernel with stride 2 still has several outputs).
ConvGeom random_geom(const ConvCase& cc, std::mt19937& rng) {
  std::uniform_int_distribution<int> n(2, 3), hw(3, 7);
  const Dims x{n(rng), cc.c, 2 * hw(rng) + 1, 2 * hw(rng) + 1};
  return conv_geom(x, cc.k, cc.kernel, cc.kernel_w, cc.stride, cc.pad, cc.pad_w, 1, cc.groups);
}

ConvBackwardSpec spec_of(const ConvGeom& g, const ConvCase& cc, Precision p, bool accumulate) {
  ConvBackwardSpec s;
  s.name = std::string("test.") + cc.name;
  s.x = g.x, s.y = g.y;
  s.kernel = g.kernel, s.kernel_w = g.kernel_w, s.stride = g.stride;
  s.pad = g.pad, s.pad_w = g.pad_w, s.dilation = g.dilation, s.groups = g.groups;
  s.precision = p;
  s.accumulate = accumulate;
  return s;
}

size_t weight_count(const ConvGeom& g) {
  return size_t(g.y.c) * g.kernel * g.kernel_w * (g.x.c / g.groups);
}

struct Scratch {
  Scratch() : buf(bytes() / 4, DType::F32) { ts.ptr = buf.get(), ts.bytes = bytes(); }
  static size_t bytes() { return size_t(64) << 20; }
  DeviceBuffer buf;
  TuneScratch ts;
};

// n values of type t at p (a buffer whose type is known only once an op has chosen it).
void raw_upload(void* p, const std::vector<float>& v, DType t) {
  const std::vector<uint8_t> bytes = to_storage(v, t);
  CNN_CHECK_CUDA(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}
std::vector<float> raw_download(const void* p, size_t n, DType t) {
  std::vector<uint8_t> bytes(n * dtype_size(t));
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  CNN_CHECK_CUDA(cudaMemcpy(bytes.data(), p, bytes.size(), cudaMemcpyDeviceToHost));
  return from_storage(bytes, t);
}

RefVec plus(const RefVec& a, const std::vector<float>& b) {
  RefVec s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

// One conv backward (data or filter) against its reference; with `accumulate` the output holds
// random values first and must end as those plus the gradient. Returns the relative L2 error.
double check_conv_backward(GpuContext& ctx, Scratch& scratch, const ConvCase& cc, ConvGrad grad,
                           Precision p, bool accumulate, std::mt19937& rng, const std::string& note,
                           EngineMode mode = EngineMode::Heuristic, const Dims* fixed_x = nullptr,
                           bool force_padded = false) {
  const ConvGeom g = fixed_x ? conv_geom(*fixed_x, cc.k, cc.kernel, cc.kernel_w, cc.stride, cc.pad,
                                         cc.pad_w, 1, cc.groups)
                             : random_geom(cc, rng);
  ConvBackwardSpec s = spec_of(g, cc, p, accumulate);
  s.force_padded = force_padded;
  const DType t = storage_type(p);
  const float wb = std::sqrt(3.0f / float((g.x.c / g.groups) * g.kernel * g.kernel_w));
  const auto x = rounded(random_vector(size_t(g.x.numel()), rng), t);
  const auto w = rounded(random_vector(weight_count(g), rng, -wb, wb), t);
  const auto dy = rounded(random_vector(size_t(g.y.numel()), rng), t);
  DeviceBuffer bx(x, t), bw(w, t), bdy(dy, t), bdx(size_t(g.x.numel()), t);
  // dw in fp32 or the storage type, as prepare() decides: room for fp32 either way.
  DeviceBuffer bdw(weight_count(g), DType::F32);
  ConvBackwardBuffers b;
  if (grad == ConvGrad::Data)
    b.dy = bdy.get(), b.w = bw.get(), b.dx = bdx.get();
  else
    b.x = bx.get(), b.dy = bdy.get(), b.dw = bdw.get();
  ConvBackwardOp op(s, grad, b);
  op.prepare(ctx, mode, 4, scratch.ts);
  EXPECT_TRUE(engine_fits_precision(op.engine(), p))
      << s.signature(grad) << " took " << op.engine().notes();
  EXPECT_FALSE(op.record().engine.empty());
  if (force_padded) EXPECT_NE(op.record().engine.find("padded"), std::string::npos);
  EXPECT_LE(op.workspace_bytes(), scratch.ts.bytes);
  const DType out_t = grad == ConvGrad::Data ? t : op.dw_type();
  if (grad == ConvGrad::Filter && t == DType::F32) {
    EXPECT_EQ(op.dw_type(), DType::F32);
  }
  const size_t out_n = grad == ConvGrad::Data ? size_t(g.x.numel()) : weight_count(g);
  void* out = grad == ConvGrad::Data ? bdx.get() : bdw.get();
  std::vector<float> before;
  if (accumulate) {
    before = rounded(random_vector(out_n, rng), out_t);
    raw_upload(out, before, out_t);
  }
  op.bind_workspace(scratch.ts.ptr, scratch.ts.bytes);
  op.run(ctx.stream);
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  RefVec ref = grad == ConvGrad::Data ? conv_backward_data_ref(to_ref(dy), to_ref(w), g)
                                      : conv_backward_filter_ref(to_ref(x), to_ref(dy), g);
  if (accumulate) ref = plus(ref, before);
  const std::vector<float> got = raw_download(out, out_n, out_t);
  const double err = rel_l2(got, ref);
  const double tol = tolerance(p);
  std::printf("  %-22s %-6s %-4s%s %-9s out %-4s rel_l2 %.2e  %s\n", cc.name,
              grad == ConvGrad::Data ? "data" : "filter", precision_name(p),
              accumulate ? " acc" : "    ", engine_mode_name(mode), dtype_name(out_t), err,
              op.record().engine.c_str());
  EXPECT_LT(err, tol) << s.signature(grad) << " " << op.record().engine << " " << note;
  return err;
}

}  // namespace

TEST(GpuTrainBackward, ConvBackwardDataMatchesReference) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  for (Precision p : kAll)
    for (const ConvCase& cc : kConvCases)
      check_conv_backward(ctx, scratch, cc, ConvGrad::Data, p, false, rng, seed_note(seed));
  // Autotune times several candidates on the op's buffers and keeps the fastest.
  for (Precision p : {Precision::FP32, Precision::FP16})
    check_conv_backward(ctx, scratch, kConvCases[2], ConvGrad::Data, p, false, rng, seed_note(seed),
                        EngineMode::Autotune);
}

TEST(GpuTrainBackward, ConvBackwardFilterMatchesReference) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  for (Precision p : kAll)
    for (const ConvCase& cc : kConvCases)
      check_conv_backward(ctx, scratch, cc, ConvGrad::Filter, p, false, rng, seed_note(seed));
  for (Precision p : {Precision::FP32, Precision::BF16})
    check_conv_backward(ctx, scratch, kConvCases[10], ConvGrad::Filter, p, false, rng,
                        seed_note(seed), EngineMode::Autotune);
}

// ResNet's stem at 64 px in fp16 and bf16, the shape for which call 12 found no weight-gradient
// engine (x has 3 channels): the padded path (x padded to 8 channels in the workspace), forced
// on the small stem and taken by itself or not on the real one, overwriting and accumulating.
TEST(GpuTrainBackward, ConvBackwardFilterPadsAnRgbInput) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  const ConvCase stem{"7x7 s2 p3 (stem)", 3, 64, 7, 7, 2, 3, 3, 1};
  const Dims small{2, 3, 11, 13}, resnet{8, 3, 64, 64};
  for (Precision p : {Precision::FP16, Precision::BF16})
    for (bool acc : {false, true}) {
      check_conv_backward(ctx, scratch, stem, ConvGrad::Filter, p, acc, rng, seed_note(seed),
                          EngineMode::Heuristic, &small, true);
      check_conv_backward(ctx, scratch, stem, ConvGrad::Filter, p, acc, rng, seed_note(seed),
                          EngineMode::Heuristic, &resnet, false);
    }
  check_conv_backward(ctx, scratch, stem, ConvGrad::Filter, Precision::FP16, false, rng,
                      seed_note(seed), EngineMode::Autotune, &resnet, true);
}

TEST(GpuTrainBackward, ConvBackwardAccumulates) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  for (Precision p : {Precision::FP32, Precision::FP16})
    for (ConvGrad grad : {ConvGrad::Data, ConvGrad::Filter}) {
      check_conv_backward(ctx, scratch, kConvCases[2], grad, p, true, rng, seed_note(seed));
      check_conv_backward(ctx, scratch, kConvCases[9], grad, p, true, rng, seed_note(seed));
    }
}

// A backward-data and backward-filter pair captured in a CUDA graph and replayed on poisoned
// outputs and a dirty workspace: the same dx and dw as a direct run (bit for bit unless cuDNN
// marks the engine nondeterministic).
TEST(GpuTrainBackward, ConvBackwardPairReplaysFromGraph) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    const ConvCase& cc = kConvCases[3];  // 3x3 s2
    const ConvGeom g = random_geom(cc, rng);
    const DType t = storage_type(p);
    const auto x = rounded(random_vector(size_t(g.x.numel()), rng), t);
    const auto w = rounded(random_vector(weight_count(g), rng, -0.3f, 0.3f), t);
    const auto dy = rounded(random_vector(size_t(g.y.numel()), rng), t);
    DeviceBuffer bx(x, t), bw(w, t), bdy(dy, t), bdx(size_t(g.x.numel()), t);
    DeviceBuffer bdw(weight_count(g), DType::F32);  // dw_type() values; fp32 is the widest
    ConvBackwardBuffers fb;
    fb.x = bx.get(), fb.dy = bdy.get(), fb.dw = bdw.get();
    ConvBackwardBuffers db;
    db.dy = bdy.get(), db.w = bw.get(), db.dx = bdx.get();
    ConvBackwardOp data(spec_of(g, cc, p, false), ConvGrad::Data, db);
    ConvBackwardOp filter(spec_of(g, cc, p, false), ConvGrad::Filter, fb);
    // Separate workspaces: the two may run in either order in a graph.
    const size_t half_bytes = scratch.ts.bytes / 2;
    const TuneScratch first{scratch.ts.ptr, half_bytes};
    const TuneScratch second{static_cast<char*>(scratch.ts.ptr) + half_bytes, half_bytes};
    data.prepare(ctx, EngineMode::Heuristic, 1, first);
    filter.prepare(ctx, EngineMode::Heuristic, 1, second);
    const size_t wn = weight_count(g);
    const DType wt = filter.dw_type();
    data.bind_workspace(first.ptr, first.bytes);
    filter.bind_workspace(second.ptr, second.bytes);
    data.run(ctx.stream);
    filter.run(ctx.stream);
    const std::vector<float> dx1 = bdx.download(), dw1 = raw_download(bdw.get(), wn, wt);
    EXPECT_LT(rel_l2(dx1, conv_backward_data_ref(to_ref(dy), to_ref(w), g)), tolerance(p))
        << seed_note(seed);
    EXPECT_LT(rel_l2(dw1, conv_backward_filter_ref(to_ref(x), to_ref(dy), g)), tolerance(p))
        << seed_note(seed);

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CNN_CHECK_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
    data.run(ctx.stream);
    filter.run(ctx.stream);
    CNN_CHECK_CUDA(cudaStreamEndCapture(ctx.stream, &graph));
    CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 1; replay <= 2; ++replay) {
      bdx.poison();
      bdw.poison();
      CNN_CHECK_CUDA(cudaMemset(scratch.ts.ptr, 0x7F, scratch.ts.bytes));
      CNN_CHECK_CUDA(cudaGraphLaunch(exec, ctx.stream));
      CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
      const std::vector<float> dx2 = bdx.download(), dw2 = raw_download(bdw.get(), wn, wt);
      const bool nondet_d = data.engine().has_numerical(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
      const bool nondet_f = filter.engine().has_numerical(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
      if (nondet_d)
        EXPECT_LT(rel_l2(dx2, to_ref(dx1)), 1e-6) << "replay " << replay << " " << seed_note(seed);
      else
        EXPECT_EQ(dx2, dx1) << "replay " << replay << " dx " << data.record().engine;
      if (nondet_f)
        EXPECT_LT(rel_l2(dw2, to_ref(dw1)), 1e-6) << "replay " << replay << " " << seed_note(seed);
      else
        EXPECT_EQ(dw2, dw1) << "replay " << replay << " dw " << filter.record().engine;
    }
    CNN_CHECK_CUDA(cudaGraphExecDestroy(exec));
    CNN_CHECK_CUDA(cudaGraphDestroy(graph));
  }
}

namespace {

struct LinearCase {
  int batch, in, out;
};

void check_linear_backward(GpuContext& ctx, Scratch& scratch, const LinearCase& lc, Precision p,
                           bool accumulate, bool with_dx, bool with_db, EngineMode mode,
                           const std::string& note, std::mt19937& rng) {
  const DType t = storage_type(p);
  const int N = lc.batch, I = lc.in, O = lc.out;
  const float wb = std::sqrt(3.0f / float(I));
  const auto x = rounded(random_vector(size_t(N) * I, rng), t);
  const auto w = rounded(random_vector(size_t(O) * I, rng, -wb, wb), t);
  const auto dy = rounded(random_vector(size_t(N) * O, rng), t);
  DeviceBuffer bx(x, t), bw(w, t), bdy(dy, t), bdx(size_t(N) * I, t);
  DeviceBuffer bdw(size_t(O) * I, DType::F32), bdb(size_t(O), DType::F32);
  LinearBackwardSpec s;
  s.name = "test.fc";
  s.batch = N, s.in_features = I, s.out_features = O;
  s.precision = p;
  s.accumulate_dx = accumulate;
  LinearBackwardBuffers b;
  b.x = bx.get(), b.w = bw.get(), b.dy = bdy.get();
  b.dx = with_dx ? bdx.get() : nullptr;
  b.dw = static_cast<float*>(bdw.get());
  b.db = with_db ? static_cast<float*>(bdb.get()) : nullptr;
  LinearBackwardOp op(s, b);
  op.prepare(ctx, mode, 4, scratch.ts);
  op.bind_workspace(scratch.ts.ptr, scratch.ts.bytes);
  EXPECT_LE(op.workspace_bytes(), scratch.ts.bytes);
  // prepare() may have run the matmuls: set every output again (poisoned, or the prior values).
  std::vector<float> before;
  if (accumulate) {
    before = rounded(random_vector(size_t(N) * I, rng), t);
    bdx.upload(before);
  } else {
    bdx.poison();
  }
  bdw.poison();
  bdb.poison();
  op.run(ctx.stream);
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  const LinearGradRef ref = linear_backward_ref(to_ref(x), to_ref(w), to_ref(dy), N, I, O);
  const double f32_tol = p == Precision::FP32 ? 1e-5 : p == Precision::TF32 ? 1e-3 : 1e-4;
  const std::string what = std::string(precision_name(p)) + " " + std::to_string(N) + "x" +
                           std::to_string(I) + "->" + std::to_string(O) + " " + op.record().engine +
                           " " + note;
  double ex = 0, eb = 0;
  if (with_dx) {
    ex = rel_l2(bdx.download(), accumulate ? plus(ref.dx, before) : ref.dx);
    EXPECT_LT(ex, tolerance(p)) << "dx " << what;
  } else {
    int untouched = 0;
    for (float v : bdx.download()) untouched += std::isnan(v);
    EXPECT_EQ(untouched, N * I) << "dx written without being asked for " << what;
  }
  const double ew = rel_l2(bdw.download(), ref.dw);
  EXPECT_LT(ew, f32_tol) << "dw " << what;
  if (with_db) {
    eb = rel_l2(bdb.download(), ref.db);
    EXPECT_LT(eb, f32_tol) << "db " << what;
  }
  std::printf("  linear %4dx%-4d->%-4d %-4s%s dx %.2e dw %.2e db %.2e  %s\n", N, I, O,
              precision_name(p), accumulate ? " acc" : "    ", ex, ew, eb,
              op.record().engine.c_str());
}

}  // namespace

TEST(GpuTrainBackward, LinearBackwardMatchesReference) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  std::uniform_int_distribution<int> batch(2, 5), in(17, 300), out(10, 100);
  std::vector<LinearCase> cases;
  for (int i = 0; i < 3; ++i) cases.push_back({batch(rng), in(rng), out(rng)});
  cases.push_back({batch(rng), 512, 1000});  // a ResNet classifier
  cases.push_back({3, 64, 8});               // aligned, small
  for (Precision p : kAll)
    for (const LinearCase& lc : cases)
      check_linear_backward(ctx, scratch, lc, p, false, true, true, EngineMode::Heuristic,
                            seed_note(seed), rng);
  check_linear_backward(ctx, scratch, cases[0], Precision::FP16, false, true, true,
                        EngineMode::Autotune, seed_note(seed), rng);
}

TEST(GpuTrainBackward, LinearBackwardAccumulatesAndSkips) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  const LinearCase lc{3, 129, 37};
  for (Precision p : {Precision::FP32, Precision::BF16})
    check_linear_backward(ctx, scratch, lc, p, true, true, true, EngineMode::Heuristic,
                          seed_note(seed), rng);
  // Without dx (nothing wanted below), and without a bias.
  check_linear_backward(ctx, scratch, lc, Precision::FP32, false, false, true,
                        EngineMode::Heuristic, seed_note(seed), rng);
  check_linear_backward(ctx, scratch, lc, Precision::FP16, false, true, false,
                        EngineMode::Heuristic, seed_note(seed), rng);
}

// The linear backward captured in a CUDA graph and replayed on poisoned outputs and a dirty
// workspace: what a direct run gave (fp32; cuBLASLt may reduce in another order, hence 1e-6).
TEST(GpuTrainBackward, LinearBackwardReplaysFromGraph) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  GpuContext ctx;
  Scratch scratch;
  std::uniform_int_distribution<int> batch(2, 5), in(17, 300), out(10, 100);
  const int N = batch(rng), I = in(rng), O = out(rng);
  const auto x = random_vector(size_t(N) * I, rng), w = random_vector(size_t(O) * I, rng),
             dy = random_vector(size_t(N) * O, rng);
  const DType t = DType::F32;
  DeviceBuffer bx(x, t), bw(w, t), bdy(dy, t), bdx(size_t(N) * I, t), bdw(size_t(O) * I, t),
      bdb(size_t(O), t);
  LinearBackwardSpec s;
  s.name = "test.fc";
  s.batch = N, s.in_features = I, s.out_features = O;
  LinearBackwardBuffers b;
  b.x = bx.get(), b.w = bw.get(), b.dy = bdy.get(), b.dx = bdx.get();
  b.dw = static_cast<float*>(bdw.get()), b.db = static_cast<float*>(bdb.get());
  LinearBackwardOp op(s, b);
  op.prepare(ctx, EngineMode::Heuristic, 1, scratch.ts);
  op.bind_workspace(scratch.ts.ptr, scratch.ts.bytes);
  op.run(ctx.stream);
  const std::vector<float> dx1 = bdx.download(), dw1 = bdw.download(), db1 = bdb.download();
  const LinearGradRef ref = linear_backward_ref(to_ref(x), to_ref(w), to_ref(dy), N, I, O);
  EXPECT_LT(rel_l2(dx1, ref.dx), 1e-5) << seed_note(seed);
  EXPECT_LT(rel_l2(dw1, ref.dw), 1e-5) << seed_note(seed);
  EXPECT_LT(rel_l2(db1, ref.db), 1e-5) << seed_note(seed);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CNN_CHECK_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  op.run(ctx.stream);
  CNN_CHECK_CUDA(cudaStreamEndCapture(ctx.stream, &graph));
  CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 1; replay <= 2; ++replay) {
    bdx.poison();
    bdw.poison();
    bdb.poison();
    CNN_CHECK_CUDA(cudaMemset(scratch.ts.ptr, 0x7F, scratch.ts.bytes));
    CNN_CHECK_CUDA(cudaGraphLaunch(exec, ctx.stream));
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    EXPECT_LT(rel_l2(bdx.download(), to_ref(dx1)), 1e-6) << "replay " << replay;
    EXPECT_LT(rel_l2(bdw.download(), to_ref(dw1)), 1e-6) << "replay " << replay;
    EXPECT_LT(rel_l2(bdb.download(), to_ref(db1)), 1e-6) << "replay " << replay;
  }
  CNN_CHECK_CUDA(cudaGraphExecDestroy(exec));
  CNN_CHECK_CUDA(cudaGraphDestroy(graph));
}
