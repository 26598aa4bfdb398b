// The zoo's kernels of our own against their host references, in every storage type, outputs
// poisoned (NaN) first: LRN, squeeze-excitation (repeated and replayed from a CUDA graph, so its
// counters must reset themselves), activations in the epilogue, adaptive pooling, and writes
// into a channel slice of a wider buffer that must leave the other channels alone; the depthwise
// conv in every variant, and past 2^31 elements.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <utility>

#include "depthwise_cases.h"
#include "gpu_util.h"
#include "kernels/depthwise.h"
#include "kernels/detect_gpu.h"
#include "kernels/fir_design.h"
#include "kernels/lrn.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/se.h"
#include "kernels/storage.h"
#include "kernels/stylegan.h"
#include "kernels/stylegan3.h"
#include "kernels/upsample.h"
#include "networks/weights.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

const Precision kAll[] = {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16};

// The channels [offset, offset + c) of rows `ld` wide; the rest must still be NaN.
std::vector<float> slice_of(const std::vector<float>& wide, int64_t rows, int ld, int offset, int c,
                            int* untouched_not_nan) {
  std::vector<float> out(size_t(rows) * c);
  *untouched_not_nan = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < ld; ++j) {
      const float v = wide[size_t(r) * ld + j];
      if (j >= offset && j < offset + c)
        out[size_t(r) * c + j - offset] = v;
      else
        *untouched_not_nan += !std::isnan(v);
    }
  return out;
}

}  // namespace

TEST(GpuKernels, LrnMatchesReferencePackedAndIntoASlice) {
  std::mt19937 rng(std::random_device{}());
  for (Precision p : kAll)
    for (int C : {37, 96}) {  // 96: packed rows take the vectorised kernel (into a slice: not)
      const DType t = storage_type(p);
      for (int size : {5, 3, 4}) {
        LrnSpec s;
        s.x = {2, C, 5, 6};
        s.size = size, s.alpha = 1e-2, s.beta = 0.75, s.k = 2.0;
        const auto x = rounded(random_vector(size_t(s.x.numel()), rng, -3, 3), t);
        const std::vector<double> ref = lrn_reference(x, s);
        DeviceBuffer dx(x, t), dy(size_t(s.x.numel()), t);
        launch_lrn(t, dx.get(), dy.get(), s, nullptr);
        EXPECT_LT(rel_l2(dy.download(), ref), tolerance(p))
            << precision_name(p) << " " << C << " channels, size " << size;
        // Into channels [7, 7 + C) of rows C + 13 wide.
        const int64_t rows = int64_t(s.x.n) * s.x.h * s.x.w;
        DeviceBuffer wide(size_t(rows) * (C + 13), t);
        s.ld_y = C + 13;
        launch_lrn(t, dx.get(), static_cast<char*>(wide.get()) + 7 * dtype_size(t), s, nullptr);
        int stray = 0;
        const auto got = slice_of(wide.download(), rows, C + 13, 7, C, &stray);
        EXPECT_EQ(stray, 0) << "LRN wrote outside its slice";
        EXPECT_LT(rel_l2(got, ref), tolerance(p)) << precision_name(p) << " sliced";
      }
    }
}

TEST(GpuKernels, SqueezeExcitationMatchesReferenceRepeatedAndReplayed) {
  std::mt19937 rng(std::random_device{}());
  struct Case {
    Dims x;
    int squeeze;
  };
  // Small; many pixel ranges per image; B7's widest (3840 channels, squeeze 160: fc1 in its own
  // kernel); batch 1 at a large size (one channel slice, 264 pixel ranges); B0's last (fc1 in the
  // pool's last block, 18 slices, the last one partial); 36 channels (fp16 and bf16 without
  // 16-byte loads); B5's stage 7 at batch 4 (fc1 apart, slices of 1824 channels).
  const Case cases[] = {{{3, 40, 9, 11}, 5},     {{2, 96, 56, 56}, 4},  {{2, 3840, 5, 5}, 160},
                        {{1, 64, 150, 150}, 16}, {{1, 1152, 7, 7}, 48}, {{1, 36, 7, 7}, 9},
                        {{4, 1824, 15, 15}, 76}};
  for (Precision p : kAll)
    for (const Case& c : cases) {
      const DType t = storage_type(p);
      SeSpec s;
      s.x = c.x;
      s.squeeze = c.squeeze;
      const int C = c.x.c, sq = c.squeeze;
      const auto x = rounded(random_vector(size_t(c.x.numel()), rng, -2, 2), t);
      const float b1w = 1.0f / std::sqrt(float(C)), b2w = 1.0f / std::sqrt(float(sq));
      const auto w1 = random_vector(size_t(sq) * C, rng, -3 * b1w, 3 * b1w);
      const auto b1 = random_vector(size_t(sq), rng, -0.5f, 0.5f);
      const auto w2 = random_vector(size_t(C) * sq, rng, -3 * b2w, 3 * b2w);
      const auto b2 = random_vector(size_t(C), rng, -0.5f, 0.5f);
      const std::vector<double> ref = se_reference(x, w1, b1, w2, b2, s);
      DeviceBuffer dx(x, t), dy(size_t(c.x.numel()), t);
      DeviceBuffer dw1(w1, DType::F32), db1(b1, DType::F32), dw2(w2, DType::F32),
          db2(b2, DType::F32);
      void* scratch = nullptr;
      CNN_CHECK_CUDA(cudaMalloc(&scratch, se_scratch_bytes(s)));
      CNN_CHECK_CUDA(cudaMemset(scratch, 0, se_scratch_bytes(s)));
      // Both variants, one after the other on the same scratch (as autotune runs them), each
      // against the reference, repeated, replayed and in place.
      for (SeVariant v : {SeVariant::OneBlock, SeVariant::Split, SeVariant::OneBlock}) {
        const std::string what =
            std::string(precision_name(p)) + " C " + std::to_string(C) + " " + se_variant_name(v);
        auto run = [&](cudaStream_t st) {
          launch_se(t, dx.get(), dy.get(), static_cast<const float*>(dw1.get()),
                    static_cast<const float*>(db1.get()), static_cast<const float*>(dw2.get()),
                    static_cast<const float*>(db2.get()), s, v, scratch, st);
        };
        run(nullptr);
        const std::vector<float> first = dy.download();
        EXPECT_LT(rel_l2(first, ref), tolerance(p)) << what;
        dy.poison();
        run(nullptr);
        EXPECT_EQ(dy.download(), first) << "a second run differs: counters not reset, " << what;
        cudaStream_t stream;
        CNN_CHECK_CUDA(cudaStreamCreate(&stream));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CNN_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        run(stream);
        CNN_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
        CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < 2; ++i) {
          dy.poison();
          CNN_CHECK_CUDA(cudaGraphLaunch(exec, stream));
          CNN_CHECK_CUDA(cudaStreamSynchronize(stream));
          EXPECT_EQ(dy.download(), first) << "graph replay " << i << " differs, " << what;
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        // In place (y aliasing x), as the model may run it.
        DeviceBuffer dz(x, t);
        launch_se(t, dz.get(), dz.get(), static_cast<const float*>(dw1.get()),
                  static_cast<const float*>(db1.get()), static_cast<const float*>(dw2.get()),
                  static_cast<const float*>(db2.get()), s, v, scratch, stream);
        CNN_CHECK_CUDA(cudaStreamSynchronize(stream));
        EXPECT_EQ(dz.download(), first) << "in place differs, " << what;
        cudaStreamDestroy(stream);
      }
      // Autotune's timing: both variants timed, the faster returned, and the scratch's counters
      // left at zero (a run after it still matches).
      double us[2] = {-1, -1};
      const SeVariant best =
          tune_se(t, dx.get(), dy.get(), static_cast<const float*>(dw1.get()),
                  static_cast<const float*>(db1.get()), static_cast<const float*>(dw2.get()),
                  static_cast<const float*>(db2.get()), s, scratch, nullptr, us);
      EXPECT_GT(us[0], 0.0);
      EXPECT_GT(us[1], 0.0);
      EXPECT_EQ(best, us[0] <= us[1] ? SeVariant::OneBlock : SeVariant::Split);
      if (p == Precision::FP16)
        std::printf("  se %s squeeze %d: one-block %.1f us, split %.1f us (%s)\n",
                    c.x.str().c_str(), sq, us[0], us[1], se_kernels(s, SeVariant::Split).c_str());
      launch_se(t, dx.get(), dy.get(), static_cast<const float*>(dw1.get()),
                static_cast<const float*>(db1.get()), static_cast<const float*>(dw2.get()),
                static_cast<const float*>(db2.get()), s, best, scratch, nullptr);
      EXPECT_LT(rel_l2(dy.download(), ref), tolerance(p)) << "after tune_se";
      cudaFree(scratch);
    }
}

TEST(GpuKernels, EpilogueActivationsAndStrides) {
  std::mt19937 rng(std::random_device{}());
  for (Precision p : kAll)
    for (Act act : {Act::None, Act::ReLU, Act::SiLU, Act::Sigmoid}) {
      const DType t = storage_type(p);
      const int C = 19, ldx = 23, ldy = 31, off = 5;
      const int64_t rows = 3 * 7;
      const auto x = rounded(random_vector(size_t(rows) * ldx, rng, -4, 4), t);
      const auto z = rounded(random_vector(size_t(rows) * C, rng), t);
      const auto b = rounded(random_vector(C, rng), t);
      DeviceBuffer dx(x, t), dz(z, t), db(b, t), dy(size_t(rows) * ldy, t);
      RowLayout l;
      l.rows = rows, l.channels = C, l.ld_x = ldx, l.ld_y = ldy, l.ld_z = C;
      launch_epilogue(t, static_cast<char*>(dy.get()) + off * dtype_size(t), dx.get(), nullptr,
                      db.get(), dz.get(), act, l, nullptr);
      std::vector<double> ref(size_t(rows) * C);
      for (int64_t r = 0; r < rows; ++r)
        for (int c = 0; c < C; ++c)
          ref[size_t(r) * C + c] =
              act_ref(act, double(x[size_t(r) * ldx + c]) + b[c] + z[r * C + c]);
      int stray = 0;
      const auto got = slice_of(dy.download(), rows, ldy, off, C, &stray);
      EXPECT_EQ(stray, 0) << act_name(act);
      EXPECT_LT(rel_l2(got, ref), tolerance(p)) << precision_name(p) << " " << act_name(act);
    }
}

TEST(GpuKernels, CopyChannelsAndPoolsIntoSlices) {
  std::mt19937 rng(std::random_device{}());
  for (Precision p : kAll) {
    const DType t = storage_type(p);
    // Max pool 3x3/2 pad 1 of 2x24x9x9 into channels [8, 32) of a 40-wide buffer.
    PoolSpec s;
    s.x = {2, 24, 9, 9};
    s.y = {2, 24, 5, 5};
    s.kernel = 3, s.stride = 2, s.pad = 1, s.ld_y = 40;
    const auto x = rounded(random_vector(size_t(s.x.numel()), rng), t);
    DeviceBuffer dx(x, t), wide(size_t(2 * 25) * 40, t);
    launch_maxpool(t, dx.get(), static_cast<char*>(wide.get()) + 8 * dtype_size(t), s, nullptr);
    std::vector<double> ref(size_t(s.y.numel()));
    for (int n = 0; n < 2; ++n)
      for (int oh = 0; oh < 5; ++oh)
        for (int ow = 0; ow < 5; ++ow)
          for (int c = 0; c < 24; ++c) {
            double m = -1e30;
            for (int r = 0; r < 3; ++r)
              for (int q = 0; q < 3; ++q) {
                const int ih = oh * 2 - 1 + r, iw = ow * 2 - 1 + q;
                if (ih >= 0 && ih < 9 && iw >= 0 && iw < 9)
                  m = std::max(m, double(x[((size_t(n) * 9 + ih) * 9 + iw) * 24 + c]));
              }
            ref[((size_t(n) * 5 + oh) * 5 + ow) * 24 + c] = m;
          }
    int stray = 0;
    EXPECT_LT(rel_l2(slice_of(wide.download(), 50, 40, 8, 24, &stray), ref), tolerance(p));
    EXPECT_EQ(stray, 0);
    {  // Average pool 3x3/1 pad 1 (counting padding) read from a slice and written into one:
       // rows of 32 read from channel 8, rows of 40 written from channel 16 (both vectorised).
      PoolSpec a;
      a.x = {2, 16, 6, 6};
      a.y = {2, 16, 6, 6};
      a.kernel = 3, a.stride = 1, a.pad = 1, a.ld_x = 32, a.ld_y = 40;
      const auto xs = rounded(random_vector(size_t(2 * 36) * 32, rng), t);
      DeviceBuffer src(xs, t), dst(size_t(2 * 36) * 40, t);
      launch_avgpool(t, static_cast<char*>(src.get()) + 8 * dtype_size(t),
                     static_cast<char*>(dst.get()) + 16 * dtype_size(t), a, nullptr);
      std::vector<double> aref(size_t(2 * 36) * 16);
      for (int n = 0; n < 2; ++n)
        for (int oh = 0; oh < 6; ++oh)
          for (int ow = 0; ow < 6; ++ow)
            for (int c = 0; c < 16; ++c) {
              double acc = 0;
              for (int r = -1; r <= 1; ++r)
                for (int q = -1; q <= 1; ++q) {
                  const int ih = oh + r, iw = ow + q;
                  if (ih >= 0 && ih < 6 && iw >= 0 && iw < 6)
                    acc += xs[((size_t(n) * 6 + ih) * 6 + iw) * 32 + 8 + c];
                }
              aref[((size_t(n) * 6 + oh) * 6 + ow) * 16 + c] = acc / 9;
            }
      EXPECT_LT(rel_l2(slice_of(dst.download(), 72, 40, 16, 16, &stray), aref), tolerance(p))
          << precision_name(p) << " average pool between slices";
      EXPECT_EQ(stray, 0);
    }
    // The copy a concat falls back to: channels [0, 24) of the pool output into [30, 54) of 60.
    DeviceBuffer dst(size_t(50) * 60, t);
    launch_copy_channels(t, static_cast<char*>(dst.get()) + 30 * dtype_size(t), 60,
                         static_cast<char*>(wide.get()) + 8 * dtype_size(t), 40, 50, 24, nullptr);
    EXPECT_LT(rel_l2(slice_of(dst.download(), 50, 60, 30, 24, &stray), ref), 1e-7);
    EXPECT_EQ(stray, 0);
  }
}

// launch_pad_channels: each row's values then zeros, whole rows stored as one word where the
// padded row is 8 or 16 bytes and dst is aligned to it, element by element otherwise (other widths,
// dst misaligned by one element); the stray poison after the rows untouched.
TEST(GpuKernels, PadChannelsWidensRowsWithZeros) {
  std::mt19937 rng(std::random_device{}());
  int checked = 0;
  for (Precision p : kAll) {
    const DType t = storage_type(p);
    const size_t es = dtype_size(t);
    for (auto [channels, padded] : {std::pair{3, 4}, {3, 8}, {1, 2}, {5, 8}, {3, 6}, {4, 4}})
      for (int64_t rows : {int64_t(1), int64_t(1001), int64_t(70000)})
        for (int shift : {0, 1}) {  // dst at element `shift` of its buffer: 1 misaligns it
          const auto src = rounded(random_vector(size_t(rows) * channels, rng), t);
          DeviceBuffer bsrc(src, t), bdst(size_t(rows) * padded + 8, t);  // poisoned (NaN)
          launch_pad_channels(t, static_cast<char*>(bdst.get()) + shift * es, padded, bsrc.get(),
                              channels, rows, nullptr);
          const std::vector<float> got = bdst.download();
          int wrong = 0, stray = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const int64_t j = int64_t(i) - shift;
            if (j < 0 || j >= rows * padded) {
              stray += !std::isnan(got[i]);
              continue;
            }
            const int64_t r = j / padded;
            const int c = int(j % padded);
            const float want = c < channels ? src[size_t(r) * channels + c] : 0.0f;
            wrong += !(got[i] == want && std::signbit(got[i]) == std::signbit(want));
          }
          EXPECT_EQ(wrong, 0) << dtype_name(t) << " " << channels << " -> " << padded << ", "
                              << rows << " rows, shift " << shift;
          EXPECT_EQ(stray, 0) << dtype_name(t) << ": wrote outside the rows";
          ++checked;
        }
  }
  EXPECT_EQ(checked, int(std::size(kAll)) * 6 * 3 * 2);
}

TEST(GpuKernels, AdaptiveAvgPoolUsesPyTorchsBins) {
  std::mt19937 rng(std::random_device{}());
  for (Precision p : kAll) {
    const DType t = storage_type(p);
    for (int out : {3, 5, 8}) {  // 8 -> 3 and 8 -> 5 overlap their bins; 8 -> 8 is the identity
      PoolSpec s;
      s.x = {2, 13, 8, 8};
      s.y = {2, 13, out, out};
      const auto x = rounded(random_vector(size_t(s.x.numel()), rng), t);
      DeviceBuffer dx(x, t), dy(size_t(s.y.numel()), t);
      launch_adaptive_avgpool(t, dx.get(), dy.get(), s, nullptr);
      std::vector<double> ref(size_t(s.y.numel()));
      for (int n = 0; n < 2; ++n)
        for (int i = 0; i < out; ++i)
          for (int j = 0; j < out; ++j)
            for (int c = 0; c < 13; ++c) {
              const int h0 = int(std::floor(i * 8.0 / out)),
                        h1 = int(std::ceil((i + 1) * 8.0 / out));
              const int w0 = int(std::floor(j * 8.0 / out)),
                        w1 = int(std::ceil((j + 1) * 8.0 / out));
              double sum = 0;
              for (int h = h0; h < h1; ++h)
                for (int w = w0; w < w1; ++w) sum += x[((size_t(n) * 8 + h) * 8 + w) * 13 + c];
              ref[((size_t(n) * out + i) * out + j) * 13 + c] = sum / ((h1 - h0) * (w1 - w0));
            }
      EXPECT_LT(rel_l2(dy.download(), ref), tolerance(p)) << precision_name(p) << " out " << out;
    }
  }
}

// Our depthwise conv against the host reference: k3 and k5 at strides 1 and 2 (the unrolled
// kernel, each px choice), kernel 7 (generic), odd sizes, batch 2, channels that do not split
// into 16-byte vectors, pointers one element off 16-byte alignment (scalar loads), several channel
// tiles with a partial last one (296 and 1344 channels), every activation and storage type, a
// null bias. Outputs are poisoned first, the 64 bytes past the output must stay poisoned, and a
// CUDA-graph replay must give the same bits.
TEST(GpuKernels, DepthwiseMatchesReference) {
  std::mt19937 rng(std::random_device{}());
  struct Case {
    Dims x;
    int k, stride;
  };
  const Case cases[] = {
      {{2, 64, 15, 15}, 3, 1}, {{1, 56, 33, 31}, 3, 2},   {{2, 48, 14, 13}, 5, 1},
      {{1, 40, 17, 17}, 5, 2}, {{2, 36, 9, 11}, 3, 1},    {{1, 13, 10, 7}, 5, 2},
      {{1, 24, 12, 12}, 7, 1}, {{1, 296, 9, 10}, 3, 2},   {{1, 1344, 17, 17}, 5, 1},
      {{2, 96, 56, 56}, 3, 2}, {{1, 56, 130, 130}, 3, 1}, {{2, 8, 1, 1}, 3, 1},
  };
  const Act acts[] = {Act::None, Act::ReLU, Act::SiLU, Act::Sigmoid};
  cudaStream_t stream;
  CNN_CHECK_CUDA(cudaStreamCreate(&stream));
  int variant = 0;
  for (Precision p : kAll)
    for (const Case& c : cases)
      for (bool aligned : {true, false}) {
        const Act act = acts[variant++ % 4];
        const bool no_bias = variant % 7 == 0;
        const DType t = storage_type(p);
        const size_t es = dtype_size(t);
        const DepthwiseSpec s = dw_spec(c.x, c.k, c.stride, act);
        const int C = c.x.c;
        const float wb = 1.0f / float(c.k);
        const auto x = rounded(random_vector(size_t(s.x.numel()), rng, -2, 2), t);
        const auto w = rounded(random_vector(size_t(C) * c.k * c.k, rng, -wb, wb), t);
        const auto b = rounded(random_vector(size_t(C), rng, -0.5f, 0.5f), t);
        const std::vector<double> ref =
            depthwise_reference(x, w, no_bias ? std::vector<float>() : b, s);
        // Unaligned: x and y start one element past the allocation's (256-byte aligned) start.
        const size_t off = aligned ? 0 : 1, tail = 64 / es;
        std::vector<float> xpad(off + x.size(), 0.0f);
        std::copy(x.begin(), x.end(), xpad.begin() + std::ptrdiff_t(off));
        DeviceBuffer dx(xpad, t), dw(w, t), db(b, t), dy(off + size_t(s.y.numel()) + tail, t);
        const void* xp = static_cast<const char*>(dx.get()) + off * es;
        void* yp = static_cast<char*>(dy.get()) + off * es;
        const void* bp = no_bias ? nullptr : db.get();
        const std::string what = std::string(precision_name(p)) + " " + s.x.str() + " k" +
                                 std::to_string(c.k) + " s" + std::to_string(c.stride) +
                                 (aligned ? "" : " unaligned") + " " + act_name(act) +
                                 (no_bias ? " no bias" : "");
        const std::vector<int> pxs = depthwise_px_choices(t, s, aligned);
        EXPECT_EQ(depthwise_geometry(t, s, aligned).vec > 1, aligned && C % int(16 / es) == 0)
            << what;
        for (int px : pxs) {
          dy.poison();
          launch_depthwise(t, xp, dw.get(), bp, yp, s, px, stream);
          CNN_CHECK_CUDA(cudaStreamSynchronize(stream));
          const std::vector<float> all = dy.download();
          const std::vector<float> got(all.begin() + off, all.begin() + off + s.y.numel());
          EXPECT_LT(rel_l2(got, ref), tolerance(p)) << what << " px" << px;
          int stray = 0;
          for (size_t i = off + size_t(s.y.numel()); i < all.size(); ++i)
            stray += !std::isnan(all[i]);
          for (size_t i = 0; i < off; ++i) stray += !std::isnan(all[i]);
          EXPECT_EQ(stray, 0) << what << " px" << px << ": wrote outside the output";
          // Replayed from a CUDA graph onto a poisoned output: the same bits.
          cudaGraph_t graph;
          cudaGraphExec_t exec;
          CNN_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
          launch_depthwise(t, xp, dw.get(), bp, yp, s, px, stream);
          CNN_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
          CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
          dy.poison();
          CNN_CHECK_CUDA(cudaGraphLaunch(exec, stream));
          CNN_CHECK_CUDA(cudaStreamSynchronize(stream));
          const std::vector<float> again = dy.download();
          EXPECT_EQ(std::vector<float>(again.begin() + off, again.begin() + off + s.y.numel()), got)
              << what << " px" << px << ": graph replay differs";
          cudaGraphExecDestroy(exec);
          cudaGraphDestroy(graph);
        }
      }
  cudaStreamDestroy(stream);
}

// Batch 256 at 264x264 with 128 channels: more than 2^31 elements (and bytes past 2^32 in
// fp32), so every offset must be 64-bit. x is one constant (a byte pattern), so a sampled output
// is bias + x * (the sum of its taps that fall inside the image); samples from the last image
// and from all over. Skipped where the device lacks the memory (about 9 GB fp16, 18 GB fp32).
TEST(GpuKernels, DepthwiseIndexesPastTwoToThe31Elements) {
  std::mt19937 rng(5);
  for (Precision p : {Precision::FP16, Precision::FP32}) {
    const DType t = storage_type(p);
    const size_t es = dtype_size(t);
    const DepthwiseSpec s = dw_spec({256, 128, 264, 264}, 3, 1, Act::None);
    const size_t count = size_t(s.x.numel());
    ASSERT_GT(count, size_t(1) << 31);
    size_t free_bytes = 0, total = 0;
    CNN_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
    if (free_bytes < 2 * count * es + (size_t(1) << 30)) {
      std::printf("  %s skipped: %.1f GB free\n", precision_name(p), free_bytes / 1e9);
      continue;
    }
    void *x = nullptr, *y = nullptr;
    CNN_CHECK_CUDA(cudaMalloc(&x, count * es));
    CNN_CHECK_CUDA(cudaMalloc(&y, count * es));
    CNN_CHECK_CUDA(cudaMemset(x, 0x3C, count * es));  // fp16 0x3C3C, fp32 0x3C3C3C3C
    const float xv = from_storage(std::vector<uint8_t>(es, 0x3C), t)[0];
    const int C = 128;
    const auto w = rounded(random_vector(size_t(C) * 9, rng, -0.3f, 0.3f), t);
    const auto b = rounded(random_vector(size_t(C), rng, -0.5f, 0.5f), t);
    DeviceBuffer dw(w, t), db(b, t);
    for (int px : depthwise_px_choices(t, s, true)) {
      CNN_CHECK_CUDA(cudaMemset(y, 0xFF, count * es));  // NaN: an unwritten output fails
      launch_depthwise(t, x, dw.get(), db.get(), y, s, px, nullptr);
      CNN_CHECK_CUDA(cudaDeviceSynchronize());
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < 2 * C; ++i) idx.push_back(int64_t(count) - 1 - i);  // the very end
      const int64_t last_image = int64_t(count) - int64_t(264) * 264 * C;
      std::uniform_int_distribution<int64_t> any(0, int64_t(count) - 1),
          late(last_image, int64_t(count) - 1);
      for (int i = 0; i < 200; ++i) idx.push_back(any(rng)), idx.push_back(late(rng));
      std::vector<float> got, want;
      for (int64_t i : idx) {
        std::vector<uint8_t> bytes(es);
        CNN_CHECK_CUDA(cudaMemcpy(bytes.data(), static_cast<const char*>(y) + size_t(i) * es, es,
                                  cudaMemcpyDeviceToHost));
        got.push_back(from_storage(bytes, t)[0]);
        const int c = int(i % C);
        const int64_t pix = i / C;
        const int ow = int(pix % 264), oh = int(pix / 264 % 264);
        double acc = b[size_t(c)];
        for (int r = 0; r < 3; ++r)
          for (int q = 0; q < 3; ++q) {
            const int ih = oh - 1 + r, iw = ow - 1 + q;
            if (ih >= 0 && ih < 264 && iw >= 0 && iw < 264)
              acc += double(xv) * w[size_t(c) * 9 + r * 3 + q];
          }
        want.push_back(float(acc));
      }
      std::vector<double> want_d(want.begin(), want.end());
      EXPECT_LT(rel_l2(got, want_d), tolerance(p)) << precision_name(p) << " px" << px;
    }
    cudaFree(x);
    cudaFree(y);
  }
}

// The synthetic input written on the device is, bit for bit, the host's random_uniform batch
// uploaded as NHWC: every storage type, dims that divide nothing evenly, and another seed.
TEST(GpuKernels, SyntheticInputOnTheDeviceEqualsTheHostsBitForBit) {
  for (const Dims d : {Dims{3, 5, 7, 11}, Dims{2, 3, 224, 224}})
    for (const DType t : {DType::F32, DType::F16, DType::BF16})
      for (const uint64_t seed : {uint64_t(0), uint64_t(12345)}) {
        const size_t n = size_t(d.numel()), bytes = n * dtype_size(t);
        DeviceBuffer host_way(n, t), device_way(n, t);
        upload_nchw_as_nhwc(host_way.get(), random_uniform(seed, "input", n, -1.f, 1.f), d, t);
        fill_uniform_nhwc(device_way.get(), random_stream_state(seed, "input"), d, t, -1.f, 1.f,
                          nullptr);
        CNN_CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<uint8_t> a(bytes), b(bytes);
        CNN_CHECK_CUDA(cudaMemcpy(a.data(), host_way.get(), bytes, cudaMemcpyDeviceToHost));
        CNN_CHECK_CUDA(cudaMemcpy(b.data(), device_way.get(), bytes, cudaMemcpyDeviceToHost));
        EXPECT_EQ(a, b) << d.str() << " " << dtype_name(t) << " seed " << seed;
      }
}

// StyleGAN's upfirdn2d kernel against the host reference (kernels/stylegan.h): NVlabs'
// upsample2d with the [1, 3, 3, 1] filter, a padded filter2d and a down-sampling by 2, in every
// storage type, the last into a channel slice of a wider buffer.
TEST(GpuKernels, Upfirdn2dMatchesTheHostReference) {
  std::mt19937 rng(31);
  const int n = 2, c = 5, h = 7, w = 6;
  const std::vector<float> x = random_vector(size_t(n) * c * h * w, rng);
  const std::vector<float> f = fir_2d(stylegan2_fir_1d());
  DeviceBuffer f_d(f, DType::F32);
  FirSpec down;
  down.down = 2, down.fh = down.fw = 4, down.pad_x0 = down.pad_y0 = 1;
  down.pad_x1 = down.pad_y1 = 2;
  FirSpec padded;
  padded.fh = padded.fw = 4, padded.pad_x0 = padded.pad_y0 = 2, padded.pad_x1 = padded.pad_y1 = 1;
  for (const DType t : {DType::F32, DType::F16, DType::BF16})
    for (const FirSpec& s : {upsample2d_spec(4), padded, down}) {
      const Dims in{n, c, h, w};
      // The host works on what the device holds: the input rounded to t.
      const std::vector<float> xr = from_storage(to_storage(x, t), t);
      const std::vector<float> want = upfirdn2d_reference(xr, n, c, h, w, f, s);
      const Dims out{n, c, s.out_h(h), s.out_w(w)};
      const int ld = s.down == 2 ? c + 3 : 0;  // into channels [0, c) of a c + 3 wide buffer
      DeviceBuffer x_d(nchw_to_nhwc(xr, in), t);
      DeviceBuffer y_d(size_t(out.n) * out.h * out.w * (ld ? ld : c), t);
      launch_upfirdn2d(x_d.get(), in, t, static_cast<const float*>(f_d.get()), s, y_d.get(), ld,
                       nullptr);
      CNN_CHECK_CUDA(cudaDeviceSynchronize());
      std::vector<float> got = y_d.download();
      if (ld) {  // keep the slice
        std::vector<float> slice;
        for (size_t p = 0; p < got.size() / ld; ++p)
          slice.insert(slice.end(), got.begin() + p * ld, got.begin() + p * ld + c);
        got = slice;
      }
      const std::vector<float> got_nchw = nhwc_to_nchw(got, out);
      const double tol = t == DType::F32 ? 1e-6 : t == DType::F16 ? 2e-3 : 1e-2;
      EXPECT_LT(relative_l2(got_nchw, want), tol)
          << dtype_name(t) << " up " << s.up << " down " << s.down;
    }
}

// bias_act with the synthesis layer's noise and clamp, and the modulation's per-(image, channel)
// scale and demodulation coefficients, against the host references.
TEST(GpuKernels, StyleganBiasActScaleAndDemodMatchTheHostReference) {
  std::mt19937 rng(32);
  const int n = 2, c = 6, h = 4, w = 5, k = 3, r = 3;
  const std::vector<float> x = random_vector(size_t(n) * c * h * w, rng);
  std::vector<float> x_big = x;
  for (float& v : x_big) v *= 400.f;  // some beyond the clamp
  const std::vector<float> bias = random_vector(size_t(c), rng);
  const std::vector<float> noise = random_vector(size_t(h) * w, rng);
  DeviceBuffer bias_d(bias, DType::F32), noise_d(noise, DType::F32);
  BiasActSpec s;
  s.clamp = 256.f;
  s.noise_strength = 0.3f;
  const Dims d{n, c, h, w};
  for (const DType t : {DType::F32, DType::F16}) {
    const std::vector<float> xr = from_storage(to_storage(x_big, t), t);
    DeviceBuffer x_d(nchw_to_nhwc(xr, d), t);
    launch_bias_act(x_d.get(), x_d.get(), d, t, static_cast<const float*>(bias_d.get()),
                    static_cast<const float*>(noise_d.get()), s, nullptr);
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> got = nhwc_to_nchw(x_d.download(), d);
    const std::vector<float> want = bias_act_reference(xr, n, c, h, w, bias, noise, s);
    EXPECT_LT(relative_l2(got, want), t == DType::F32 ? 1e-6 : 2e-3) << dtype_name(t);
    float most = 0;
    for (float v : got) most = std::max(most, std::fabs(v));
    EXPECT_LE(most, 256.f);
  }
  const std::vector<float> styles = random_vector(size_t(n) * c, rng);
  DeviceBuffer styles_d(styles, DType::F32);
  DeviceBuffer x_d(nchw_to_nhwc(x, d), DType::F32);
  DeviceBuffer scaled_d(x.size(), DType::F32);  // out of place: x stays
  launch_channel_scale(x_d.get(), scaled_d.get(), d, DType::F32,
                       static_cast<const float*>(styles_d.get()), nullptr);
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> scaled = nhwc_to_nchw(scaled_d.download(), d);
  EXPECT_EQ(nhwc_to_nchw(x_d.download(), d), x);
  for (int ni = 0; ni < n; ++ni)
    for (int ci = 0; ci < c; ++ci)
      for (int p = 0; p < h * w; ++p) {
        const size_t i = (size_t(ni) * c + ci) * h * w + p;
        EXPECT_EQ(scaled[i], x[i] * styles[size_t(ni) * c + ci]);
      }
  const std::vector<float> wt = random_vector(size_t(k) * c * r * r, rng);
  std::vector<float> wsq(size_t(k) * c, 0.f);
  for (int ki = 0; ki < k; ++ki)
    for (int ci = 0; ci < c; ++ci)
      for (int q = 0; q < r * r; ++q) {
        const float v = wt[(size_t(ki) * c + ci) * r * r + q];
        wsq[size_t(ki) * c + ci] += v * v;
      }
  DeviceBuffer wsq_d(wsq, DType::F32), dem_d(size_t(n) * k, DType::F32);
  launch_demod(static_cast<const float*>(styles_d.get()), static_cast<const float*>(wsq_d.get()), n,
               c, k, static_cast<float*>(dem_d.get()), nullptr);
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_LT(relative_l2(dem_d.download(), demod_reference(wt, k, c, r, r, styles, n)), 1e-6);
}

// Mode video's frame conversion: uint8 HWC frames into the NHWC input as x / 255, equal to the
// host's float division rounded to the storage type, for every byte value.
TEST(GpuKernels, FramesToInputIsXOver255InTheStorageType) {
  const Dims d{2, 3, 16, 24};  // 2 frames of 16 x 24, RGB
  const size_t n = size_t(d.numel());
  std::vector<uint8_t> frames(n);
  for (size_t i = 0; i < n; ++i) frames[i] = uint8_t((i * 37 + i / 7) % 256);
  uint8_t* dev = nullptr;
  CNN_CHECK_CUDA(cudaMalloc(&dev, n));
  CNN_CHECK_CUDA(cudaMemcpy(dev, frames.data(), n, cudaMemcpyHostToDevice));
  for (const DType t : {DType::F32, DType::F16, DType::BF16}) {
    DeviceBuffer out(n, t);
    frames_to_input(dev, d, t, out.get(), nullptr);
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = float(frames[i]) / 255.f;
    EXPECT_EQ(out.download(), from_storage(to_storage(want, t), t)) << dtype_name(t);
  }
  cudaFree(dev);
}

// YOLO's decode on the GPU against the host reference (kernels/detect.h), for YOLOR-CSP-X's three
// heads written into one output at their row offsets, two images, every storage type (the host
// decodes the values as the device holds them).
TEST(GpuKernels, YoloDecodeMatchesTheHostReference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  const int batch = 2, classes = 80, no = 5 + classes;
  const std::vector<YoloHead> heads = yolor_heads();
  const int grid[3][2] = {{4, 6}, {2, 3}, {1, 2}};  // (ny, nx) per head
  int64_t rows = 0;
  for (const auto& g : grid) rows += 3 * int64_t(g[0]) * g[1];
  for (const DType t : {DType::F32, DType::F16, DType::BF16}) {
    DeviceBuffer out(size_t(batch * rows * no), DType::F32);
    std::vector<std::vector<float>> want(batch);
    int64_t offset = 0;
    std::vector<std::unique_ptr<DeviceBuffer>> raws;
    for (int h = 0; h < 3; ++h) {
      const int ny = grid[h][0], nx = grid[h][1];
      const size_t per_image = size_t(ny) * nx * 3 * no;
      std::vector<float> raw(batch * per_image);
      for (float& v : raw) v = u(rng);
      raws.push_back(std::make_unique<DeviceBuffer>(raw, t));
      const std::vector<float> held = raws.back()->download();  // as rounded to t
      for (int n = 0; n < batch; ++n)
        yolo_decode_reference(held.data() + n * per_image, ny, nx, heads[h], classes, want[n]);
      launch_yolo_decode(raws.back()->get(), t, batch, ny, nx, heads[h], classes, offset, rows,
                         static_cast<float*>(out.get()), nullptr);
      offset += 3 * int64_t(ny) * nx;
    }
    const std::vector<float> got = out.download();
    double worst = 0;
    for (int n = 0; n < batch; ++n) {
      ASSERT_EQ(want[n].size(), size_t(rows * no));
      for (size_t i = 0; i < want[n].size(); ++i) {
        const double ref = want[n][i], g = got[size_t(n) * rows * no + i];
        worst = std::max(worst, std::fabs(g - ref) / std::max(1.0, std::fabs(ref)));
      }
    }
    EXPECT_LT(worst, 2e-5) << dtype_name(t);
  }
}

// Confidence filtering and class-aware NMS on the GPU give nms_reference's detections bit for bit:
// three images of boxes clustered so that they overlap, several classes, scores that tie, an
// image with no candidate; then too small a capacity is reported, not silently cut.
TEST(GpuKernels, YoloNmsEqualsTheHostReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  const int batch = 3, classes = 4, no = 5 + classes;
  const int64_t rows = 600;
  std::vector<float> host(size_t(batch * rows * no));
  for (int n = 0; n < batch; ++n)
    for (int64_t r = 0; r < rows; ++r) {
      float* p = &host[size_t((n * rows + r) * no)];
      const int cluster = int(r % 12);
      p[0] = 50.f * cluster + 8.f * u(rng), p[1] = 40.f * (cluster % 5) + 8.f * u(rng);
      p[2] = 30.f + 20.f * u(rng), p[3] = 30.f + 20.f * u(rng);
      p[4] = n == 2 ? 0.1f : u(rng);  // image 2: no row passes the objectness threshold
      for (int c = 0; c < classes; ++c) p[5 + c] = u(rng);
      if (n < 2 && r % 7 == 0) p[4] = 0.9f, p[5] = 0.5f;  // equal scores: order by row, class
    }
  DeviceBuffer rows_d(host, DType::F32);
  NmsOptions o;
  o.max_det = 40;
  for (const int capacity : {int(rows * classes), 8}) {
    const YoloNmsPlan plan = plan_yolo_nms(batch, rows, classes, capacity);
    void* ws = nullptr;
    Detection* out = nullptr;
    int *count = nullptr, *overflow = nullptr;
    CNN_CHECK_CUDA(cudaMalloc(&ws, plan.workspace_bytes));
    CNN_CHECK_CUDA(cudaMalloc(&out, sizeof(Detection) * batch * o.max_det));
    CNN_CHECK_CUDA(cudaMalloc(&count, sizeof(int) * (batch + 1)));
    overflow = count + batch;
    launch_yolo_nms(plan, static_cast<const float*>(rows_d.get()), o, ws, out, count, overflow,
                    nullptr);
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<Detection> got(size_t(batch) * o.max_det);
    std::vector<int> counts(batch + 1);
    CNN_CHECK_CUDA(
        cudaMemcpy(got.data(), out, sizeof(Detection) * got.size(), cudaMemcpyDeviceToHost));
    CNN_CHECK_CUDA(
        cudaMemcpy(counts.data(), count, sizeof(int) * counts.size(), cudaMemcpyDeviceToHost));
    cudaFree(ws), cudaFree(out), cudaFree(count);
    if (capacity == 8) {
      EXPECT_GT(counts[batch], 8) << "an image with more candidates than the capacity";
      continue;
    }
    EXPECT_EQ(counts[batch], 0) << "overflow";
    for (int n = 0; n < batch; ++n) {
      const std::vector<float> img(host.begin() + n * rows * no,
                                   host.begin() + (n + 1) * rows * no);
      const std::vector<Detection> want = nms_reference(img, classes, o);
      ASSERT_EQ(counts[n], int(want.size())) << "image " << n;
      if (n < 2) EXPECT_GT(want.size(), 5u) << "image " << n << ": too few kept to tell";
      for (size_t i = 0; i < want.size(); ++i) {
        const Detection& g = got[size_t(n) * o.max_det + i];
        EXPECT_EQ(g.cls, want[i].cls) << "image " << n << " detection " << i;
        EXPECT_EQ(g.score, want[i].score) << "image " << n << " detection " << i;
        EXPECT_EQ(g.x1, want[i].x1);
        EXPECT_EQ(g.y1, want[i].y1);
        EXPECT_EQ(g.x2, want[i].x2);
        EXPECT_EQ(g.y2, want[i].y2);
      }
    }
  }
}

// Nearest upsampling copies each input pixel to its factor x factor block, into a slice of a
// wider (concat) buffer whose other channels it leaves alone; every type, factors 2 and 3.
TEST(GpuKernels, UpsampleNearestIntoASlice) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  const Dims d{2, 6, 5, 7};
  const int ld_y = 10, offset = 3;
  for (const DType t : {DType::F32, DType::F16, DType::BF16})
    for (const int f : {2, 3}) {
      std::vector<float> xs(size_t(d.numel()));
      for (float& v : xs) v = u(rng);
      DeviceBuffer x(xs, t);
      const std::vector<float> held = x.download();
      const int64_t oh = d.h * f, ow = d.w * f, rows = d.n * oh * ow;
      DeviceBuffer y(size_t(rows * ld_y), t);  // NaN everywhere
      launch_upsample_nearest(t, x.get(), d, f, 0,
                              static_cast<char*>(y.get()) + offset * dtype_size(t), ld_y, nullptr);
      int untouched_not_nan = 0;
      const std::vector<float> got =
          slice_of(y.download(), rows, ld_y, offset, d.c, &untouched_not_nan);
      EXPECT_EQ(untouched_not_nan, 0) << "wrote outside its slice";
      int wrong = 0;
      for (int n = 0; n < d.n; ++n)
        for (int h = 0; h < oh; ++h)
          for (int w = 0; w < ow; ++w)
            for (int c = 0; c < d.c; ++c) {
              const float want = held[((size_t(n) * d.h + h / f) * d.w + w / f) * d.c + c];
              wrong += got[((size_t(n) * oh + h) * ow + w) * d.c + c] != want;
            }
      EXPECT_EQ(wrong, 0) << dtype_name(t) << " factor " << f;
    }
}

// StyleGAN3's filtered_lrelu as separable passes (the demodulation and bias in the first, the
// lrelu in the up-sampling's second, out_scale in the last) against the host reference, for the
// geometries of the -T generator's layers: x2 then /2, x4 then /2 (the rate doubles), the
// critically sampled x2 /2 with a crop, and ToRGB's elementwise pass.
TEST(GpuKernels, FilteredLreluMatchesTheHostReference) {
  std::mt19937 rng(41);
  const int n = 2, c = 5, h = 9, w = 8;
  const std::vector<float> x = random_vector(size_t(n) * c * h * w, rng);
  const std::vector<float> bias = random_vector(size_t(c), rng);
  std::vector<float> pre = random_vector(size_t(n) * c, rng);
  for (float& v : pre) v = 0.5f + std::fabs(v);
  struct Case {
    FilteredLreluSpec s;
    int up_taps, down_taps;
    double cutoff, width, fs;
  };
  std::vector<Case> cases;
  auto add = [&](int up, int down, int ut, int dt, int p0, int p1, float clamp, float scale) {
    Case k{};
    k.s.up = up, k.s.down = down;
    k.s.pad_x0 = p0, k.s.pad_x1 = p1, k.s.pad_y0 = p0 + 1, k.s.pad_y1 = p1 - 1;
    k.s.clamp = clamp, k.s.out_scale = scale;
    k.up_taps = ut, k.down_taps = dt;
    k.cutoff = 2, k.width = 3, k.fs = 16;
    cases.push_back(k);
  };
  add(2, 2, 12, 12, 11, 10, 0.f, 1.f);
  add(4, 2, 24, 12, 21, 20, 1.5f, 1.f);   // a clamp the activations reach
  add(2, 2, 12, 12, -3, 15, 0.f, 0.25f);  // a crop on one side
  Case rgb{};
  rgb.s.slope = 1.f, rgb.s.gain = 1.f, rgb.s.clamp = 1.f, rgb.s.out_scale = 0.25f;
  rgb.up_taps = rgb.down_taps = 1;
  cases.push_back(rgb);
  for (const Case& k : cases)
    for (const DType t : {DType::F32, DType::F16}) {
      const std::vector<double> fu64 = design_lowpass_filter(k.up_taps, k.cutoff, k.width, k.fs);
      const std::vector<double> fd64 = design_lowpass_filter(k.down_taps, k.cutoff, k.width, k.fs);
      const std::vector<float> fu(fu64.begin(), fu64.end()), fd(fd64.begin(), fd64.end());
      const Dims in{n, c, h, w};
      const std::vector<float> xr = from_storage(to_storage(x, t), t);
      std::vector<float> scaled = xr;  // the host applies the pre-scale itself
      for (size_t i = 0; i < scaled.size(); ++i) scaled[i] *= pre[i / (size_t(h) * w)];
      const std::vector<float> want =
          filtered_lrelu_reference(scaled, n, c, h, w, fu, fd, false, bias, k.s);
      const std::vector<Fir1dPass> passes = filtered_lrelu_passes(k.s, k.up_taps, k.down_taps);
      std::vector<std::unique_ptr<DeviceBuffer>> tmp;
      std::vector<void*> tmp_ptr;
      std::vector<const float*> taps;
      DeviceBuffer fu_d(fu.empty() ? std::vector<float>{1.f} : fu, DType::F32);
      DeviceBuffer fd_d(fd.empty() ? std::vector<float>{1.f} : fd, DType::F32);
      Dims d = in;
      for (size_t i = 0; i < passes.size(); ++i) {
        const Fir1dPass& p = passes[i];
        taps.push_back(p.taps == 1
                           ? nullptr
                           : static_cast<const float*>(p.down > 1 ? fd_d.get() : fu_d.get()));
        d = p.out_dims(d);
        tmp.push_back(std::make_unique<DeviceBuffer>(size_t(d.numel()), t));
        tmp_ptr.push_back(tmp.back()->get());
      }
      const int oh = k.s.out_h(h, k.up_taps, k.down_taps),
                ow = k.s.out_w(w, k.up_taps, k.down_taps);
      ASSERT_EQ(d.h, oh);
      ASSERT_EQ(d.w, ow);
      ASSERT_EQ(want.size(), size_t(n) * c * oh * ow);
      DeviceBuffer x_d(nchw_to_nhwc(xr, in), t), pre_d(pre, DType::F32), bias_d(bias, DType::F32);
      launch_filtered_lrelu(x_d.get(), in, t, passes, taps, static_cast<const float*>(pre_d.get()),
                            static_cast<const float*>(bias_d.get()), tmp_ptr, tmp.back()->get(),
                            nullptr);
      CNN_CHECK_CUDA(cudaDeviceSynchronize());
      const std::vector<float> got = nhwc_to_nchw(tmp.back()->download(), d);
      const double err = relative_l2(got, want);
      EXPECT_LT(err, t == DType::F32 ? 1e-5 : 5e-3) << dtype_name(t) << " up " << k.s.up << " down "
                                                    << k.s.down << " passes " << passes.size();
    }
}

// SynthesisInput's features: the affine's rotation and translation per image, the transformed
// frequencies and the sine grid (the mixing matrix sqrt(C) I, so the reference's mixing is the
// identity) against the host reference.
TEST(GpuKernels, FourierFeaturesMatchTheHostReference) {
  std::mt19937 rng(43);
  const int n = 3, c = 7, wdim = 16, size = 12;
  const double sr = 16, bw = 2;
  const std::vector<float> wv = random_vector(size_t(n) * wdim, rng);
  const std::vector<float> aw = random_vector(size_t(4) * wdim, rng);
  std::vector<float> ab = random_vector(4, rng);
  ab[0] += 1.f;
  std::vector<float> freqs = random_vector(size_t(c) * 2, rng);
  for (float& f : freqs) f *= 3.f;  // some beyond the band limit: amplitudes below 1
  const std::vector<float> phases = random_vector(size_t(c), rng);
  const float th = 0.3f;
  const std::vector<float> transform{std::cos(th), -std::sin(th), 0.2f, std::sin(th), std::cos(th),
                                     -0.1f,        0.f,           0.f,  1.f};
  std::vector<float> eye(size_t(c) * c, 0.f);
  for (int i = 0; i < c; ++i) eye[size_t(i) * c + i] = float(std::sqrt(double(c)));
  const float gain = float(1.0 / std::sqrt(double(wdim)));
  const std::vector<float> want = fourier_input_reference(wv, n, wdim, aw, ab, gain, transform,
                                                          freqs, phases, eye, c, size, sr, bw);
  DeviceBuffer w_d(wv, DType::F32), aw_d(aw, DType::F32), ab_d(ab, DType::F32),
      tr_d(transform, DType::F32), f_d(freqs, DType::F32), p_d(phases, DType::F32),
      t_d(size_t(n) * 4, DType::F32), fp_d(size_t(n) * c * 4, DType::F32);
  launch_affine(w_d.get(), DType::F32, n, wdim, static_cast<const float*>(aw_d.get()),
                static_cast<const float*>(ab_d.get()), gain, 1.f, 1.f, 4,
                static_cast<float*>(t_d.get()), nullptr);
  launch_fourier_prepare(static_cast<const float*>(t_d.get()),
                         static_cast<const float*>(tr_d.get()),
                         static_cast<const float*>(f_d.get()), static_cast<const float*>(p_d.get()),
                         n, c, float(sr), float(bw), static_cast<float*>(fp_d.get()), nullptr);
  const Dims d{n, c, size, size};
  for (const DType t : {DType::F32, DType::F16}) {
    DeviceBuffer y_d(size_t(d.numel()), t);
    launch_fourier_features(static_cast<const float*>(fp_d.get()), n, c, size, float(sr), t,
                            y_d.get(), nullptr);
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> got = nhwc_to_nchw(y_d.download(), d);
    EXPECT_LT(relative_l2(got, want), t == DType::F32 ? 1e-5 : 2e-3) << dtype_name(t);
  }
}
