#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/se.h"
#include "kernels/timing.h"

namespace cnnbench {

namespace {

// Two variants, timed against each other per layer under autotune (tune_se):
// one-block    se_pool_excite grid (at most 64, N): each block sums its rows per channel, one
//              thread per channel; the last block of an image adds the slots and runs both 1x1
//              convs; se_scale then scales. Few launches: what small layers want.
// split        two or three kernels, each sized for batch 1 as much as for large batches:
//   se_pool       grid (splits, N): each block sums one pixel range of one image per channel,
//                 with 16-byte loads, into its own slot of `partial` (no float atomics: the order
//                 is fixed, so results repeat bit for bit). The last block of an image to finish
//                 adds the slots in order into `pooled`, and where fc1's weights are small
//                 (kFusedFc1Floats) also runs fc1 + SiLU into `hidden`.
//   se_fc1        only where fc1 is larger: grid (squeeze / kFc1Rows, N), a warp per hidden unit,
//                 so that no single block reads megabytes of weights.
//   se_gate_apply grid (pixel ranges, channel slices, N): each block computes its kSlice
//                 channels' gates (fc2 + sigmoid, from `hidden`), then y = x * gate over its
//                 pixels. fc2's weights are read once per pixel range, never by one block alone.
constexpr int kThreads = 256;
constexpr int kWantBlocks = 264;            // two per SM of an H100 / H200
constexpr int64_t kMaxPartials = 32768;     // splits * C: what the last block adds up
constexpr int64_t kFusedFc1Floats = 65536;  // squeeze * C up to which the pool runs fc1
constexpr int kFc1Rows = kThreads / 32;     // hidden units per se_fc1 block, a warp each
constexpr int kSlice = 64;                  // channels per se_gate_apply block

struct SePlan {
  int v = 1;                               // channels per load (16 bytes, or 1)
  int splits = 1, ppb = 1;                 // pooling: pixel ranges per image, pixels per range
  int tx = 1, ty = 1;                      // pooling threads across channel packs, across pixels
  bool fused_fc1 = true;                   // fc1 in the pool's last block, else se_fc1
  int fc1_blocks = 0;                      // se_fc1 blocks per image
  int cslices = 1, psplits = 1, appb = 1;  // se_gate_apply: channel slices, pixel ranges, pixels
};

// Pooling splits depend on the shape alone, so the scratch size does not need the pointers.
int pool_splits(const SeSpec& s, int* ppb) {
  const int64_t hw = int64_t(s.x.h) * s.x.w, C = s.x.c;
  const int64_t want = (kWantBlocks + s.x.n - 1) / std::max(1, s.x.n);
  int64_t splits =
      std::min<int64_t>(want, std::max<int64_t>(1, kMaxPartials / std::max<int64_t>(1, C)));
  splits = std::max<int64_t>(1, std::min(splits, hw));
  const int64_t per = (hw + splits - 1) / splits;
  if (ppb) *ppb = int(per);
  return int((hw + per - 1) / per);
}

SePlan plan_for(const SeSpec& s, size_t elem, bool aligned) {
  SePlan p;
  const int64_t hw = int64_t(s.x.h) * s.x.w, C = s.x.c, sq = s.squeeze;
  const int vec = int(16 / elem);
  p.v = aligned && C % vec == 0 ? vec : 1;
  p.splits = pool_splits(s, &p.ppb);
  const int packs = int(C / p.v);
  p.tx = std::min(packs, kThreads);
  p.ty = std::max(1, kThreads / p.tx);
  p.fused_fc1 = sq * C <= kFusedFc1Floats;
  p.fc1_blocks = p.fused_fc1 ? 0 : int((sq + kFc1Rows - 1) / kFc1Rows);
  p.cslices = int((C + kSlice - 1) / kSlice);
  const int64_t per_img = std::max<int64_t>(1, int64_t(p.cslices) * s.x.n);
  int64_t ps = (kWantBlocks + per_img - 1) / per_img;
  // Each pixel range re-reads its slice of fc2 (kSlice x squeeze floats): keep that below the
  // slice's own activations, read and written.
  ps = std::min<int64_t>(ps, std::max<int64_t>(1, hw * int64_t(elem) / std::max<int64_t>(1, sq)));
  ps = std::max<int64_t>(1, std::min(ps, hw));
  p.appb = int((hw + ps - 1) / ps);
  p.psplits = int((hw + p.appb - 1) / p.appb);
  return p;
}

// Scratch: the per-image counters first, where both variants find them (each leaves them at
// zero), then the variant's own floats.
size_t up256(size_t b) {
  return (b + 255) / 256 * 256;
}
size_t counters_bytes(const SeSpec& s) {
  return up256(size_t(s.x.n) * sizeof(unsigned));
}

struct Layout {
  size_t partial, pooled, hidden, total;  // byte offsets into the scratch
};
Layout layout(const SeSpec& s) {
  const size_t n = size_t(s.x.n), C = size_t(s.x.c), sq = size_t(s.squeeze);
  Layout l;
  l.partial = counters_bytes(s);
  l.pooled = l.partial + up256(n * C * size_t(pool_splits(s, nullptr)) * sizeof(float));
  l.hidden = l.pooled + up256(n * C * sizeof(float));
  l.total = l.hidden + n * sq * sizeof(float);
  return l;
}

// The one-block variant: at most kMaxChunks blocks per image pool about 8K elements each, and
// the last one runs both 1x1 convs; a second kernel scales.
constexpr int kMaxChunks = 64;
int chunks_for(const SeSpec& s) {
  const int64_t hw = int64_t(s.x.h) * s.x.w;
  const int64_t per = hw * s.x.c;
  int64_t chunks = (per + 8191) / 8192;
  chunks = std::min<int64_t>(std::min<int64_t>(chunks, kMaxChunks), hw);
  return int(std::max<int64_t>(chunks, 1));
}
struct OneBlockLayout {
  size_t partial, scale, total;
};
OneBlockLayout one_block_layout(const SeSpec& s) {
  const size_t nc = size_t(s.x.n) * s.x.c;
  OneBlockLayout l;
  l.partial = counters_bytes(s);
  l.scale = l.partial + up256(nc * size_t(chunks_for(s)) * sizeof(float));
  l.total = l.scale + nc * sizeof(float);
  return l;
}

template <typename T, int V>
struct Pack;
template <>
struct Pack<float, 1> {
  static __device__ __forceinline__ void load(const float* p, float* v) { v[0] = p[0]; }
  static __device__ __forceinline__ void store(float* p, const float* v) { p[0] = v[0]; }
};
template <>
struct Pack<__half, 1> {
  static __device__ __forceinline__ void load(const __half* p, float* v) {
    v[0] = __half2float(p[0]);
  }
  static __device__ __forceinline__ void store(__half* p, const float* v) {
    p[0] = __float2half_rn(v[0]);
  }
};
template <>
struct Pack<__nv_bfloat16, 1> {
  static __device__ __forceinline__ void load(const __nv_bfloat16* p, float* v) {
    v[0] = __bfloat162float(p[0]);
  }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, const float* v) {
    p[0] = __float2bfloat16_rn(v[0]);
  }
};
template <>
struct Pack<float, 4> {
  static __device__ __forceinline__ void load(const float* p, float* v) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  }
  static __device__ __forceinline__ void store(float* p, const float* v) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
};
template <>
struct Pack<__half, 8> {
  static __device__ __forceinline__ void load(const __half* p, float* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&q);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  }
  static __device__ __forceinline__ void store(__half* p, const float* v) {
    uint4 q;
    __half2* h = reinterpret_cast<__half2*>(&q);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = q;
  }
};
template <>
struct Pack<__nv_bfloat16, 8> {
  static __device__ __forceinline__ void load(const __nv_bfloat16* p, float* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, const float* v) {
    uint4 q;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&q);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = q;
  }
};

// out(r, W[r, :] . v) for r < R: W is R x K row-major float in global memory, v K floats in
// shared memory. Groups of G lanes (a power of two up to 32, about K) share a row, striding over
// K; each group takes four rows at a time so that four independent loads are in flight.
template <typename Out>
__device__ __forceinline__ void matvec(const float* __restrict__ W, int R, int K, const float* v,
                                       Out out) {
  constexpr int kRows = 4;
  int G = 1;
  while (G < 32 && G < K) G *= 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int gl = lane & (G - 1), grp = lane / G;
  const int per_warp = (32 / G) * kRows;
  for (int base = warp * per_warp; base < R; base += warps * per_warp) {
    const int r0 = base + grp * kRows;
    float acc[kRows] = {};
    for (int k = gl; k < K; k += G) {
      const float xv = v[k];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (r0 + r < R) acc[r] += __ldg(W + int64_t(r0 + r) * K + k) * xv;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      for (int o = G / 2; o > 0; o /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
    if (gl == 0)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (r0 + r < R) out(r0 + r, acc[r]);
  }
}

struct SeArgs {
  int hw, C, squeeze, splits, ppb, tx, ty;
};

__device__ __forceinline__ float silu_f(float v) {
  return v / (1.0f + expf(-v));
}

// Pooling, and in the last block of each image the ordered sum of the slots (and fc1 where
// kFused). The last block resets its image's counter, so replays need no reset.
template <typename T, int V, bool kFused>
__global__ void __launch_bounds__(kThreads)
    se_pool(const T* x, SeArgs a, const float* w1, const float* b1, float* partial, float* pooled,
            float* hidden, unsigned* counters) {
  extern __shared__ float smem[];  // ty x (tx * V) partial sums; later C pooled values
  __shared__ bool last;
  const int n = blockIdx.y, split = blockIdx.x;
  const int lane = threadIdx.x % a.tx, row = threadIdx.x / a.tx;
  const bool active = row < a.ty;
  const int packs = a.C / V;
  const int64_t p0 = int64_t(split) * a.ppb;
  const int64_t p1 = min(int64_t(a.hw), p0 + a.ppb);
  const T* img = x + int64_t(n) * a.hw * a.C;
  float* slot = partial + (int64_t(n) * a.splits + split) * a.C;
  for (int base = 0; base < packs; base += a.tx) {  // uniform across the block
    const int cp = base + lane;
    float acc[V] = {};
    if (active && cp < packs) {
#pragma unroll 4
      for (int64_t p = p0 + row; p < p1; p += a.ty) {
        float v[V];
        Pack<T, V>::load(img + p * a.C + int64_t(cp) * V, v);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += v[k];
      }
    }
    if (a.ty == 1) {
      if (active && cp < packs)
#pragma unroll
        for (int k = 0; k < V; ++k) slot[cp * V + k] = acc[k];
      continue;
    }
    if (active)
#pragma unroll
      for (int k = 0; k < V; ++k) smem[(row * a.tx + lane) * V + k] = acc[k];
    __syncthreads();
    // Rows added in order by row 0's threads, one pack each.
    if (row == 0 && cp < packs) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float sum = 0.0f;
        for (int r = 0; r < a.ty; ++r) sum += smem[(r * a.tx + lane) * V + k];
        slot[cp * V + k] = sum;
      }
    }
    __syncthreads();
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&counters[n], 1u) == unsigned(a.splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float inv = 1.0f / float(a.hw);
  const float* mine = partial + int64_t(n) * a.splits * a.C;
  for (int c = threadIdx.x; c < a.C; c += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 4
    for (int k = 0; k < a.splits; ++k) acc += __ldcg(mine + int64_t(k) * a.C + c);
    smem[c] = acc * inv;
    pooled[int64_t(n) * a.C + c] = acc * inv;
  }
  if (threadIdx.x == 0) counters[n] = 0;
  if constexpr (kFused) {
    __syncthreads();
    float* h = hidden + int64_t(n) * a.squeeze;
    matvec(w1, a.squeeze, a.C, smem, [&](int j, float acc) { h[j] = silu_f(acc + b1[j]); });
  }
}

// fc1 + SiLU for kFc1Rows hidden units of one image, a warp each, lanes across channels.
__global__ void __launch_bounds__(kThreads)
    se_fc1(const float* pooled, SeArgs a, const float* w1, const float* b1, float* hidden) {
  extern __shared__ float pv[];  // the image's C pooled values
  const int n = blockIdx.y;
  const float* src = pooled + int64_t(n) * a.C;
  for (int c = threadIdx.x; c < a.C; c += blockDim.x) pv[c] = __ldcg(src + c);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j = blockIdx.x * kFc1Rows + warp;
  if (j >= a.squeeze) return;
  const float* w = w1 + int64_t(j) * a.C;
  float acc[4] = {};
  int c = lane;
  for (; c + 96 < a.C; c += 128) {
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] += __ldg(w + c + 32 * k) * pv[c + 32 * k];
  }
  for (; c < a.C; c += 32) acc[0] += __ldg(w + c) * pv[c];
  float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) hidden[int64_t(n) * a.squeeze + j] = silu_f(sum + b1[j]);
}

struct ApplyArgs {
  int hw, C, squeeze, appb;
};

// fc2 + sigmoid of image n for channels [c0, c0 + cs) into gate[], a warp per channel; `hs`
// (shared) receives the image's hidden values first. Ends with a barrier.
__device__ __forceinline__ void slice_gates(const float* hidden, const float* w2, const float* b2,
                                            int squeeze, int n, int c0, int cs, float* hs,
                                            float* gate) {
  const float* h = hidden + int64_t(n) * squeeze;
  for (int j = threadIdx.x; j < squeeze; j += blockDim.x) hs[j] = __ldcg(h + j);
  __syncthreads();
  const int warp = threadIdx.x / 32, wl = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int c = warp; c < cs; c += warps) {
    const float* w = w2 + int64_t(c0 + c) * squeeze;
    float acc = 0.0f;
    for (int j = wl; j < squeeze; j += 32) acc += __ldg(w + j) * hs[j];
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (wl == 0) gate[c] = 1.0f / (1.0f + expf(-(acc + b2[c0 + c])));
  }
  __syncthreads();
}

// The gates alone, for a gate folded into the next conv's weights: grid (channel slices, N).
__global__ void __launch_bounds__(kThreads)
    se_gate_out(const float* hidden, const float* w2, const float* b2, ApplyArgs a, float* out) {
  extern __shared__ float hs[];
  __shared__ float gate[kSlice];
  const int n = blockIdx.y, c0 = blockIdx.x * kSlice;
  const int cs = min(kSlice, a.C - c0);
  slice_gates(hidden, w2, b2, a.squeeze, n, c0, cs, hs, gate);
  for (int c = threadIdx.x; c < cs; c += blockDim.x) out[int64_t(n) * a.C + c0 + c] = gate[c];
}

// w_out[k][c] = w[k][c] * gate[c]: a 1x1 conv's weights [K][C] (KRSC with R = S = 1) with the
// gate of its input's channels folded in.
template <typename T>
__global__ void se_fold_kernel(const T* w, const float* gate, T* out, int64_t total, int C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    store_f(out, i, load_f(w, i) * gate[i % C]);
}

// fc2 + sigmoid for one slice of kSlice channels, then y = x * gate over one pixel range of one
// image. y may alias x: every element is read and written by the same thread.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    se_gate_apply(const T* x, T* y, const float* hidden, const float* w2, const float* b2,
                  ApplyArgs a) {
  extern __shared__ float hs[];  // the image's squeeze hidden values
  __shared__ float gate[kSlice];
  const int n = blockIdx.z, c0 = blockIdx.y * kSlice;
  const int cs = min(kSlice, a.C - c0);
  slice_gates(hidden, w2, b2, a.squeeze, n, c0, cs, hs, gate);
  constexpr int tx = kSlice / V, ty = kThreads / tx;
  const int lane = threadIdx.x % tx, row = threadIdx.x / tx;
  if (lane * V >= cs) return;
  float s[V];
#pragma unroll
  for (int k = 0; k < V; ++k) s[k] = gate[lane * V + k];
  const int64_t p0 = int64_t(blockIdx.x) * a.appb;
  const int64_t p1 = min(int64_t(a.hw), p0 + a.appb);
  const int64_t base = int64_t(n) * a.hw * a.C + c0 + lane * V;
#pragma unroll 4
  for (int64_t p = p0 + row; p < p1; p += ty) {
    const int64_t i = base + p * a.C;
    float v[V];
    Pack<T, V>::load(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] *= s[k];
    Pack<T, V>::store(y + i, v);
  }
}

void allow_smem(const void* f, size_t bytes) {
  if (bytes > 48 * 1024)
    CNN_CHECK_CUDA(
        cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// One-block variant. Grid (chunks, N). Each block sums its rows of image n per channel into its
// own slot of `partial`. The last block of an image to finish adds the slots in order, runs both
// 1x1 convs in shared memory and writes the image's scale; then it resets the image's counter.
template <typename T>
__global__ void se_pool_excite(const T* x, int hw, int C, int squeeze, int chunks, const float* w1,
                               const float* b1, const float* w2, const float* b2, float* partial,
                               float* scale, unsigned* counters) {
  extern __shared__ float smem[];  // C pooled values, then squeeze hidden values
  __shared__ bool last;
  const int n = blockIdx.y, chunk = blockIdx.x;
  const int rows_per = (hw + chunks - 1) / chunks;
  const int r0 = chunk * rows_per, r1 = min(hw, r0 + rows_per);
  const T* img = x + int64_t(n) * hw * C;
  float* slot = partial + (int64_t(n) * chunks + chunk) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int r = r0; r < r1; ++r) acc += load_f(img, int64_t(r) * C + c);
    slot[c] = acc;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&counters[n], 1u) == unsigned(chunks - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  float* pooled = smem;
  float* hidden = smem + C;
  const float inv = 1.0f / float(hw);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < chunks; ++k) acc += __ldcg(partial + (int64_t(n) * chunks + k) * C + c);
    pooled[c] = acc * inv;
  }
  __syncthreads();
  // fc1 + SiLU: one warp per hidden unit, lanes across channels.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int j = warp; j < squeeze; j += warps) {
    float acc = 0.0f;
    for (int c = lane; c < C; c += 32) acc += w1[int64_t(j) * C + c] * pooled[c];
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) hidden[j] = silu_f(acc + b1[j]);
  }
  __syncthreads();
  // fc2 + sigmoid: one thread per channel.
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = b2[c];
    for (int j = 0; j < squeeze; ++j) acc += w2[int64_t(c) * squeeze + j] * hidden[j];
    scale[int64_t(n) * C + c] = 1.0f / (1.0f + expf(-acc));
  }
  if (threadIdx.x == 0) counters[n] = 0;
}

template <typename T>
__global__ void se_scale(const T* x, T* y, const float* scale, int64_t total, int64_t per_image,
                         int C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / per_image;
    const int c = int(i % C);
    store_f(y, i, load_f(x, i) * scale[n * C + c]);
  }
}

template <typename T>
void se_one_block(const T* x, T* y, const float* w1, const float* b1, const float* w2,
                  const float* b2, const SeSpec& s, void* scratch, cudaStream_t stream) {
  const OneBlockLayout l = one_block_layout(s);
  char* base = static_cast<char*>(scratch);
  float* partial = reinterpret_cast<float*>(base + l.partial);
  float* scale = reinterpret_cast<float*>(base + l.scale);
  unsigned* counters = static_cast<unsigned*>(scratch);
  const int hw = s.x.h * s.x.w, C = s.x.c, chunks = chunks_for(s);
  const size_t smem = size_t(C + s.squeeze) * sizeof(float);
  allow_smem(reinterpret_cast<const void*>(se_pool_excite<T>), smem);
  se_pool_excite<T><<<dim3(chunks, s.x.n), kThreads, smem, stream>>>(
      x, hw, C, s.squeeze, chunks, w1, b1, w2, b2, partial, scale, counters);
  CNN_CHECK_LAUNCH();
  const int64_t total = s.x.numel(), per_image = int64_t(hw) * C;
  const int blocks =
      int(std::max<int64_t>(1, std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16)));
  se_scale<T><<<blocks, kThreads, 0, stream>>>(x, y, scale, total, per_image, C);
  CNN_CHECK_LAUNCH();
}

// The split variant; with gate_out, the gates are written there and nothing is scaled.
template <typename T, int V>
void se_typed(const T* x, T* y, const float* w1, const float* b1, const float* w2, const float* b2,
              const SeSpec& s, const SePlan& p, void* scratch, cudaStream_t stream,
              float* gate_out = nullptr) {
  const Layout l = layout(s);
  char* base = static_cast<char*>(scratch);
  float* partial = reinterpret_cast<float*>(base + l.partial);
  float* pooled = reinterpret_cast<float*>(base + l.pooled);
  float* hidden = reinterpret_cast<float*>(base + l.hidden);
  unsigned* counters = static_cast<unsigned*>(scratch);
  const SeArgs a{s.x.h * s.x.w, s.x.c, s.squeeze, p.splits, p.ppb, p.tx, p.ty};
  const size_t red = p.ty > 1 ? size_t(p.tx) * p.ty * V * sizeof(float) : 0;
  const size_t pool_smem = std::max(red, size_t(s.x.c) * sizeof(float));
  const dim3 pool_grid(p.splits, s.x.n);
  if (p.fused_fc1) {
    allow_smem(reinterpret_cast<const void*>(se_pool<T, V, true>), pool_smem);
    se_pool<T, V, true><<<pool_grid, kThreads, pool_smem, stream>>>(x, a, w1, b1, partial, pooled,
                                                                    hidden, counters);
    CNN_CHECK_LAUNCH();
  } else {
    allow_smem(reinterpret_cast<const void*>(se_pool<T, V, false>), pool_smem);
    se_pool<T, V, false><<<pool_grid, kThreads, pool_smem, stream>>>(x, a, w1, b1, partial, pooled,
                                                                     hidden, counters);
    CNN_CHECK_LAUNCH();
    const size_t fc1_smem = size_t(s.x.c) * sizeof(float);
    allow_smem(reinterpret_cast<const void*>(se_fc1), fc1_smem);
    se_fc1<<<dim3(p.fc1_blocks, s.x.n), kThreads, fc1_smem, stream>>>(pooled, a, w1, b1, hidden);
    CNN_CHECK_LAUNCH();
  }
  const ApplyArgs aa{s.x.h * s.x.w, s.x.c, s.squeeze, p.appb};
  const size_t hs = size_t(s.squeeze) * sizeof(float);
  if (gate_out) {
    allow_smem(reinterpret_cast<const void*>(se_gate_out), hs);
    se_gate_out<<<dim3(p.cslices, s.x.n), kThreads, hs, stream>>>(hidden, w2, b2, aa, gate_out);
    CNN_CHECK_LAUNCH();
    return;
  }
  allow_smem(reinterpret_cast<const void*>(se_gate_apply<T, V>), hs);
  se_gate_apply<T, V>
      <<<dim3(p.psplits, p.cslices, s.x.n), kThreads, hs, stream>>>(x, y, hidden, w2, b2, aa);
  CNN_CHECK_LAUNCH();
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

size_t se_scratch_bytes(const SeSpec& s) {
  return std::max(layout(s).total, one_block_layout(s).total);
}

const char* se_variant_name(SeVariant v) {
  return v == SeVariant::OneBlock ? "one-block" : "split";
}

std::string se_kernels(const SeSpec& s, SeVariant v) {
  if (v == SeVariant::OneBlock) return "pool+excite | scale";
  const SePlan p = plan_for(s, 2, true);
  return p.fused_fc1 ? "pool+fc1 | fc2+scale" : "pool | fc1 | fc2+scale";
}

SeVariant se_heuristic(const SeSpec& s) {
  const int64_t per_image = int64_t(s.x.h) * s.x.w * s.x.c;
  return per_image >= (int64_t(1) << 20) || int64_t(s.squeeze) * s.x.c > kFusedFc1Floats
             ? SeVariant::Split
             : SeVariant::OneBlock;
}

void launch_se(DType t, const void* x, void* y, const float* w1, const float* b1, const float* w2,
               const float* b2, const SeSpec& s, SeVariant v, void* scratch, cudaStream_t stream) {
  const bool aligned = aligned16(x) && aligned16(y);
  CNN_DISPATCH_DTYPE(t, {
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (v == SeVariant::OneBlock) {
      se_one_block<T>(xt, yt, w1, b1, w2, b2, s, scratch, stream);
    } else {
      const SePlan p = plan_for(s, sizeof(T), aligned);
      constexpr int kVec = int(16 / sizeof(T));
      if (p.v == kVec)
        se_typed<T, kVec>(xt, yt, w1, b1, w2, b2, s, p, scratch, stream);
      else
        se_typed<T, 1>(xt, yt, w1, b1, w2, b2, s, p, scratch, stream);
    }
  });
}

void launch_se_gate(DType t, const void* x, const float* w1, const float* b1, const float* w2,
                    const float* b2, const SeSpec& s, void* scratch, float* gate,
                    cudaStream_t stream) {
  const bool aligned = aligned16(x);
  CNN_DISPATCH_DTYPE(t, {
    const SePlan p = plan_for(s, sizeof(T), aligned);
    const T* xt = static_cast<const T*>(x);
    constexpr int kVec = int(16 / sizeof(T));
    if (p.v == kVec)
      se_typed<T, kVec>(xt, nullptr, w1, b1, w2, b2, s, p, scratch, stream, gate);
    else
      se_typed<T, 1>(xt, nullptr, w1, b1, w2, b2, s, p, scratch, stream, gate);
  });
}

void launch_se_fold(DType t, const void* w, const float* gate, void* w_out, int K, int C,
                    cudaStream_t stream) {
  const int64_t total = int64_t(K) * C;
  if (total <= 0) return;
  const int blocks = int(std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 8));
  CNN_DISPATCH_DTYPE(t, se_fold_kernel<T><<<blocks, kThreads, 0, stream>>>(
                            static_cast<const T*>(w), gate, static_cast<T*>(w_out), total, C));
  CNN_CHECK_LAUNCH();
}

SeVariant tune_se(DType t, const void* x, void* y, const float* w1, const float* b1,
                  const float* w2, const float* b2, const SeSpec& s, void* scratch,
                  cudaStream_t stream, double us[2]) {
  // Each variant as the benchmark replays it (kernels/timing.h: 20 runs in one CUDA graph, the
  // median of five replays).
  const SeVariant vs[2] = {SeVariant::OneBlock, SeVariant::Split};
  // The legacy default stream cannot be captured: time on a stream of our own instead.
  cudaStream_t own = nullptr;
  if (!stream) {
    CNN_CHECK_CUDA(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    stream = own;
  }
  try {
    for (int i = 0; i < 2; ++i)
      us[i] = graph_us(
          [&](cudaStream_t st) { launch_se(t, x, y, w1, b1, w2, b2, s, vs[i], scratch, st); },
          stream);
  } catch (...) {
    if (own) cudaStreamDestroy(own);
    throw;
  }
  if (own) CNN_CHECK_CUDA(cudaStreamDestroy(own));
  return us[0] <= us[1] ? vs[0] : vs[1];
}

std::vector<double> se_reference(const std::vector<float>& x, const std::vector<float>& w1,
                                 const std::vector<float>& b1, const std::vector<float>& w2,
                                 const std::vector<float>& b2, const SeSpec& s) {
  const int C = s.x.c, hw = s.x.h * s.x.w, sq = s.squeeze;
  std::vector<double> y(x.size());
  for (int n = 0; n < s.x.n; ++n) {
    std::vector<double> pooled(C, 0.0), hidden(sq), gate(C);
    for (int r = 0; r < hw; ++r)
      for (int c = 0; c < C; ++c) pooled[c] += x[(size_t(n) * hw + r) * C + c];
    for (double& p : pooled) p /= hw;
    for (int j = 0; j < sq; ++j) {
      double a = b1[j];
      for (int c = 0; c < C; ++c) a += double(w1[size_t(j) * C + c]) * pooled[c];
      hidden[j] = a / (1.0 + std::exp(-a));
    }
    for (int c = 0; c < C; ++c) {
      double a = b2[c];
      for (int j = 0; j < sq; ++j) a += double(w2[size_t(c) * sq + j]) * hidden[j];
      gate[c] = 1.0 / (1.0 + std::exp(-a));
    }
    for (int r = 0; r < hw; ++r)
      for (int c = 0; c < C; ++c) {
        const size_t i = (size_t(n) * hw + r) * C + c;
        y[i] = x[i] * gate[c];
      }
  }
  return y;
}

}  // namespace cnnbench
