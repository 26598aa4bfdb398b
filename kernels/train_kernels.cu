#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/check.h"
#include "kernels/activation.cuh"
#include "kernels/channel_kernels.cuh"
#include "kernels/convert.cuh"
#include "kernels/train_kernels.h"

namespace cnnbench {

using namespace ck;  // launch geometry, packed loads, the per-channel reductions

namespace {

// out[i] = f(a[i], b[i], c[i]) over n packed elements, V at a time (16-byte loads when the host
// found every pointer aligned), then the tail one by one. A null input reads as 0. out may alias
// any input.
template <typename T, int V, typename F>
__global__ void map_packed(T* out, const T* a, const T* b, const T* c, int64_t n, F f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = n / V;
  for (int64_t j = tid; j < packs; j += stride) {
    float va[V], vb[V], vc[V], r[V];
    load_pack<T, V>(a, j, va);
    load_pack<T, V>(b, j, vb);
    load_pack<T, V>(c, j, vc);
#pragma unroll
    for (int k = 0; k < V; ++k) r[k] = f(va[k], vb[k], vc[k]);
    store_pack<T, V>(out, j, r);
  }
  for (int64_t i = packs * V + tid; i < n; i += stride)
    store_f(out, i, f(load_or0(a, i), load_or0(b, i), load_or0(c, i)));
}

// The same over rows of `channels`, each tensor with its own channel stride.
template <typename T, typename F>
__global__ void map_rows(T* out, int ld_out, const T* a, int ld_a, const T* b, int ld_b, const T* c,
                         int ld_c, int64_t rows, int channels, F f) {
  const int ch = blockIdx.x * kTileC + threadIdx.x;
  if (ch >= channels) return;
  for (int64_t r = int64_t(blockIdx.y) * kTileR + threadIdx.y; r < rows;
       r += int64_t(gridDim.y) * kTileR)
    store_f(out, r * ld_out + ch,
            f(load_or0(a, r * ld_a + ch), load_or0(b, r * ld_b + ch), load_or0(c, r * ld_c + ch)));
}

// Runs f over the rows: map_packed (vectorised where aligned) when every tensor is packed.
template <typename T, typename F>
void launch_map(T* out, int ld_out, const T* a, int ld_a, const T* b, int ld_b, const T* c,
                int ld_c, int64_t rows, int channels, F f, cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return;
  const bool packed = ld_out == channels && (!a || ld_a == channels) && (!b || ld_b == channels) &&
                      (!c || ld_c == channels);
  if (packed) {
    constexpr int V = 16 / sizeof(T);
    const int64_t n = rows * channels;
    const bool vec =
        aligned16(out) && (!a || aligned16(a)) && (!b || aligned16(b)) && (!c || aligned16(c));
    if (vec)
      map_packed<T, V><<<blocks_for((n + V - 1) / V), kThreads, 0, stream>>>(out, a, b, c, n, f);
    else
      map_packed<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, c, n, f);
  } else {
    map_rows<T><<<row_grid(rows, channels), dim3(kTileC, kTileR), 0, stream>>>(
        out, ld_out, a, ld_a, b, ld_b, c, ld_c, rows, channels, f);
  }
  CNN_CHECK_LAUNCH();
}

// ---- Bias gradient and SE scale backward -------------------------------------------------------

template <typename T>
struct ColumnOf {  // dy[r, c]
  const T* dy;
  int ld;
  __device__ void operator()(int, int64_t r, int c, float (&v)[1]) const {
    v[0] = load_f(dy, r * ld + c);
  }
};

struct StoreSum {  // dst[segment * C + c] = sum
  float* dst;
  int C;
  __device__ void operator()(int seg, int c, const float (&s)[1]) const {
    dst[int64_t(seg) * C + c] = s[0];
  }
};

template <typename T>
struct ScaleGradTerms {  // dx = dy * gate on the way; sums dy * x
  const T *x, *dy;
  T* dx;
  const float* gate;
  int64_t hw;
  int C;
  bool accumulate;
  __device__ void operator()(int n, int64_t r, int c, float (&v)[1]) const {
    const int64_t i = (int64_t(n) * hw + r) * C + c;
    const float d = load_f(dy, i);
    float g = d * gate[int64_t(n) * C + c];
    if (accumulate) g += load_f(dx, i);
    store_f(dx, i, g);
    v[0] = d * load_f(x, i);
  }
};

// ---- Softmax cross-entropy ---------------------------------------------------------------------

constexpr int kXentWarps = 8;

// Merges (max, sum of exp(z - max)) pairs; a pair with no element is (-inf, 0).
__device__ __forceinline__ void lse_merge(float& m, float& s, float mb, float sb) {
  const float mm = fmaxf(m, mb);
  if (mm == -INFINITY) return;
  s = (m == -INFINITY ? 0.0f : s * expf(m - mm)) + (mb == -INFINITY ? 0.0f : sb * expf(mb - mm));
  m = mm;
}

template <typename T>
__global__ void softmax_xent_kernel(const T* logits, const int* labels, int N, int classes,
                                    float weight, const float* loss_scale, float* loss, T* dlogits,
                                    float* row_loss, unsigned* counter) {
  __shared__ float red[kXentWarps * 32];
  __shared__ bool last;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.x * kXentWarps + warp;
  if (n < N) {
    const T* z = logits + int64_t(n) * classes;
    T* dz = dlogits + int64_t(n) * classes;
    float m = -INFINITY, s = 0.0f;
    for (int k = lane; k < classes; k += 32) lse_merge(m, s, load_f(z, k), 1.0f);
    for (int o = 16; o > 0; o /= 2) {
      const float mb = __shfl_xor_sync(0xffffffffu, m, o), sb = __shfl_xor_sync(0xffffffffu, s, o);
      lse_merge(m, s, mb, sb);
    }
    const float log_sum = m + logf(s);
    const int label = labels[n];
    const bool valid = label >= 0 && label < classes;
    const float coef = weight * (loss_scale ? *loss_scale : 1.0f) / float(N);
    for (int k = lane; k < classes; k += 32) {
      const float p = expf(load_f(z, k) - log_sum);
      store_f(dz, k, coef * (p - (k == label ? 1.0f : 0.0f)));
    }
    if (lane == 0) row_loss[n] = valid ? log_sum - load_f(z, label) : NAN;
  }
  // The last block to finish sums the rows' losses in a fixed order (no float atomics).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  float acc = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) acc += __ldcg(row_loss + i);
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *loss = weight * red[0] / float(N);
    *counter = 0;
  }
}

// ---- Elementwise functors ----------------------------------------------------------------------

struct ActGrad {  // (saved, dy, old dx)
  Act act;
  bool accumulate;
  __device__ float operator()(float s, float dy, float old) const {
    float d = dy;
    switch (act) {
      case Act::ReLU:
        d = s > 0.0f ? dy : 0.0f;
        break;
      case Act::Sigmoid:
        d = dy * s * (1.0f - s);
        break;
      case Act::SiLU: {
        const float sg = sigmoid_mufu(s);  // as the forward's (activate)
        d = dy * sg * (1.0f + s * (1.0f - sg));
        break;
      }
      default:
        break;
    }
    return accumulate ? old + d : d;
  }
};

struct Add {
  __device__ float operator()(float a, float b, float) const { return a + b; }
};

// ---- Pooling backward --------------------------------------------------------------------------

// The output rows (or columns) whose window holds input position i: [lo, hi].
__device__ __forceinline__ void windows_holding(int i, int k, int s, int p, int out, int& lo,
                                                int& hi) {
  const int a = i + p - k + 1;
  lo = a <= 0 ? 0 : (a + s - 1) / s;
  hi = min(out - 1, (i + p) / s);
}

// One thread per input element (NHWC, channels innermost: coalesced). Max: a window's gradient
// counts when this element is the window's first maximum in scan order (strictly greater
// replaces, as maxpool_backward_ref). Average: every window adds dy / its divisor.
template <typename T, bool kMax>
__global__ void pool_backward_kernel(const T* x, const T* dy, T* dx, Dims in, Dims out, int k,
                                     int s, int p, bool count_include_pad, int ld_x, int ld_y,
                                     bool accumulate) {
  const int64_t total = int64_t(in.n) * in.h * in.w * in.c;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int c = int(i % in.c);
    const int64_t row = i / in.c;
    const int w = int(row % in.w);
    const int h = int((row / in.w) % in.h);
    const int n = int(row / (int64_t(in.w) * in.h));
    const T* xn = x ? x + int64_t(n) * in.h * in.w * ld_x + c : nullptr;
    int oh0, oh1, ow0, ow1;
    windows_holding(h, k, s, p, out.h, oh0, oh1);
    windows_holding(w, k, s, p, out.w, ow0, ow1);
    float acc = 0.0f;
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const float g = load_f(dy, ((int64_t(n) * out.h + oh) * out.w + ow) * ld_y + c);
        const int h0 = oh * s - p, w0 = ow * s - p;
        if (kMax) {
          int best_h = -1, best_w = -1;
          float best = 0.0f;
          for (int r = 0; r < k; ++r) {
            const int ih = h0 + r;
            if (ih < 0 || ih >= in.h) continue;
            for (int q = 0; q < k; ++q) {
              const int iw = w0 + q;
              if (iw < 0 || iw >= in.w) continue;
              const float v = load_f(xn, (int64_t(ih) * in.w + iw) * ld_x);
              if (best_h < 0 || v > best) best = v, best_h = ih, best_w = iw;
            }
          }
          if (best_h == h && best_w == w) acc += g;
        } else {
          int count = k * k;
          if (!count_include_pad)
            count = (min(h0 + k, in.h) - max(h0, 0)) * (min(w0 + k, in.w) - max(w0, 0));
          acc += g / float(count);
        }
      }
    const int64_t at = row * ld_x + c;
    if (accumulate) acc += load_f(dx, at);
    store_f(dx, at, acc);
  }
}

// Max pooling's backward, vectorised (packed rows, the pack dividing C): a thread owns one pack of
// V channels of one input pixel and gathers, from every window holding it, dy where it is that
// window's first maximum (the scalar kernel's rule, per channel). No atomics, so it repeats bit for
// bit; the windows' inputs are re-read from L1/L2, not DRAM.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    maxpool_backward_vec(const T* x, const T* dy, T* dx, Dims in, Dims out, int k, int s, int p,
                         bool accumulate) {
  const int packs = in.c / V;
  const int64_t total = int64_t(in.n) * in.h * in.w * packs;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int pk = int(i % packs);
    const int64_t pix = i / packs;
    const int w = int(pix % in.w);
    const int64_t nh = pix / in.w;
    const int h = int(nh % in.h), n = int(nh / in.h);
    const int64_t image = int64_t(n) * in.h * in.w;
    int oh0, oh1, ow0, ow1;
    windows_holding(h, k, s, p, out.h, oh0, oh1);
    windows_holding(w, k, s, p, out.w, ow0, ow1);
    float acc[V];
#pragma unroll
    for (int c = 0; c < V; ++c) acc[c] = 0.0f;
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const int h0 = oh * s - p, w0 = ow * s - p;
        const int mine = (h - h0) * k + (w - w0);
        float best[V];
        int at[V];
#pragma unroll
        for (int c = 0; c < V; ++c) best[c] = 0.0f, at[c] = -1;
        for (int r = 0; r < k; ++r) {
          const int ih = h0 + r;
          if (ih < 0 || ih >= in.h) continue;
          for (int q = 0; q < k; ++q) {
            const int iw = w0 + q;
            if (iw < 0 || iw >= in.w) continue;
            float v[V];
            load_pack<T, V>(x, (image + int64_t(ih) * in.w + iw) * packs + pk, v);
#pragma unroll
            for (int c = 0; c < V; ++c)
              if (at[c] < 0 || v[c] > best[c]) best[c] = v[c], at[c] = r * k + q;
          }
        }
        float g[V];
        load_pack<T, V>(dy, ((int64_t(n) * out.h + oh) * out.w + ow) * packs + pk, g);
#pragma unroll
        for (int c = 0; c < V; ++c)
          if (at[c] == mine) acc[c] += g[c];
      }
    store_pack_acc<T, V>(dx, i, acc, accumulate);
  }
}

// ResNet's stem pool (kernel 3, stride 2, pad 1), backward, vectorised like maxpool_backward_vec
// but a thread per output window (oh, ow) and channel pack. It owns the input pixels (2oh + a,
// 2ow + b), a, b in {0, 1}: every input pixel has exactly one owner, and lies only in windows
// (oh + da, ow + db), da, db in {0, 1}. The thread finds those four windows' first maxima in one
// pass over their 5x5 input region, each input pack read once: 6.25 reads an input pixel, where
// maxpool_backward_vec reads about 20 (2.25 windows of 9). Each owned pixel then gathers its
// windows' gradients in maxpool_backward_vec's order (by oh, then ow), so the two kernels agree
// bit for bit. Host and device (maxpool_k3s2p1_backward_emulate runs it on the host).
// Registers: the windows' first-maximum places packed a byte each and the gradients loaded where
// taken took it from 103 to 70 (3 blocks of 256 an SM instead of 2; call 87 timed the 103 form at
// 1,220 us on ResNet-50's stem pool at 256 on an H100, 25% of its bound). R, the input packs read
// before any is compared: 5 (a row, five loads in flight) or 1 (a pack at a time, the loop kept
// rolled; CNNBENCH_MAXPOOL_ONE_LOAD=1, for the A/B). The same bits either way. Call 95 timed the
// per-channel form at 893 us (R = 5) and 1,066 us (R = 1). The form below, a word of channels at a
// time with the places a nibble a window: 80 registers in fp16 and bf16 and 72 in fp32 at R = 5
// (3 blocks of 256 an SM), 64 and 51 at R = 1; not yet timed.
#define CNN_HD __host__ __device__ __forceinline__

// A pack's 16 bytes as four 32-bit words (memcpy: the same on host and device, and free there).
template <typename T, int V>
CNN_HD void pack_words(const Pack<T, V>& p, uint32_t (&w)[4]) {
  static_assert(sizeof(p) == sizeof(w), "a pack is 16 bytes");
  memcpy(w, &p, sizeof w);
}
// a > b lane by lane on two words of stored values, without converting them: a lane's bits all
// set where it holds, clear elsewhere (NaN false either way, -0 not above +0), exactly the compare
// of their float values (each converts exactly). T: the stored type (a word is one fp32 lane, or
// two of fp16 or bf16, the lower channel in the low half). The 16-bit pairs are built from their
// raw bits (__half2 and __nv_bfloat162 are not trivially copyable, so no memcpy into them).
template <typename T>
CNN_HD uint32_t gt_mask(uint32_t a, uint32_t b);
template <>
CNN_HD uint32_t gt_mask<float>(uint32_t a, uint32_t b) {
  float fa, fb;
  memcpy(&fa, &a, 4), memcpy(&fb, &b, 4);
  return fa > fb ? 0xffffffffu : 0u;
}
template <typename Raw>
CNN_HD Raw raw_pair(uint32_t w) {
  Raw r;
  r.x = static_cast<unsigned short>(w & 0xffffu), r.y = static_cast<unsigned short>(w >> 16);
  return r;
}
template <>
CNN_HD uint32_t gt_mask<__half>(uint32_t a, uint32_t b) {
  return __hgt2_mask(__half2(raw_pair<__half2_raw>(a)), __half2(raw_pair<__half2_raw>(b)));
}
template <>
CNN_HD uint32_t gt_mask<__nv_bfloat16>(uint32_t a, uint32_t b) {
  return __hgt2_mask(__nv_bfloat162(raw_pair<__nv_bfloat162_raw>(a)),
                     __nv_bfloat162(raw_pair<__nv_bfloat162_raw>(b)));
}
// a's bits where m is set, b's elsewhere.
CNN_HD uint32_t bit_select(uint32_t m, uint32_t a, uint32_t b) {
  return (a & m) | (b & ~m);
}

// Thread i's output window of the stem pool and its channel pack (the pack fastest, then ow, oh,
// n), for the kernels below.
struct StemWindow {
  int packs, pk, ow, oh, n;
};
CNN_HD StemWindow stem_window(int64_t i, int V, const Dims& in, const Dims& out) {
  StemWindow w;
  w.packs = in.c / V;
  w.pk = int(i % w.packs);
  const int64_t win = i / w.packs;
  w.ow = int(win % out.w);
  const int64_t nh = win / out.w;
  w.oh = int(nh % out.h), w.n = int(nh / out.h);
  return w;
}

// The owner's gather, the second half of the stem pool's backward: the input pixels (2oh + a,
// 2ow + b) that window (oh, ow)'s thread owns each take the gradients of the windows whose first
// maximum they are, in maxpool_backward_vec's order (by oh, then ow), so every form agrees with it
// bit for bit. place(k, c): channel c's first-maximum place (0..8, row-major in the window) in
// window k = 2da + db, that is (oh + da, ow + db). The windows' gradients are loaded where an owned
// pixel takes one (from L1 after the first), not held for all four: fewer registers.
template <typename T, int V, typename Place>
CNN_HD void stem_pool_gather(const T* dy, T* dx, const Dims& in, const Dims& out,
                             const StemWindow& w, const Place& place, bool accumulate) {
  const int64_t image = int64_t(w.n) * in.h * in.w;
  for (int a = 0; a < 2; ++a) {
    const int ih = 2 * w.oh + a;
    if (ih >= in.h) continue;
    for (int b = 0; b < 2; ++b) {
      const int iw = 2 * w.ow + b;
      if (iw >= in.w) continue;
      float acc[V];
#pragma unroll
      for (int c = 0; c < V; ++c) acc[c] = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) {  // (oh, ow), (oh, ow + 1), (oh + 1, ow), (oh + 1, ow + 1)
        const int wh = w.oh + (k >> 1), ww = w.ow + (k & 1);
        if (wh >= out.h || ww >= out.w) continue;  // no such window
        // The pixel's place in window k, whose corner is (2wh - 1, 2ww - 1): row a + 1 - 2da,
        // column b + 1 - 2db (at most 2), or the pixel is not in it.
        const int lr = a + 1 - 2 * (k >> 1), lq = b + 1 - 2 * (k & 1);
        if (lr < 0 || lq < 0) continue;
        const uint32_t mine = uint32_t(lr * 3 + lq);
        bool takes = false;
#pragma unroll
        for (int c = 0; c < V; ++c) takes |= place(k, c) == mine;
        if (!takes) continue;
        float g[V];
        load_pack<T, V>(dy, ((int64_t(w.n) * out.h + wh) * out.w + ww) * w.packs + w.pk, g);
#pragma unroll
        for (int c = 0; c < V; ++c)
          if (place(k, c) == mine) acc[c] += g[c];
      }
      store_pack_acc<T, V>(dx, (image + int64_t(ih) * in.w + iw) * w.packs + w.pk, acc, accumulate);
    }
  }
}

template <typename T, int V, int R>
CNN_HD void maxpool_k3s2p1_backward_thread(const T* x, const T* dy, T* dx, const Dims& in,
                                           const Dims& out, int64_t i, bool accumulate) {
  static_assert(R >= 1 && R <= 5, "R: 1 to 5 input packs at once");
  const StemWindow sw = stem_window(i, V, in, out);
  const int packs = sw.packs, pk = sw.pk, ow = sw.ow, oh = sw.oh, n = sw.n;
  const int64_t image = int64_t(n) * in.h * in.w;
  const int h0 = 2 * oh - 1, w0 = 2 * ow - 1;  // the 5x5 region's corner; window (da, db) at
                                               // (h0 + 2da, w0 + 2db)
  // Each window's first maximum per channel, as the pack's four 32-bit words: the values as
  // stored (exact: a maximum is one of the inputs), and their places in the windows (0..8), a
  // nibble a window, in the same lanes (a 16-bit lane a channel in fp16 and bf16, a word in fp32).
  // A pack is taken in a word at a time: one compare gives the lanes' masks (gt_mask: __hgt2_mask
  // for two 16-bit channels), and selects of bits (bit_select: a LOP3) take the value and the
  // place where the mask is set, where the earlier form extracted, compared and replaced each
  // channel's byte-packed place apart (call 95: 893 us on ResNet-50's stem at 256, an H100, at
  // 35% of its traffic bound; by its instruction count it looked issue-bound). A window's first
  // valid pixel takes every lane (first[k]): the places are the same across channels until then.
  constexpr int kLanes = sizeof(T) == 2 ? 2 : 1;  // channels a word
  static_assert(sizeof(T) * V == 16 && kLanes * 4 == V, "a pack is four words of V / 4 channels");
  constexpr uint32_t kPlaceMul = kLanes == 2 ? 0x00010001u : 1u;  // a place in every lane
  uint32_t best[4][4], at[4] = {0, 0, 0, 0};  // at[w]: window k's places in nibble k of a lane
  bool first[4] = {true, true, true, true};
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int w = 0; w < 4; ++w) best[k][w] = 0;
  // R of a row's packs are read before any is taken in: with R = 5 five loads in flight a thread,
  // where one at a time (R = 1) each waited out its latency before the next was issued.
  for (int r = 0; r < 5; ++r) {
    const int ih = h0 + r;
    if (ih < 0 || ih >= in.h) continue;
#pragma unroll 1
    for (int q0 = 0; q0 < 5; q0 += R) {
      Pack<T, V> row[R];
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const int iw = w0 + q0 + u;
        if (q0 + u < 5 && iw >= 0 && iw < in.w)
          row[u] = read_pack<T, V>(x, (image + int64_t(ih) * in.w + iw) * packs + pk);
      }
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const int q = q0 + u, iw = w0 + q;
        if (q >= 5 || iw < 0 || iw >= in.w) continue;
        uint32_t xw[4];
        pack_words(row[u], xw);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          // Row-major over the region is row-major over each window: the first maximum in scan
          // order, strictly greater replacing, as maxpool_backward_ref.
          const int lr = r - 2 * (k >> 1), lq = q - 2 * (k & 1);
          if (lr < 0 || lr > 2 || lq < 0 || lq > 2) continue;
          const uint32_t here = (uint32_t(lr * 3 + lq) * kPlaceMul) << (4 * k);
          constexpr uint32_t kNibbles = 0xfu * kPlaceMul;
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            const uint32_t m = first[k] ? 0xffffffffu : gt_mask<T>(xw[w], best[k][w]);
            best[k][w] = bit_select(m, xw[w], best[k][w]);
            at[w] = bit_select(m & (kNibbles << (4 * k)), here, at[w]);
          }
          first[k] = false;
        }
      }
    }
  }
  // Channel c's place in window k (each window here has had a valid pixel: its own centre).
  const auto place = [&](int k, int c) {
    return kLanes == 2 ? (at[c >> 1] >> (16 * (c & 1) + 4 * k)) & 0xfu : (at[c] >> (4 * k)) & 0xfu;
  };
  stem_pool_gather<T, V>(dy, dx, in, out, sw, place, accumulate);
}

template <typename T, int V, int R>
__global__ void __launch_bounds__(kThreads)
    maxpool_k3s2p1_backward(const T* x, const T* dy, T* dx, Dims in, Dims out, bool accumulate) {
  const int64_t total = int64_t(out.n) * out.h * out.w * (in.c / V);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    maxpool_k3s2p1_backward_thread<T, V, R>(x, dy, dx, in, out, i, accumulate);
}

// ---- The stem pool with its places kept (training) ----------------------------------------------
// The forward of ResNet's stem pool writes, beside y, each window's first-maximum place per channel
// (0..8, row-major in the 3x3 window; a byte a channel, [window][channel] as y's elements), and
// the backward reads those places instead of x: PyTorch's max_pool2d_with_indices in spirit. The
// backward then streams dy, the places and dx (at ResNet-50's 256: 103 + 51 + 411 MB, against
// x's 411 MB read in 5x5 regions and dx's 411 MB; call 101's ncu timed that form at 958 us and 985
// GB/s, its reads 6.25 an input pixel through L1 and L2). The places are the reference's (the
// first maximum in scan order, strictly greater replacing, compared as stored; NaN never
// replaces); y is pool_vec's (fmaxf from -FLT_MAX), bit for bit, so the forward's output does not
// change. Host and device, like the backward above.
// A pack's places as one word: 8 bytes for V = 8 (fp16, bf16), 4 for V = 4 (fp32); pack j's at
// byte j * V, so the word's alignment is its size.
template <int V>
using PlaceWord = std::conditional_t<V == 8, unsigned long long, uint32_t>;
template <int V>
CNN_HD void store_places(uint8_t* p, int64_t j, PlaceWord<V> w) {
  static_assert(sizeof(PlaceWord<V>) == V, "a byte a channel");
#ifdef __CUDA_ARCH__
  reinterpret_cast<PlaceWord<V>*>(p)[j] = w;
#else
  memcpy(p + j * V, &w, V);  // little-endian: channel c's byte at c, as on the device
#endif
}
template <int V>
CNN_HD PlaceWord<V> load_places(const uint8_t* p, int64_t j) {
#ifdef __CUDA_ARCH__
  return reinterpret_cast<const PlaceWord<V>*>(p)[j];
#else
  PlaceWord<V> w;
  memcpy(&w, p + j * V, V);
  return w;
#endif
}

// What the pool reads at an input pixel: the pack as stored (PoolAsStored), or (BnReluPool) the
// BatchNorm + ReLU of the pack of the BatchNorm's input, computed as bn_apply_vec does and rounded
// to T as it stores it, so that the fused stem (launch_bn_relu_maxpool_forward_places) pools the
// same values without the activation ever being written.
struct PoolAsStored {
  template <typename T, int V>
  struct Bound {
    CNN_HD void operator()(Pack<T, V>&) const {}
  };
  template <typename T, int V>
  CNN_HD Bound<T, V> bind(int) const {
    return {};
  }
};
// The per-channel factors are read once a thread (bind, for its pack of V channels) and kept in
// registers for the window's nine pixels: call 140 measured the form that read them at every
// pixel at 506 us against the plain pool's 260 (ResNet-50's stem at 256, H100). The same
// arithmetic, so the same bits.
struct BnReluPool {
  const float *mean, *invstd, *gamma, *beta;
  template <typename T, int V>
  struct Bound {
    float mean[V], k[V], b[V];
    CNN_HD void operator()(Pack<T, V>& p) const {
#pragma unroll
      for (int c = 0; c < V; ++c) {
#ifdef __CUDA_ARCH__
        const float v = __fmaf_rn(load_f(p.v, c) - mean[c], k[c], b[c]);
#else
        const float v = std::fmaf(load_f(p.v, c) - mean[c], k[c], b[c]);
#endif
        store_f(p.v, c, activate(Act::ReLU, v));
      }
    }
  };
  template <typename T, int V>
  CNN_HD Bound<T, V> bind(int pk) const {
    Bound<T, V> f;
#pragma unroll
    for (int c = 0; c < V; ++c) {
      const int ch = pk * V + c;
      f.mean[c] = mean[ch];
      f.k[c] = invstd[ch] * (gamma ? gamma[ch] : 1.0f);
      f.b[c] = beta ? beta[ch] : 0.0f;
    }
    return f;
  }
};

template <typename T, int V, typename Pre = PoolAsStored>
CNN_HD void maxpool_k3s2p1_forward_places_thread(const T* x, T* y, uint8_t* places, const Dims& in,
                                                 const Dims& out, int64_t i, Pre pre = Pre{}) {
  const StemWindow sw = stem_window(i, V, in, out);
  const int packs = sw.packs, pk = sw.pk, ow = sw.ow, oh = sw.oh, n = sw.n;
  const int64_t image = int64_t(n) * in.h * in.w;
  const int h0 = 2 * oh - 1, w0 = 2 * ow - 1;
  const auto apply = pre.template bind<T, V>(pk);
  constexpr int kLanes = sizeof(T) == 2 ? 2 : 1;  // channels a word
  static_assert(sizeof(T) * V == 16 && kLanes * 4 == V, "a pack is four words of V / 4 channels");
  constexpr uint32_t kPlaceMul = kLanes == 2 ? 0x00010001u : 1u;  // a place in every lane
  uint32_t best[4] = {0, 0, 0, 0}, at[4] = {0, 0, 0, 0};
  float acc[V];
#pragma unroll
  for (int c = 0; c < V; ++c) acc[c] = -FLT_MAX;
  bool first = true;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const int ih = h0 + r;
    if (ih < 0 || ih >= in.h) continue;
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      const int iw = w0 + q;
      if (iw < 0 || iw >= in.w) continue;
      Pack<T, V> p = read_pack<T, V>(x, (image + int64_t(ih) * in.w + iw) * packs + pk);
      apply(p);
#pragma unroll
      for (int c = 0; c < V; ++c) acc[c] = fmaxf(acc[c], load_f(p.v, c));
      uint32_t xw[4];
      pack_words(p, xw);
      const uint32_t here = uint32_t(r * 3 + q) * kPlaceMul;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const uint32_t m = first ? 0xffffffffu : gt_mask<T>(xw[w], best[w]);
        best[w] = bit_select(m, xw[w], best[w]);
        at[w] = bit_select(m, here, at[w]);
      }
      first = false;
    }
  }
  store_pack<T, V>(y, i, acc);
  // The places a byte a channel, channel c at byte c of the pack's V (8 in fp16 and bf16, 4 in
  // fp32): one 8- or 4-byte store.
  PlaceWord<V> word = 0;
#pragma unroll
  for (int c = 0; c < V; ++c) {
    const uint32_t p = kLanes == 2 ? (at[c >> 1] >> (16 * (c & 1))) & 0xfu : at[c] & 0xfu;
    word |= PlaceWord<V>(p) << (8 * c);
  }
  store_places<V>(places, i, word);
}

// The backward from the places: a thread per output window (oh, ow) and channel pack owns the
// input pixels (2oh + a, 2ow + b), as maxpool_k3s2p1_backward does, and gathers its windows'
// gradients in the same order (by oh, then ow), so the two agree bit for bit.
template <typename T, int V>
CNN_HD void maxpool_k3s2p1_backward_places_thread(const uint8_t* places, const T* dy, T* dx,
                                                  const Dims& in, const Dims& out, int64_t i,
                                                  bool accumulate) {
  const StemWindow sw = stem_window(i, V, in, out);
  // The four windows' places (a window past the edge: none; 0xff never matches a pixel's 0..8).
  PlaceWord<V> pl[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int wh = sw.oh + (k >> 1), ww = sw.ow + (k & 1);
    pl[k] =
        wh < out.h && ww < out.w
            ? load_places<V>(places, ((int64_t(sw.n) * out.h + wh) * out.w + ww) * sw.packs + sw.pk)
            : ~PlaceWord<V>(0);
  }
  const auto place = [&](int k, int c) { return uint32_t(pl[k] >> (8 * c)) & 0xffu; };
  stem_pool_gather<T, V>(dy, dx, in, out, sw, place, accumulate);
}

template <typename T, int V, typename Pre = PoolAsStored>
__global__ void __launch_bounds__(kThreads)
    maxpool_k3s2p1_forward_places(const T* x, T* y, uint8_t* places, Dims in, Dims out,
                                  Pre pre = Pre{}) {
  const int64_t total = int64_t(out.n) * out.h * out.w * (in.c / V);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    maxpool_k3s2p1_forward_places_thread<T, V>(x, y, places, in, out, i, pre);
}

template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    maxpool_k3s2p1_backward_places(const uint8_t* places, const T* dy, T* dx, Dims in, Dims out,
                                   bool accumulate) {
  const int64_t total = int64_t(out.n) * out.h * out.w * (in.c / V);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    maxpool_k3s2p1_backward_places_thread<T, V>(places, dy, dx, in, out, i, accumulate);
}

#undef CNN_HD

// Global average pooling's backward, vectorised: dx[row, c] (= or +=) dy[image, c] / hw.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    global_avgpool_backward_vec(const T* dy, T* dx, int64_t rows, int C, int hw, bool accumulate) {
  const int packs = C / V;
  const int64_t total = rows * packs;
  const float inv = 1.0f / float(hw);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int pk = int(i % packs);
    const int64_t row = i / packs;
    float v[V];
    load_pack<T, V>(dy, (row / hw) * packs + pk, v);
#pragma unroll
    for (int c = 0; c < V; ++c) v[c] *= inv;
    store_pack_acc<T, V>(dx, i, v, accumulate);
  }
}

// Squeeze-excitation's scale, vectorised: y[n, hw, c] = x[n, hw, c] * gate[n, c].
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    scale_forward_vec(const T* x, const T* gate, T* y, int64_t total_packs, int64_t hw, int C) {
  const int packs = C / V;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total_packs; i += stride) {
    const int pk = int(i % packs);
    const int64_t n = i / packs / hw;
    float v[V], g[V];
    load_pack<T, V>(x, i, v);
    load_pack<T, V>(gate, n * packs + pk, g);
#pragma unroll
    for (int c = 0; c < V; ++c) v[c] *= g[c];
    store_pack<T, V>(y, i, v);
  }
}

template <typename T>
__global__ void global_avgpool_backward_kernel(const T* dy, T* dx, int64_t rows, int C, int hw,
                                               int ld_x, int ld_y, bool accumulate) {
  const int c = blockIdx.x * kTileC + threadIdx.x;
  if (c >= C) return;
  const float inv = 1.0f / float(hw);
  for (int64_t r = int64_t(blockIdx.y) * kTileR + threadIdx.y; r < rows;
       r += int64_t(gridDim.y) * kTileR) {
    float v = load_f(dy, (r / hw) * ld_y + c) * inv;
    if (accumulate) v += load_f(dx, r * ld_x + c);
    store_f(dx, r * ld_x + c, v);
  }
}

// ---- Dropout -----------------------------------------------------------------------------------

__host__ __device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// The key of a mask: the splitmix64 state its elements count up from.
__host__ __device__ __forceinline__ uint64_t dropout_key(uint64_t seed, uint64_t offset) {
  return mix64(seed ^ mix64(offset + kGolden));
}
__host__ __device__ __forceinline__ bool dropout_keep(uint64_t key, uint64_t i,
                                                      uint32_t threshold) {
  return uint32_t(mix64(key + (i + 1) * kGolden) >> 32) >= threshold;
}

uint32_t dropout_threshold(double p) {
  if (!(p >= 0.0 && p < 1.0))
    throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p));
  return uint32_t(std::min(p * 4294967296.0, 4294967295.0));
}

template <typename T>
__global__ void dropout_forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n, float scale,
                                       uint64_t seed, uint64_t offset,
                                       const uint64_t* device_offset, uint32_t threshold) {
  const uint64_t key = dropout_key(seed, offset + (device_offset ? *device_offset : 0ull));
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const bool keep = dropout_keep(key, uint64_t(i), threshold);
    mask[i] = keep ? 1 : 0;
    store_f(y, i, keep ? load_f(x, i) * scale : 0.0f);
  }
}

template <typename T>
__global__ void dropout_backward_kernel(const T* dy, T* dx, const uint8_t* mask, int64_t n,
                                        float scale, bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = mask[i] ? load_f(dy, i) * scale : 0.0f;
    if (accumulate) v += load_f(dx, i);
    store_f(dx, i, v);
  }
}

__global__ void counter_add_kernel(uint64_t* counter, uint64_t by) {
  *counter += by;
}

// ---- Mixed precision ---------------------------------------------------------------------------

constexpr int kMaxCheckBuffers = 96;  // per launch: the table travels as a kernel argument
struct CheckTable {
  const void* p[kMaxCheckBuffers];
  int64_t count[kMaxCheckBuffers];
  DType t[kMaxCheckBuffers];
};

template <typename T>
__device__ __forceinline__ bool all_finite(const T* p, int64_t n) {
  bool ok = true;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    ok &= isfinite(load_f(p, i));
  return ok;
}

// Grid (blocks, buffers): blockIdx.y picks the buffer.
__global__ void check_finite_kernel(CheckTable table, int* found_inf) {
  const int b = blockIdx.y;
  bool ok = true;
  switch (table.t[b]) {
    case DType::F32:
      ok = all_finite(static_cast<const float*>(table.p[b]), table.count[b]);
      break;
    case DType::F16:
      ok = all_finite(static_cast<const __half*>(table.p[b]), table.count[b]);
      break;
    case DType::BF16:
      ok = all_finite(static_cast<const __nv_bfloat16*>(table.p[b]), table.count[b]);
      break;
  }
  if (__any_sync(0xffffffffu, !ok) && threadIdx.x % 32 == 0) *found_inf = 1;
}

__global__ void loss_scale_update_kernel(LossScaleState* st, float growth, float backoff,
                                         int interval) {
  if (st->found_inf) {
    st->scale *= backoff;
    st->good_steps = 0;
    ++st->skipped_steps;
  } else if (++st->good_steps >= interval) {
    const float grown = st->scale * growth;
    if (isfinite(grown)) st->scale = grown;
    st->good_steps = 0;
  }
  st->found_inf = 0;
}

__global__ void step_advance_kernel(int* step, const int* found_inf) {
  if (!(found_inf && *found_inf)) ++*step;
}

// ---- Optimizers --------------------------------------------------------------------------------

struct SgdArgs {
  float lr, momentum, weight_decay, one_minus_dampening;  // the last computed in double
  bool nesterov;
};

__device__ __forceinline__ float inv_scale_of(const float* loss_scale) {
  return loss_scale ? 1.0f / *loss_scale : 1.0f;
}

// Element i of one tensor's SGD step: the per-tensor and the grouped kernels both run this.
template <typename G, typename C>
__device__ __forceinline__ void sgd_update(float* p, float* buf, const G* g, int64_t i,
                                           const SgdArgs& h, float inv, bool first, C* copy) {
  float w = p[i];
  float d = load_f(g, i) * inv + h.weight_decay * w;
  if (h.momentum != 0.0f) {
    const float b = first ? d : h.momentum * buf[i] + h.one_minus_dampening * d;
    buf[i] = b;
    d = h.nesterov ? d + h.momentum * b : b;
  }
  w -= h.lr * d;
  p[i] = w;
  if (copy) store_f(copy, i, w);
}

template <typename G, typename C>
__global__ void sgd_kernel(float* p, float* buf, const G* g, int64_t n, SgdArgs h, StepControl c,
                           C* copy) {
  if (c.found_inf && *c.found_inf) return;
  const float inv = inv_scale_of(c.loss_scale);
  const bool first = c.step && *c.step == 1;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    sgd_update(p, buf, g, i, h, inv, first, copy);
}

struct AdamArgs {
  double lr, beta1, beta2, eps, weight_decay;
  bool nan_to_num;
};

// Adam's per-step constants, from the step count on the device.
struct AdamStep {
  float inv, step_size, bc2_sqrt, b1, b2, eps, omb1, omb2, wd;
  bool nan_to_num;
};
__device__ __forceinline__ AdamStep adam_step_of(const AdamArgs& h, const StepControl& c) {
  AdamStep a;
  a.inv = inv_scale_of(c.loss_scale);
  const int t = *c.step;
  const double bc1 = 1.0 - pow(h.beta1, double(t)), bc2 = 1.0 - pow(h.beta2, double(t));
  a.step_size = float(h.lr / bc1), a.bc2_sqrt = float(sqrt(bc2));
  // 1 - beta in double, as torch computes it in Python before the fp32 kernel sees it: fp32's
  // 1 - float(0.999) is 1.3e-5 off.
  a.b1 = float(h.beta1), a.b2 = float(h.beta2), a.eps = float(h.eps);
  a.omb1 = float(1.0 - h.beta1), a.omb2 = float(1.0 - h.beta2);
  a.wd = float(h.weight_decay);
  a.nan_to_num = h.nan_to_num;
  return a;
}

// Element i of one tensor's Adam step: the per-tensor and the grouped kernels both run this.
template <typename G, typename C>
__device__ __forceinline__ void adam_update(float* p, float* m, float* v, const G* g, int64_t i,
                                            const AdamStep& a, C* copy) {
  float w = p[i];
  float gr = load_f(g, i) * a.inv;
  if (a.nan_to_num && !isfinite(gr)) gr = isnan(gr) ? 0.f : copysignf(1e5f, gr);
  const float gi = gr + a.wd * w;
  const float mi = a.b1 * m[i] + a.omb1 * gi;
  const float vi = a.b2 * v[i] + a.omb2 * gi * gi;
  m[i] = mi;
  v[i] = vi;
  w -= a.step_size * mi / (sqrtf(vi) / a.bc2_sqrt + a.eps);
  p[i] = w;
  if (copy) store_f(copy, i, w);
}

template <typename G, typename C>
__global__ void adam_kernel(float* p, float* m, float* v, const G* g, int64_t n, AdamArgs h,
                            StepControl c, C* copy) {
  if (c.found_inf && *c.found_inf) return;
  const AdamStep a = adam_step_of(h, c);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    adam_update(p, m, v, g, i, a, copy);
}

// The grouped steps: up to kOptTable tensors of one gradient type per launch, each given its own
// range of blocks (OptGroup's starts; opt_slot maps a block to its tensor), the table passed by
// value as the kernel's argument.
struct OptTable {
  float* p[kOptTable];
  float* m[kOptTable];
  float* v[kOptTable];
  const void* g[kOptTable];
  void* copy[kOptTable];
  int64_t n[kOptTable];
  int start[kOptTable + 1];
  int used;
};

template <typename G, typename C>
__global__ void sgd_group_kernel(OptTable t, SgdArgs h, StepControl c) {
  if (c.found_inf && *c.found_inf) return;
  const float inv = inv_scale_of(c.loss_scale);
  const bool first = c.step && *c.step == 1;
  const OptSlot s = opt_slot(t.start, t.used, int(blockIdx.x), int(threadIdx.x), int(blockDim.x));
  const int b = s.tensor;
  const G* g = static_cast<const G*>(t.g[b]);
  C* copy = static_cast<C*>(t.copy[b]);
  for (int64_t i = s.first; i < t.n[b]; i += s.stride)
    sgd_update(t.p[b], t.m[b], g, i, h, inv, first, copy);
}

template <typename G, typename C>
__global__ void adam_group_kernel(OptTable t, AdamArgs h, StepControl c) {
  if (c.found_inf && *c.found_inf) return;
  const AdamStep a = adam_step_of(h, c);
  const OptSlot s = opt_slot(t.start, t.used, int(blockIdx.x), int(threadIdx.x), int(blockDim.x));
  const int b = s.tensor;
  const G* g = static_cast<const G*>(t.g[b]);
  C* copy = static_cast<C*>(t.copy[b]);
  for (int64_t i = s.first; i < t.n[b]; i += s.stride)
    adam_update(t.p[b], t.m[b], t.v[b], g, i, a, copy);
}

// Calls the body with G the gradient's CUDA type and C the copy's.
#define CNN_DISPATCH_TWO(gt, ct, ...) \
  CNN_DISPATCH_DTYPE(gt, {            \
    using G = T;                      \
    CNN_DISPATCH_DTYPE(ct, {          \
      using C = T;                    \
      __VA_ARGS__;                    \
    });                               \
  })

}  // namespace

// ---- Launchers ---------------------------------------------------------------------------------

size_t xent_scratch_bytes(int batch) {
  return size_t(batch) * sizeof(float) + sizeof(unsigned);
}

void launch_softmax_xent(DType t, const void* logits, const int* labels, int batch, int classes,
                         double weight, const float* loss_scale, float* loss, void* dlogits,
                         void* scratch, cudaStream_t stream) {
  if (batch <= 0 || classes <= 0)
    throw std::invalid_argument("launch_softmax_xent: empty batch or no classes");
  float* row_loss = static_cast<float*>(scratch);
  unsigned* counter = reinterpret_cast<unsigned*>(row_loss + batch);
  const int blocks = (batch + kXentWarps - 1) / kXentWarps;
  CNN_DISPATCH_DTYPE(t, softmax_xent_kernel<T><<<blocks, kXentWarps * 32, 0, stream>>>(
                            static_cast<const T*>(logits), labels, batch, classes, float(weight),
                            loss_scale, loss, static_cast<T*>(dlogits), row_loss, counter));
  CNN_CHECK_LAUNCH();
}

void launch_act_backward(DType t, Act act, const void* saved, const void* dy, void* dx,
                         const GradLayout& l, bool accumulate, cudaStream_t stream) {
  const int C = l.channels;
  if (act != Act::None && !saved) throw std::invalid_argument("launch_act_backward: no saved");
  const ActGrad f{act, accumulate};
  CNN_DISPATCH_DTYPE(
      t, launch_map<T>(static_cast<T*>(dx), ld_or(l.ld_dx, C),
                       act == Act::None ? nullptr : static_cast<const T*>(saved),
                       ld_or(l.ld_saved, C), static_cast<const T*>(dy), ld_or(l.ld_dy, C),
                       accumulate ? static_cast<const T*>(dx) : nullptr, ld_or(l.ld_dx, C), l.rows,
                       C, f, stream));
}

void launch_grad_add(DType t, void* dst, int ld_dst, const void* src, int ld_src, int64_t rows,
                     int channels, cudaStream_t stream) {
  const int C = channels;
  CNN_DISPATCH_DTYPE(
      t, launch_map<T>(static_cast<T*>(dst), ld_or(ld_dst, C), static_cast<const T*>(dst),
                       ld_or(ld_dst, C), static_cast<const T*>(src), ld_or(ld_src, C), nullptr, C,
                       rows, C, Add{}, stream));
}

void launch_bias_backward(DType t, const void* dy, int ld_dy, float* db, int64_t rows, int channels,
                          void* scratch, cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return;
  CNN_DISPATCH_DTYPE(
      t, launch_channel_sums<1>(ColumnOf<T>{static_cast<const T*>(dy), ld_or(ld_dy, channels)},
                                StoreSum{db, channels}, rows, channels, 1, scratch, stream));
}

namespace {
// The pool maxpool_k3s2p1_backward takes: kernel 3, stride 2, pad 1, and the output size that
// gives (floor mode), so that the owners' 2x2 blocks cover the input exactly.
bool is_k3s2p1(const PoolSpec& s) {
  return s.kernel == 3 && s.stride == 2 && s.pad == 1 && s.y.h == (s.x.h - 1) / 2 + 1 &&
         s.y.w == (s.x.w - 1) / 2 + 1 && s.y.n == s.x.n && s.y.c == s.x.c;
}

// Calls f with the stem pool kernel's R as a std::integral_constant: 1 (a pack at a time) or 5
// (a row of five).
template <typename F>
void with_row_loads(bool one_load, F&& f) {
  if (one_load)
    f(std::integral_constant<int, 1>{});
  else
    f(std::integral_constant<int, 5>{});
}
}  // namespace

void maxpool_k3s2p1_backward_emulate(DType t, const void* x, const void* dy, void* dx,
                                     const PoolSpec& s, bool accumulate, bool one_load) {
  if (!is_k3s2p1(s))
    throw std::invalid_argument("maxpool_k3s2p1_backward_emulate: not a k3 s2 p1 pool");
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    if (s.x.c % V != 0)
      throw std::invalid_argument(
          "maxpool_k3s2p1_backward_emulate: channels not packs of 16 bytes");
    const int64_t total = int64_t(s.y.n) * s.y.h * s.y.w * (s.x.c / V);
    with_row_loads(one_load, [&](auto loads) {
      for (int64_t i = 0; i < total; ++i)
        maxpool_k3s2p1_backward_thread<T, V, decltype(loads)::value>(
            static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), s.x, s.y, i,
            accumulate);
    });
  });
}

void launch_maxpool_backward(DType t, const void* x, const void* dy, void* dx, const PoolSpec& s,
                             bool accumulate, cudaStream_t stream) {
  if (s.x.numel() <= 0) return;
  if (vectorisable(t, s.x.c, {ld_or(s.ld_x, s.x.c), ld_or(s.ld_y, s.y.c)}, {x, dy, dx})) {
    // CNNBENCH_MAXPOOL_GATHER=1: the general kernel here too, for an A/B on the device.
    static const bool gather_only = env_is_one("CNNBENCH_MAXPOOL_GATHER");
    // CNNBENCH_MAXPOOL_ONE_LOAD=1: the stem pool's input read a pack at a time (R = 1; as before
    // 2026-12-06 in that, though not in its registers), for the A/B of the row's five loads.
    static const bool one_load = env_is_one("CNNBENCH_MAXPOOL_ONE_LOAD");
    if (is_k3s2p1(s) && !gather_only) {
      CNN_DISPATCH_DTYPE(t, {
        constexpr int V = 16 / sizeof(T);
        with_row_loads(one_load, [&](auto loads) {
          maxpool_k3s2p1_backward<T, V, decltype(loads)::value>
              <<<blocks_for(s.y.numel() / V), kThreads, 0, stream>>>(
                  static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), s.x,
                  s.y, accumulate);
        });
      });
      CNN_CHECK_LAUNCH();
      return;
    }
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / sizeof(T);
      maxpool_backward_vec<T, V><<<blocks_for(s.x.numel() / V), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), s.x, s.y,
          s.kernel, s.stride, s.pad, accumulate);
    });
    CNN_CHECK_LAUNCH();
    return;
  }
  CNN_DISPATCH_DTYPE(
      t, pool_backward_kernel<T, true><<<blocks_for(s.x.numel()), kThreads, 0, stream>>>(
             static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), s.x, s.y,
             s.kernel, s.stride, s.pad, s.count_include_pad, ld_or(s.ld_x, s.x.c),
             ld_or(s.ld_y, s.y.c), accumulate));
  CNN_CHECK_LAUNCH();
}

bool maxpool_places_apply(DType t, const PoolSpec& s) {
  const int V = 16 / int(dtype_size(t));
  return is_k3s2p1(s) && s.x.c % V == 0 && ld_or(s.ld_x, s.x.c) == s.x.c &&
         ld_or(s.ld_y, s.y.c) == s.y.c;
}

size_t maxpool_places_bytes(const PoolSpec& s) {
  return size_t(s.y.numel());
}

namespace {
void check_places_spec(DType t, const PoolSpec& s, const char* who) {
  if (!maxpool_places_apply(t, s))
    throw std::invalid_argument(std::string(who) +
                                ": not a k3 s2 p1 pool over dense packs of 16 bytes");
}
}  // namespace

void maxpool_k3s2p1_forward_places_emulate(DType t, const void* x, void* y, uint8_t* places,
                                           const PoolSpec& s) {
  check_places_spec(t, s, "maxpool_k3s2p1_forward_places_emulate");
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    const int64_t total = s.y.numel() / V;
    for (int64_t i = 0; i < total; ++i)
      maxpool_k3s2p1_forward_places_thread<T, V>(static_cast<const T*>(x), static_cast<T*>(y),
                                                 places, s.x, s.y, i);
  });
}

void bn_relu_maxpool_k3s2p1_forward_places_emulate(DType t, const void* x, const float* mean,
                                                   const float* invstd, const float* gamma,
                                                   const float* beta, void* y, uint8_t* places,
                                                   const PoolSpec& s) {
  check_places_spec(t, s, "bn_relu_maxpool_k3s2p1_forward_places_emulate");
  const BnReluPool pre{mean, invstd, gamma, beta};
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    const int64_t total = s.y.numel() / V;
    for (int64_t i = 0; i < total; ++i)
      maxpool_k3s2p1_forward_places_thread<T, V>(static_cast<const T*>(x), static_cast<T*>(y),
                                                 places, s.x, s.y, i, pre);
  });
}

void maxpool_k3s2p1_backward_places_emulate(DType t, const uint8_t* places, const void* dy,
                                            void* dx, const PoolSpec& s, bool accumulate) {
  check_places_spec(t, s, "maxpool_k3s2p1_backward_places_emulate");
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    const int64_t total = s.y.numel() / V;
    for (int64_t i = 0; i < total; ++i)
      maxpool_k3s2p1_backward_places_thread<T, V>(places, static_cast<const T*>(dy),
                                                  static_cast<T*>(dx), s.x, s.y, i, accumulate);
  });
}

namespace {
void check_aligned(std::initializer_list<const void*> ptrs, const char* who) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw std::invalid_argument(std::string(who) + ": a buffer not 16-byte aligned");
}
}  // namespace

void launch_maxpool_forward_places(DType t, const void* x, void* y, uint8_t* places,
                                   const PoolSpec& s, cudaStream_t stream) {
  check_places_spec(t, s, "launch_maxpool_forward_places");
  check_aligned({x, y, places}, "launch_maxpool_forward_places");
  if (s.y.numel() <= 0) return;
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    maxpool_k3s2p1_forward_places<T, V><<<blocks_for(s.y.numel() / V), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), places, s.x, s.y);
  });
  CNN_CHECK_LAUNCH();
}

void launch_bn_relu_maxpool_forward_places(DType t, const void* x, const float* mean,
                                           const float* invstd, const float* gamma,
                                           const float* beta, void* y, uint8_t* places,
                                           const PoolSpec& s, cudaStream_t stream) {
  check_places_spec(t, s, "launch_bn_relu_maxpool_forward_places");
  check_aligned({x, y, places}, "launch_bn_relu_maxpool_forward_places");
  if (!mean || !invstd)
    throw std::invalid_argument("launch_bn_relu_maxpool_forward_places: no statistics");
  if (s.y.numel() <= 0) return;
  const BnReluPool pre{mean, invstd, gamma, beta};
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    maxpool_k3s2p1_forward_places<T, V, BnReluPool>
        <<<blocks_for(s.y.numel() / V), kThreads, 0, stream>>>(
            static_cast<const T*>(x), static_cast<T*>(y), places, s.x, s.y, pre);
  });
  CNN_CHECK_LAUNCH();
}

void launch_maxpool_backward_places(DType t, const uint8_t* places, const void* dy, void* dx,
                                    const PoolSpec& s, bool accumulate, cudaStream_t stream) {
  check_places_spec(t, s, "launch_maxpool_backward_places");
  check_aligned({places, dy, dx}, "launch_maxpool_backward_places");
  if (s.y.numel() <= 0) return;
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    maxpool_k3s2p1_backward_places<T, V><<<blocks_for(s.y.numel() / V), kThreads, 0, stream>>>(
        places, static_cast<const T*>(dy), static_cast<T*>(dx), s.x, s.y, accumulate);
  });
  CNN_CHECK_LAUNCH();
}

void launch_avgpool_backward(DType t, const void* dy, void* dx, const PoolSpec& s, bool accumulate,
                             cudaStream_t stream) {
  if (s.x.numel() <= 0) return;
  CNN_DISPATCH_DTYPE(
      t, pool_backward_kernel<T, false><<<blocks_for(s.x.numel()), kThreads, 0, stream>>>(
             nullptr, static_cast<const T*>(dy), static_cast<T*>(dx), s.x, s.y, s.kernel, s.stride,
             s.pad, s.count_include_pad, ld_or(s.ld_x, s.x.c), ld_or(s.ld_y, s.y.c), accumulate));
  CNN_CHECK_LAUNCH();
}

void launch_global_avgpool_backward(DType t, const void* dy, void* dx, const PoolSpec& s,
                                    bool accumulate, cudaStream_t stream) {
  const Dims d = s.x;
  const int64_t rows = int64_t(d.n) * d.h * d.w;
  if (rows <= 0 || d.c <= 0) return;
  if (vectorisable(t, d.c, {ld_or(s.ld_x, d.c), ld_or(s.ld_y, d.c)}, {dy, dx})) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / sizeof(T);
      global_avgpool_backward_vec<T, V><<<blocks_for(rows * d.c / V), kThreads, 0, stream>>>(
          static_cast<const T*>(dy), static_cast<T*>(dx), rows, d.c, d.h * d.w, accumulate);
    });
    CNN_CHECK_LAUNCH();
    return;
  }
  CNN_DISPATCH_DTYPE(t, global_avgpool_backward_kernel<T>
                     <<<row_grid(rows, d.c), dim3(kTileC, kTileR), 0, stream>>>(
                         static_cast<const T*>(dy), static_cast<T*>(dx), rows, d.c, d.h * d.w,
                         ld_or(s.ld_x, d.c), ld_or(s.ld_y, d.c), accumulate));
  CNN_CHECK_LAUNCH();
}

namespace {

// The scale backward's vectorised pass over packed rows: grid (column tiles, chunks, images), a
// block vx packs by vy row lanes (vec_geom). One thread's share: pack `pack` of image n, the rows
// r_begin, r_begin + step, ... below r_end of the image's hw: dx = dy * gate (+= with
// `accumulate`), and s += dy * x per channel. Host and device (the CPU tests run it).
template <typename T, int V>
__host__ __device__ __forceinline__ void scale_backward_rows(const T* x, const float* gate,
                                                             const T* dy, T* dx, int64_t hw, int C,
                                                             int n, int pack, int64_t r_begin,
                                                             int64_t r_end, int step,
                                                             bool accumulate, float (&s)[V]) {
  float g[V];
#pragma unroll
  for (int q = 0; q < V; ++q) g[q] = gate[int64_t(n) * C + int64_t(pack) * V + q];
  for (int64_t r = r_begin; r < r_end; r += step) {
    const int64_t row = int64_t(n) * hw + r;
    float d[V], xv[V];
    load_pack<T, V>(dy + row * C, pack, d);
    load_pack<T, V>(x + row * C, pack, xv);
#pragma unroll
    for (int q = 0; q < V; ++q) {
      s[q] += d[q] * xv[q];
      d[q] *= g[q];
    }
    store_pack_acc<T, V>(dx + row * C, pack, d, accumulate);
  }
}

// The geometry both the kernel and its host emulation use.
struct ScaleVecGeom {
  VecGeom g;
  int chunks = 1;
  int64_t rows_per = 1;
};
ScaleVecGeom scale_vec_geom(int64_t hw, int C, int N, int V) {
  ScaleVecGeom s;
  s.g = vec_geom(C, V);
  s.chunks = vec_chunks(hw, C, s.g, N);
  s.rows_per = (hw + s.chunks - 1) / s.chunks;
  return s;
}

// Partial sums to part[image][chunk][c] (channel_sums_finalize's layout for one value), the
// block's lanes merged by merge_lane_sums as in bn_grad_sums_vec.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    scale_backward_vec(const T* x, const float* gate, const T* dy, T* dx, int64_t hw, int C, int vx,
                       int vy, int64_t rows_per, bool accumulate, float* part) {
  __shared__ float sh[V * kThreads];
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  const bool active = pack * V < C;
  const int n = blockIdx.z;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per, r1 = min(hw, r0 + rows_per);
  float s[1][V];
#pragma unroll
  for (int q = 0; q < V; ++q) s[0][q] = 0.0f;
  if (active)
    scale_backward_rows<T, V>(x, gate, dy, dx, hw, C, n, pack, r0 + lane, r1, vy, accumulate, s[0]);
  merge_lane_sums<1, V>(s, sh, lane, vx, vy);
  if (lane != 0 || !active) return;
  const int64_t chunks = gridDim.y;
#pragma unroll
  for (int q = 0; q < V; ++q)
    part[(int64_t(n) * chunks + blockIdx.y) * C + int64_t(pack) * V + q] = s[0][q];
}

}  // namespace

void scale_backward_vec_emulate(DType t, const void* x, const float* gate, const void* dy, void* dx,
                                float* dgate, const Dims& d, bool accumulate) {
  const int64_t hw = int64_t(d.h) * d.w;
  const int C = d.c;
  if (!vectorisable(t, C, {}, {}))
    throw std::invalid_argument("scale_backward_vec_emulate: channels not packs of 16 bytes");
  CNN_DISPATCH_DTYPE(t, {
    constexpr int V = 16 / sizeof(T);
    const ScaleVecGeom sg = scale_vec_geom(hw, C, d.n, V);
    const VecGeom& g = sg.g;
    std::vector<float> part(size_t(d.n) * sg.chunks * C, 0.0f);
    std::vector<float> lanes(size_t(g.vy) * V);
    for (int n = 0; n < d.n; ++n)
      for (int chunk = 0; chunk < sg.chunks; ++chunk)
        for (int tile = 0; tile < g.tiles; ++tile)
          for (int col = 0; col < g.vx; ++col) {
            const int pack = tile * g.vx + col;
            if (pack * V >= C) continue;
            const int64_t r0 = int64_t(chunk) * sg.rows_per,
                          r1 = std::min<int64_t>(hw, r0 + sg.rows_per);
            for (int lane = 0; lane < g.vy; ++lane) {
              float s[V] = {};
              scale_backward_rows<T, V>(static_cast<const T*>(x), gate, static_cast<const T*>(dy),
                                        static_cast<T*>(dx), hw, C, n, pack, r0 + lane, r1, g.vy,
                                        accumulate, s);
              std::copy(s, s + V, lanes.begin() + int64_t(lane) * V);
            }
            for (int h = 1; h < g.vy; h *= 2)
              for (int lane = 0; lane + h < g.vy; lane += 2 * h)
                for (int q = 0; q < V; ++q)
                  lanes[size_t(lane) * V + q] += lanes[size_t(lane + h) * V + q];
            for (int q = 0; q < V; ++q)
              part[(size_t(n) * sg.chunks + chunk) * C + size_t(pack) * V + q] = lanes[size_t(q)];
          }
    for (int n = 0; n < d.n; ++n)
      for (int c = 0; c < C; ++c) {
        float sum = 0.0f;
        for (int chunk = 0; chunk < sg.chunks; ++chunk)
          sum += part[(size_t(n) * sg.chunks + chunk) * C + c];
        dgate[size_t(n) * C + c] = sum;
      }
  });
}

void launch_scale_backward(DType t, const void* x, const float* gate, const void* dy, void* dx,
                           float* dgate, const Dims& d, bool accumulate, void* scratch,
                           cudaStream_t stream) {
  const int64_t hw = int64_t(d.h) * d.w;
  if (d.n <= 0 || hw <= 0 || d.c <= 0) return;
  // CNNBENCH_SCALAR_SCALE=1: the per-element kernel here too, for an A/B on the device.
  static const bool scalar_only = env_is_one("CNNBENCH_SCALAR_SCALE");
  if (!scalar_only && vectorisable(t, d.c, {}, {x, dy, dx})) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / sizeof(T);
      const ScaleVecGeom sg = scale_vec_geom(hw, d.c, d.n, V);
      float* part = static_cast<float*>(scratch);
      scale_backward_vec<T, V><<<dim3(sg.g.tiles, sg.chunks, d.n), sg.g.vx * sg.g.vy, 0, stream>>>(
          static_cast<const T*>(x), gate, static_cast<const T*>(dy), static_cast<T*>(dx), hw, d.c,
          sg.g.vx, sg.g.vy, sg.rows_per, accumulate, part);
      CNN_CHECK_LAUNCH();
      with_fin_channels(d.c, d.n, [&](auto tc) {
        constexpr int TC = decltype(tc)::value;
        channel_sums_finalize<1, TC>
            <<<dim3(fin_tiles(d.c, TC), 1, d.n), dim3(TC, kFinThreads / TC), 0, stream>>>(
                part, d.c, sg.chunks, StoreSum{dgate, d.c});
      });
      CNN_CHECK_LAUNCH();
    });
    return;
  }
  CNN_DISPATCH_DTYPE(t, {
    const ScaleGradTerms<T> terms{static_cast<const T*>(x),
                                  static_cast<const T*>(dy),
                                  static_cast<T*>(dx),
                                  gate,
                                  hw,
                                  d.c,
                                  accumulate};
    launch_channel_sums<1>(terms, StoreSum{dgate, d.c}, hw, d.c, d.n, scratch, stream);
  });
}

namespace {

template <typename T>
__global__ void scale_forward_kernel(const T* x, const T* gate, T* y, int64_t total,
                                     int64_t per_image, int C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / per_image;
    const int c = int(i % C);
    store_f(y, i, load_f(x, i) * load_f(gate, n * C + c));
  }
}

template <typename From, typename To>
__global__ void convert_kernel(const From* src, To* dst, int64_t n, bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = load_f(src, i);
    store_f(dst, i, accumulate ? load_f(dst, i) + v : v);
  }
}

}  // namespace

void launch_scale_forward(DType t, const void* x, const void* gate, void* y, const Dims& d,
                          cudaStream_t stream) {
  const int64_t total = d.numel(), per_image = int64_t(d.h) * d.w * d.c;
  if (total <= 0) return;
  if (vectorisable(t, d.c, {}, {x, gate, y})) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / sizeof(T);
      scale_forward_vec<T, V><<<blocks_for(total / V), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(gate), static_cast<T*>(y), total / V,
          int64_t(d.h) * d.w, d.c);
    });
    CNN_CHECK_LAUNCH();
    return;
  }
  CNN_DISPATCH_DTYPE(t, scale_forward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
                            static_cast<const T*>(x), static_cast<const T*>(gate),
                            static_cast<T*>(y), total, per_image, d.c));
  CNN_CHECK_LAUNCH();
}

void launch_convert(DType from, const void* src, DType to, void* dst, int64_t n, bool accumulate,
                    cudaStream_t stream) {
  if (n <= 0) return;
  CNN_DISPATCH_DTYPE(from, {
    using From = T;
    CNN_DISPATCH_DTYPE(to, {
      convert_kernel<From, T><<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<const From*>(src), static_cast<T*>(dst), n, accumulate);
    });
  });
  CNN_CHECK_LAUNCH();
}

namespace {

template <typename T>
__global__ void repack_channels_kernel(const T* src, int src_c, T* dst, int dst_c, int64_t total,
                                       bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t r = i / dst_c;
    const int c = int(i % dst_c);
    float v = c < src_c ? load_f(src, r * src_c + c) : 0.0f;
    if (accumulate) v += load_f(dst, i);
    store_f(dst, i, v);
  }
}

}  // namespace

void launch_repack_channels(DType t, const void* src, int src_c, void* dst, int dst_c, int64_t rows,
                            bool accumulate, cudaStream_t stream) {
  const int64_t total = rows * dst_c;
  if (total <= 0) return;
  CNN_DISPATCH_DTYPE(
      t, repack_channels_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
             static_cast<const T*>(src), src_c, static_cast<T*>(dst), dst_c, total, accumulate));
  CNN_CHECK_LAUNCH();
}

namespace {

template <typename T>
__global__ void lrn_backward_kernel(const T* x, const T* dy, T* dx, int64_t total, int C, int size,
                                    float alpha_n, float beta, float k, bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / C;
    const int c = int(i % C);
    const T* xr = x + row * C;
    const T* dyr = dy + row * C;
    // S[m] = k + alpha / size * sum of x^2 over window(m) = [m - (size-1)/2, m + size/2].
    auto norm = [&](int m) {
      float sq = 0.0f;
      for (int j = max(0, m - (size - 1) / 2); j <= min(C - 1, m + size / 2); ++j) {
        const float v = load_f(xr, j);
        sq += v * v;
      }
      return k + alpha_n * sq;
    };
    // The windows holding channel c: m in [c - size/2, c + (size-1)/2].
    float sum = 0.0f;
    for (int m = max(0, c - size / 2); m <= min(C - 1, c + (size - 1) / 2); ++m)
      sum += load_f(dyr, m) * load_f(xr, m) * powf(norm(m), -beta - 1.0f);
    const float g =
        load_f(dyr, c) * powf(norm(c), -beta) - 2.0f * beta * alpha_n * load_f(xr, c) * sum;
    store_f(dx, i, accumulate ? load_f(dx, i) + g : g);
  }
}

}  // namespace

void launch_lrn_backward(DType t, const void* x, const void* dy, void* dx, const LrnSpec& s,
                         bool accumulate, cudaStream_t stream) {
  const int64_t total = s.x.numel();
  if (total <= 0) return;
  CNN_DISPATCH_DTYPE(
      t, lrn_backward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
             static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), total, s.x.c,
             s.size, float(s.alpha / s.size), float(s.beta), float(s.k), accumulate));
  CNN_CHECK_LAUNCH();
}

void launch_dropout_forward(DType t, const void* x, void* y, uint8_t* mask, int64_t n, double p,
                            const DropoutRng& rng, cudaStream_t stream) {
  const uint32_t threshold = dropout_threshold(p);
  if (n <= 0) return;
  const float scale = float(1.0 / (1.0 - p));
  CNN_DISPATCH_DTYPE(t, dropout_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
                            static_cast<const T*>(x), static_cast<T*>(y), mask, n, scale, rng.seed,
                            rng.offset, rng.device_offset, threshold));
  CNN_CHECK_LAUNCH();
}

void launch_dropout_backward(DType t, const void* dy, void* dx, const uint8_t* mask, int64_t n,
                             double p, bool accumulate, cudaStream_t stream) {
  dropout_threshold(p);  // validates p
  if (n <= 0) return;
  const float scale = float(1.0 / (1.0 - p));
  CNN_DISPATCH_DTYPE(
      t, dropout_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
             static_cast<const T*>(dy), static_cast<T*>(dx), mask, n, scale, accumulate));
  CNN_CHECK_LAUNCH();
}

std::vector<uint8_t> dropout_mask_host(uint64_t seed, uint64_t offset, int64_t n, double p) {
  const uint32_t threshold = dropout_threshold(p);
  const uint64_t key = dropout_key(seed, offset);
  std::vector<uint8_t> mask(size_t(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = dropout_keep(key, i, threshold) ? 1 : 0;
  return mask;
}

void launch_counter_add(uint64_t* counter, uint64_t by, cudaStream_t stream) {
  counter_add_kernel<<<1, 1, 0, stream>>>(counter, by);
  CNN_CHECK_LAUNCH();
}

void launch_check_finite(const std::vector<GradBuffer>& buffers, int* found_inf,
                         cudaStream_t stream) {
  for (size_t first = 0; first < buffers.size(); first += kMaxCheckBuffers) {
    CheckTable table{};
    int used = 0;
    int64_t largest = 0;
    for (size_t b = first; b < buffers.size() && used < kMaxCheckBuffers; ++b) {
      if (buffers[b].count <= 0) continue;
      table.p[used] = buffers[b].p;
      table.count[used] = buffers[b].count;
      table.t[used] = buffers[b].t;
      largest = std::max(largest, buffers[b].count);
      ++used;
    }
    if (used == 0) continue;
    const int bx = int(std::max<int64_t>(
        1, std::min<int64_t>((largest + 4 * kThreads - 1) / (4 * kThreads), 256)));
    check_finite_kernel<<<dim3(bx, used), kThreads, 0, stream>>>(table, found_inf);
    CNN_CHECK_LAUNCH();
  }
}

LossScaleState loss_scale_initial_state(float scale) {
  LossScaleState s;
  s.scale = scale;
  return s;
}

void launch_loss_scale_update(LossScaleState* state, const LossScaleParams& p,
                              cudaStream_t stream) {
  if (p.interval < 1) throw std::invalid_argument("launch_loss_scale_update: interval < 1");
  loss_scale_update_kernel<<<1, 1, 0, stream>>>(state, float(p.growth), float(p.backoff),
                                                p.interval);
  CNN_CHECK_LAUNCH();
}

void launch_step_advance(int* step, const int* found_inf, cudaStream_t stream) {
  step_advance_kernel<<<1, 1, 0, stream>>>(step, found_inf);
  CNN_CHECK_LAUNCH();
}

void launch_sgd_step(float* p, float* momentum_buffer, const void* g, DType gt, int64_t n,
                     const SgdRef& h, const StepControl& c, void* p_copy, DType copy_t,
                     cudaStream_t stream) {
  if (h.momentum != 0 && !momentum_buffer)
    throw std::invalid_argument("launch_sgd_step: momentum needs a momentum buffer");
  if (h.momentum != 0 && h.dampening != 0 && !c.step)
    throw std::invalid_argument("launch_sgd_step: dampening needs the step count");
  if (h.nesterov && (h.momentum <= 0 || h.dampening != 0))
    throw std::invalid_argument("launch_sgd_step: nesterov needs momentum and zero dampening");
  if (n <= 0) return;
  const SgdArgs a{float(h.lr), float(h.momentum), float(h.weight_decay), float(1.0 - h.dampening),
                  h.nesterov};
  CNN_DISPATCH_TWO(
      gt, copy_t,
      sgd_kernel<G, C><<<blocks_for(n), kThreads, 0, stream>>>(
          p, momentum_buffer, static_cast<const G*>(g), n, a, c, static_cast<C*>(p_copy)));
  CNN_CHECK_LAUNCH();
}

std::vector<OptGroup> opt_groups(const std::vector<OptTensor>& ts) {
  std::vector<OptGroup> out;
  for (DType gt : {DType::F32, DType::F16, DType::BF16}) {
    OptGroup cur;
    cur.gt = gt;
    cur.start.push_back(0);
    for (size_t k = 0; k < ts.size(); ++k) {
      if (ts[k].gt != gt || ts[k].n <= 0) continue;
      if (int(cur.tensors.size()) == kOptTable) {
        out.push_back(cur);
        cur.tensors.clear();
        cur.start.assign(1, 0);
      }
      const int64_t want =
          (ts[k].n + int64_t(kThreads) * kOptPerThread - 1) / (int64_t(kThreads) * kOptPerThread);
      cur.tensors.push_back(int(k));
      cur.start.push_back(cur.start.back() + int(std::min<int64_t>(want, kOptMaxBlocks)));
    }
    if (!cur.tensors.empty()) out.push_back(cur);
  }
  return out;
}

namespace {
OptTable opt_table(const std::vector<OptTensor>& ts, const OptGroup& grp) {
  OptTable t{};
  t.used = int(grp.tensors.size());
  for (int b = 0; b < t.used; ++b) {
    const OptTensor& o = ts[size_t(grp.tensors[size_t(b)])];
    t.p[b] = o.p, t.m[b] = o.m, t.v[b] = o.v, t.g[b] = o.g, t.copy[b] = o.copy, t.n[b] = o.n;
  }
  for (int b = 0; b <= t.used; ++b) t.start[b] = grp.start[size_t(b)];
  return t;
}
}  // namespace

void launch_sgd_steps(const std::vector<OptTensor>& ts, const SgdRef& h, const StepControl& c,
                      DType copy_t, cudaStream_t stream) {
  for (const OptTensor& o : ts) {
    if (h.momentum != 0 && !o.m)
      throw std::invalid_argument("launch_sgd_steps: momentum needs a momentum buffer");
  }
  if (h.momentum != 0 && h.dampening != 0 && !c.step)
    throw std::invalid_argument("launch_sgd_steps: dampening needs the step count");
  if (h.nesterov && (h.momentum <= 0 || h.dampening != 0))
    throw std::invalid_argument("launch_sgd_steps: nesterov needs momentum and zero dampening");
  const SgdArgs a{float(h.lr), float(h.momentum), float(h.weight_decay), float(1.0 - h.dampening),
                  h.nesterov};
  for (const OptGroup& grp : opt_groups(ts)) {
    const OptTable t = opt_table(ts, grp);
    CNN_DISPATCH_TWO(grp.gt, copy_t,
                     sgd_group_kernel<G, C><<<t.start[t.used], kThreads, 0, stream>>>(t, a, c));
    CNN_CHECK_LAUNCH();
  }
}

void launch_adam_steps(const std::vector<OptTensor>& ts, const AdamRef& h, const StepControl& c,
                       DType copy_t, cudaStream_t stream) {
  if (!c.step) throw std::invalid_argument("launch_adam_steps: Adam needs the step count");
  for (const OptTensor& o : ts)
    if (!o.m || !o.v) throw std::invalid_argument("launch_adam_steps: Adam needs m and v");
  const AdamArgs a{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.nan_to_num};
  for (const OptGroup& grp : opt_groups(ts)) {
    const OptTable t = opt_table(ts, grp);
    CNN_DISPATCH_TWO(grp.gt, copy_t,
                     adam_group_kernel<G, C><<<t.start[t.used], kThreads, 0, stream>>>(t, a, c));
    CNN_CHECK_LAUNCH();
  }
}

void launch_adam_step(float* p, float* m, float* v, const void* g, DType gt, int64_t n,
                      const AdamRef& h, const StepControl& c, void* p_copy, DType copy_t,
                      cudaStream_t stream) {
  if (!c.step) throw std::invalid_argument("launch_adam_step: Adam needs the step count");
  if (!m || !v) throw std::invalid_argument("launch_adam_step: Adam needs m and v");
  if (n <= 0) return;
  const AdamArgs a{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.nan_to_num};
  CNN_DISPATCH_TWO(gt, copy_t,
                   adam_kernel<G, C><<<blocks_for(n), kThreads, 0, stream>>>(
                       p, m, v, static_cast<const G*>(g), n, a, c, static_cast<C*>(p_copy)));
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
