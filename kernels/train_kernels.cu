#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/train_kernels.h"

namespace cnnbench {

namespace {

// ---- Launch geometry ---------------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 16;  // grid-stride loops above this
// Per-channel kernels: a block is kTileC channels (threadIdx.x, coalesced over NHWC's innermost
// dimension) by kTileR row lanes (threadIdx.y).
constexpr int kTileC = 32;
constexpr int kTileR = 8;
// The reductions split rows into chunks, one block per (channel tile, chunk, segment), aiming at
// about kTargetBlocks blocks with at least kMinRowsPerThread rows per thread; a finalize kernel
// then combines a channel's chunks, kFinR lanes per channel, in a fixed order.
constexpr int kTargetBlocks = 2048;
constexpr int kMaxChunks = 1024;
constexpr int kMinRowsPerThread = 4;
constexpr int kFinR = 32;
constexpr int kFinThreads = kTileC * kFinR;

int blocks_for(int64_t n, int threads = kThreads) {
  return int(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, kMaxBlocks)));
}

int ld_or(int ld, int c) {
  return ld > 0 ? ld : c;
}

int channel_tiles(int channels) {
  return (channels + kTileC - 1) / kTileC;
}

// A grid for the row-tiled elementwise kernels: channel tiles by row blocks (grid-stride).
dim3 row_grid(int64_t rows, int channels) {
  const int tiles = channel_tiles(channels);
  const int64_t want = (rows + kTileR - 1) / kTileR;
  const int64_t most = std::max<int64_t>(1, kMaxBlocks / tiles);
  return dim3(tiles, unsigned(std::max<int64_t>(1, std::min<int64_t>({want, most, 65535}))));
}

struct Chunks {
  int count;
  int64_t rows_per;  // rows of a chunk; the last ones may hold fewer (or none)
};
Chunks reduce_chunks(int64_t rows, int channels, int segments) {
  const int64_t blocks = int64_t(channel_tiles(channels)) * segments;
  const int64_t want = (kTargetBlocks + blocks - 1) / blocks;
  const int64_t most =
      std::max<int64_t>(1, (rows + kTileR * kMinRowsPerThread - 1) / (kTileR * kMinRowsPerThread));
  Chunks c;
  c.count = int(std::max<int64_t>(1, std::min<int64_t>({want, most, kMaxChunks})));
  c.rows_per = std::max<int64_t>(1, (rows + c.count - 1) / c.count);
  return c;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// ---- Vector loads for the packed elementwise kernels -------------------------------------------

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ void load_pack(const T* p, int64_t j, float (&out)[V]) {
  if (!p) {
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = 0.0f;
    return;
  }
  const Pack<T, V> pk = reinterpret_cast<const Pack<T, V>*>(p)[j];
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = load_f(pk.v, k);
}

template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, int64_t j, const float (&in)[V]) {
  Pack<T, V> pk;
#pragma unroll
  for (int k = 0; k < V; ++k) store_f(pk.v, k, in[k]);
  reinterpret_cast<Pack<T, V>*>(p)[j] = pk;
}

template <typename T>
__device__ __forceinline__ float load_or0(const T* p, int64_t i) {
  return p ? load_f(p, i) : 0.0f;
}

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

// ---- Per-channel reductions --------------------------------------------------------------------

// Chan's parallel combination of two (count, mean, M2) triples, the first updated in place.
__device__ __forceinline__ void welford_merge(float& n, float& mean, float& m2, float nb,
                                              float meanb, float m2b) {
  if (nb == 0.0f) return;
  const float nn = n + nb;
  const float d = meanb - mean, f = nb / nn;
  mean += d * f;
  m2 += m2b + d * d * n * f;
  n = nn;
}

// BatchNorm statistics, pass 1. Grid (channel tiles, chunks): each thread runs Welford over its
// rows of the chunk, the block merges its row lanes, and writes (count, mean, M2) per channel to
// part[q][chunk][c], q = 0, 1, 2.
template <typename T>
__global__ void bn_stats_partial(const T* x, int ld_x, int64_t rows, int C, int64_t rows_per,
                                 float* part) {
  __shared__ float sn[kTileR][kTileC], sm[kTileR][kTileC], s2[kTileR][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileC + tx, chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t r0 = int64_t(chunk) * rows_per, r1 = min(rows, r0 + rows_per);
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  if (c < C)
    for (int64_t r = r0 + ty; r < r1; r += kTileR) {
      const float v = load_f(x, r * ld_x + c);
      n += 1.0f;
      const float d = v - mean;
      mean += d / n;
      m2 += d * (v - mean);
    }
  sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
  __syncthreads();
  for (int h = kTileR / 2; h > 0; h /= 2) {
    if (ty < h) {
      welford_merge(n, mean, m2, sn[ty + h][tx], sm[ty + h][tx], s2[ty + h][tx]);
      sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
    }
    __syncthreads();
  }
  if (ty == 0 && c < C) {
    const int64_t plane = int64_t(chunks) * C, at = int64_t(chunk) * C + c;
    part[at] = n;
    part[plane + at] = mean;
    part[2 * plane + at] = m2;
  }
}

// BatchNorm statistics, pass 2. Grid (channel tiles), block (kTileC, kFinR): lane ty merges chunks
// ty, ty + kFinR, ... then the lanes merge pairwise; mean, invstd and the running statistics.
__global__ void __launch_bounds__(kFinThreads)
    bn_stats_finalize(const float* part, int C, int chunks, int64_t rows, float eps, float momentum,
                      float keep, float* mean_out, float* invstd_out, float* running_mean,
                      float* running_var) {
  __shared__ float sn[kFinR][kTileC], sm[kFinR][kTileC], s2[kFinR][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileC + tx;
  const int64_t plane = int64_t(chunks) * C;
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  if (c < C)
    for (int k = ty; k < chunks; k += kFinR) {
      const int64_t at = int64_t(k) * C + c;
      welford_merge(n, mean, m2, part[at], part[plane + at], part[2 * plane + at]);
    }
  sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
  __syncthreads();
  for (int h = kFinR / 2; h > 0; h /= 2) {
    if (ty < h) {
      welford_merge(n, mean, m2, sn[ty + h][tx], sm[ty + h][tx], s2[ty + h][tx]);
      sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
    }
    __syncthreads();
  }
  if (ty != 0 || c >= C) return;
  const float var = m2 / float(rows);
  mean_out[c] = mean;
  invstd_out[c] = 1.0f / sqrtf(var + eps);
  // keep = 1 - momentum, computed in double on the host.
  if (running_mean) running_mean[c] = keep * running_mean[c] + momentum * mean;
  if (running_var) running_var[c] = keep * running_var[c] + momentum * (m2 / float(rows - 1));
}

template <typename T>
__global__ void bn_apply(const T* x, int ld_x, T* y, int ld_y, const float* mean,
                         const float* invstd, const float* gamma, const float* beta, int64_t rows,
                         int C, bool relu) {
  const int c = blockIdx.x * kTileC + threadIdx.x;
  if (c >= C) return;
  const float mu = mean[c], k = invstd[c] * (gamma ? gamma[c] : 1.0f), b = beta ? beta[c] : 0.0f;
  for (int64_t r = int64_t(blockIdx.y) * kTileR + threadIdx.y; r < rows;
       r += int64_t(gridDim.y) * kTileR) {
    float v = (load_f(x, r * ld_x + c) - mu) * k + b;
    if (relu) v = fmaxf(v, 0.0f);
    store_f(y, r * ld_y + c, v);
  }
}

// Sums per channel of K values per element, pass 1. Grid (channel tiles, chunks, segments): the
// functor gives the K values of (segment, row within it, channel) and may write an elementwise
// result on the way. Partial sums go to part[q][segment][chunk][c].
template <int K, typename F>
__global__ void channel_sums_partial(F f, int64_t rows, int C, int64_t rows_per, float* part) {
  __shared__ float sh[K][kTileR][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileC + tx, chunk = blockIdx.y, chunks = gridDim.y;
  const int seg = blockIdx.z, segs = gridDim.z;
  const int64_t r0 = int64_t(chunk) * rows_per, r1 = min(rows, r0 + rows_per);
  float acc[K];
#pragma unroll
  for (int q = 0; q < K; ++q) acc[q] = 0.0f;
  if (c < C)
    for (int64_t r = r0 + ty; r < r1; r += kTileR) {
      float v[K];
      f(seg, r, c, v);
#pragma unroll
      for (int q = 0; q < K; ++q) acc[q] += v[q];
    }
#pragma unroll
  for (int q = 0; q < K; ++q) sh[q][ty][tx] = acc[q];
  __syncthreads();
  for (int h = kTileR / 2; h > 0; h /= 2) {
    if (ty < h)
#pragma unroll
      for (int q = 0; q < K; ++q) sh[q][ty][tx] += sh[q][ty + h][tx];
    __syncthreads();
  }
  if (ty == 0 && c < C)
#pragma unroll
    for (int q = 0; q < K; ++q)
      part[((int64_t(q) * segs + seg) * chunks + chunk) * C + c] = sh[q][0][tx];
}

// Pass 2. Grid (channel tiles, 1, segments), block (kTileC, kFinR); out(segment, c, sums).
template <int K, typename Out>
__global__ void __launch_bounds__(kFinThreads)
    channel_sums_finalize(const float* part, int C, int chunks, Out out) {
  __shared__ float sh[K][kFinR][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileC + tx, seg = blockIdx.z, segs = gridDim.z;
  float acc[K];
#pragma unroll
  for (int q = 0; q < K; ++q) acc[q] = 0.0f;
  if (c < C)
    for (int k = ty; k < chunks; k += kFinR)
#pragma unroll
      for (int q = 0; q < K; ++q) acc[q] += part[((int64_t(q) * segs + seg) * chunks + k) * C + c];
#pragma unroll
  for (int q = 0; q < K; ++q) sh[q][ty][tx] = acc[q];
  __syncthreads();
  for (int h = kFinR / 2; h > 0; h /= 2) {
    if (ty < h)
#pragma unroll
      for (int q = 0; q < K; ++q) sh[q][ty][tx] += sh[q][ty + h][tx];
    __syncthreads();
  }
  if (ty == 0 && c < C) {
    float s[K];
#pragma unroll
    for (int q = 0; q < K; ++q) s[q] = sh[q][0][tx];
    out(seg, c, s);
  }
}

// Both passes of a per-channel reduction over `segments` groups of `rows` rows.
template <int K, typename F, typename Out>
void launch_channel_sums(F f, Out out, int64_t rows, int C, int segments, void* scratch,
                         cudaStream_t stream) {
  const Chunks ch = reduce_chunks(rows, C, segments);
  float* part = static_cast<float*>(scratch);
  const dim3 grid(channel_tiles(C), ch.count, segments);
  channel_sums_partial<K><<<grid, dim3(kTileC, kTileR), 0, stream>>>(f, rows, C, ch.rows_per, part);
  CNN_CHECK_LAUNCH();
  channel_sums_finalize<K><<<dim3(channel_tiles(C), 1, segments), dim3(kTileC, kFinR), 0, stream>>>(
      part, C, ch.count, out);
  CNN_CHECK_LAUNCH();
}

// ---- BatchNorm backward ------------------------------------------------------------------------

template <typename T>
struct BnGradTerms {  // (dy, dy * xhat), dy masked by y > 0 with ReLU
  const T *x, *y, *dy;
  const float *mean, *invstd;
  int ld_x, ld_y;
  bool relu;
  __device__ void operator()(int, int64_t r, int c, float (&v)[2]) const {
    float d = load_f(dy, r * ld_y + c);
    if (relu && !(load_f(y, r * ld_y + c) > 0.0f)) d = 0.0f;
    const float xhat = (load_f(x, r * ld_x + c) - mean[c]) * invstd[c];
    v[0] = d;
    v[1] = d * xhat;
  }
};

struct BnGradOut {
  float *dgamma, *dbeta;
  __device__ void operator()(int, int c, const float (&s)[2]) const {
    dbeta[c] = s[0];
    dgamma[c] = s[1];
  }
};

template <typename T>
__global__ void bn_backward_dx(const T* x, const T* y, const T* dy, T* dx, int ld_x, int ld_y,
                               const float* gamma, const float* mean, const float* invstd,
                               const float* dgamma, const float* dbeta, int64_t rows, int C,
                               bool relu, bool accumulate) {
  const int c = blockIdx.x * kTileC + threadIdx.x;
  if (c >= C) return;
  const float inv_rows = 1.0f / float(rows);
  const float mu = mean[c], is = invstd[c], k = (gamma ? gamma[c] : 1.0f) * is;
  const float db = dbeta[c] * inv_rows, dg = dgamma[c] * inv_rows;
  for (int64_t r = int64_t(blockIdx.y) * kTileR + threadIdx.y; r < rows;
       r += int64_t(gridDim.y) * kTileR) {
    float d = load_f(dy, r * ld_y + c);
    if (relu && !(load_f(y, r * ld_y + c) > 0.0f)) d = 0.0f;
    const float xhat = (load_f(x, r * ld_x + c) - mu) * is;
    float v = k * (d - db - xhat * dg);
    if (accumulate) v += load_f(dx, r * ld_x + c);
    store_f(dx, r * ld_x + c, v);
  }
}

// ---- Vectorised BatchNorm (packed rows, channels a multiple of the 16-byte pack) ---------------
//
// The kernels above read one element per thread, 2 bytes in fp16, and the statistics pass divides
// per element. These read a 16-byte pack of V adjacent channels per thread (V = 8 in fp16/bf16, 4
// in fp32), keep that pack's per-channel constants in registers while walking rows, and Welford's
// update shares one reciprocal across the pack. A block is vx packs across by vy row lanes,
// numbered along the row first, so that a warp reads whole rows of a narrow tensor at once. They
// write the same partial layout as the kernels above, so the finalize kernels are shared, and the
// sums run in a fixed order: a run repeats bit for bit. Taken where every tensor is packed and
// 16-byte aligned and V divides the channels; CNNBENCH_SCALAR_BN=1 keeps the kernels above (for
// comparison).

struct VecGeom {
  int vx = 1, vy = 1;  // packs across a block, row lanes (vx * vy <= kThreads)
  int tiles = 1;       // column tiles: tiles * vx >= packs
};

VecGeom vec_geom(int channels, int V) {
  const int packs = channels / V;
  VecGeom g;
  g.tiles = (packs + 31) / 32;
  g.vx = (packs + g.tiles - 1) / g.tiles;
  g.vy = kThreads / g.vx;
  return g;
}

bool scalar_bn_forced() {
  static const bool forced = [] {
    const char* e = std::getenv("CNNBENCH_SCALAR_BN");
    return e && std::string(e) == "1";
  }();
  return forced;
}

// Whether the vectorised path takes tensors of `channels` with these strides and pointers.
bool bn_vectorised(DType t, int channels, std::initializer_list<int> lds,
                   std::initializer_list<const void*> ptrs) {
  const int V = 16 / int(dtype_size(t));
  if (scalar_bn_forced() || channels % V != 0) return false;
  for (int ld : lds)
    if (ld != channels) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

// Row blocks for a grid-stride pass over `rows`: about kMaxBlocks blocks in all.
unsigned vec_row_blocks(int64_t rows, const VecGeom& g) {
  const int64_t want = (rows + g.vy - 1) / g.vy;
  const int64_t most = std::max<int64_t>(1, kMaxBlocks / g.tiles);
  return unsigned(std::max<int64_t>(1, std::min<int64_t>({want, most, 65535})));
}

// Chunks for a statistics pass: about kTargetBlocks blocks, at least kMinRowsPerThread rows per
// lane, and never more than channel_reduce_scratch_bytes made room for.
int vec_chunks(int64_t rows, int channels, const VecGeom& g) {
  const int64_t room = reduce_chunks(rows, channels, 1).count;
  const int64_t want = (kTargetBlocks + g.tiles - 1) / g.tiles;
  const int64_t most = std::max<int64_t>(
      1, (rows + int64_t(g.vy) * kMinRowsPerThread - 1) / (int64_t(g.vy) * kMinRowsPerThread));
  return int(std::max<int64_t>(1, std::min<int64_t>({room, want, most})));
}

// Pass 1 of the statistics: (count, mean, M2) per channel and chunk, to part[q][chunk][c].
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    bn_stats_vec(const T* x, int64_t rows, int C, int vx, int vy, int64_t rows_per, float* part) {
  __shared__ float sh[(2 * V + 1) * kThreads];
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  const bool active = pack * V < C;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per, r1 = min(rows, r0 + rows_per);
  float n = 0.0f, mean[V], m2[V];
#pragma unroll
  for (int k = 0; k < V; ++k) mean[k] = 0.0f, m2[k] = 0.0f;
  if (active)
    for (int64_t r = r0 + lane; r < r1; r += vy) {
      float v[V];
      load_pack<T, V>(x + r * C, pack, v);
      n += 1.0f;
      const float inv = 1.0f / n;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = v[k] - mean[k];
        mean[k] += d * inv;
        m2[k] += d * (v[k] - mean[k]);
      }
    }
  const int me = threadIdx.x;
  sh[me] = n;
#pragma unroll
  for (int k = 0; k < V; ++k)
    sh[(1 + k) * kThreads + me] = mean[k], sh[(1 + V + k) * kThreads + me] = m2[k];
  // Lanes merge pairwise: lane l takes lane l + h where l is a multiple of 2h.
  for (int h = 1; h < vy; h *= 2) {
    __syncthreads();
    if (lane % (2 * h) == 0 && lane + h < vy) {
      const int o = me + h * vx;
      const float nb = sh[o];
      if (nb != 0.0f) {
        const float nn = n + nb, f = nb / nn;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = sh[(1 + k) * kThreads + o] - mean[k];
          mean[k] += d * f;
          m2[k] += sh[(1 + V + k) * kThreads + o] + d * d * n * f;
          sh[(1 + k) * kThreads + me] = mean[k];
          sh[(1 + V + k) * kThreads + me] = m2[k];
        }
        n = nn;
        sh[me] = n;
      }
    }
  }
  if (lane != 0 || !active) return;
  const int64_t plane = int64_t(gridDim.y) * C;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int64_t at = int64_t(blockIdx.y) * C + pack * V + k;
    part[at] = n;
    part[plane + at] = mean[k];
    part[2 * plane + at] = m2[k];
  }
}

// y = (x - mean) * invstd * gamma + beta, ReLU after when asked.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    bn_apply_vec(const T* x, T* y, const float* mean, const float* invstd, const float* gamma,
                 const float* beta, int64_t rows, int C, int vx, int vy, bool relu) {
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  if (pack * V >= C) return;
  float mu[V], k[V], b[V];
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const int c = pack * V + q;
    mu[q] = mean[c];
    k[q] = invstd[c] * (gamma ? gamma[c] : 1.0f);
    b[q] = beta ? beta[c] : 0.0f;
  }
  for (int64_t r = int64_t(blockIdx.y) * vy + lane; r < rows; r += int64_t(gridDim.y) * vy) {
    float v[V];
    load_pack<T, V>(x + r * C, pack, v);
#pragma unroll
    for (int q = 0; q < V; ++q) {
      v[q] = (v[q] - mu[q]) * k[q] + b[q];
      if (relu) v[q] = fmaxf(v[q], 0.0f);
    }
    store_pack<T, V>(y + r * C, pack, v);
  }
}

// Backward pass 1: sum of dy (masked by y > 0 with ReLU) and of dy * xhat per channel and chunk,
// to part[q][0][chunk][c] (channel_sums_finalize's layout with one segment).
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    bn_grad_sums_vec(const T* x, const T* y, const T* dy, const float* mean, const float* invstd,
                     int64_t rows, int C, int vx, int vy, int64_t rows_per, bool relu,
                     float* part) {
  __shared__ float sh[2 * V * kThreads];
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  const bool active = pack * V < C;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per, r1 = min(rows, r0 + rows_per);
  float s0[V], s1[V], mu[V], is[V];
#pragma unroll
  for (int q = 0; q < V; ++q) {
    s0[q] = 0.0f, s1[q] = 0.0f;
    mu[q] = active ? mean[pack * V + q] : 0.0f;
    is[q] = active ? invstd[pack * V + q] : 0.0f;
  }
  if (active)
    for (int64_t r = r0 + lane; r < r1; r += vy) {
      float d[V], xv[V], yv[V];
      load_pack<T, V>(dy + r * C, pack, d);
      load_pack<T, V>(x + r * C, pack, xv);
      if (relu) load_pack<T, V>(y + r * C, pack, yv);
#pragma unroll
      for (int q = 0; q < V; ++q) {
        if (relu && !(yv[q] > 0.0f)) d[q] = 0.0f;
        s0[q] += d[q];
        s1[q] += d[q] * ((xv[q] - mu[q]) * is[q]);
      }
    }
  const int me = threadIdx.x;
#pragma unroll
  for (int q = 0; q < V; ++q) sh[q * kThreads + me] = s0[q], sh[(V + q) * kThreads + me] = s1[q];
  for (int h = 1; h < vy; h *= 2) {
    __syncthreads();
    if (lane % (2 * h) == 0 && lane + h < vy) {
      const int o = me + h * vx;
#pragma unroll
      for (int q = 0; q < V; ++q) {
        s0[q] += sh[q * kThreads + o];
        s1[q] += sh[(V + q) * kThreads + o];
        sh[q * kThreads + me] = s0[q];
        sh[(V + q) * kThreads + me] = s1[q];
      }
    }
  }
  if (lane != 0 || !active) return;
  const int64_t chunks = gridDim.y;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const int64_t c = pack * V + q;
    part[int64_t(blockIdx.y) * C + c] = s0[q];
    part[(chunks + blockIdx.y) * C + c] = s1[q];
  }
}

// Backward pass 2: dx (= or +=) gamma * invstd * (dy - dbeta / rows - xhat * dgamma / rows).
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    bn_backward_dx_vec(const T* x, const T* y, const T* dy, T* dx, const float* gamma,
                       const float* mean, const float* invstd, const float* dgamma,
                       const float* dbeta, int64_t rows, int C, int vx, int vy, bool relu,
                       bool accumulate) {
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  if (pack * V >= C) return;
  const float inv_rows = 1.0f / float(rows);
  float mu[V], is[V], k[V], db[V], dg[V];
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const int c = pack * V + q;
    mu[q] = mean[c], is[q] = invstd[c];
    k[q] = (gamma ? gamma[c] : 1.0f) * is[q];
    db[q] = dbeta[c] * inv_rows, dg[q] = dgamma[c] * inv_rows;
  }
  for (int64_t r = int64_t(blockIdx.y) * vy + lane; r < rows; r += int64_t(gridDim.y) * vy) {
    float d[V], xv[V], yv[V], acc[V];
    load_pack<T, V>(dy + r * C, pack, d);
    load_pack<T, V>(x + r * C, pack, xv);
    if (relu) load_pack<T, V>(y + r * C, pack, yv);
    if (accumulate) load_pack<T, V>(dx + r * C, pack, acc);
#pragma unroll
    for (int q = 0; q < V; ++q) {
      if (relu && !(yv[q] > 0.0f)) d[q] = 0.0f;
      const float xhat = (xv[q] - mu[q]) * is[q];
      float v = k[q] * (d[q] - db[q] - xhat * dg[q]);
      if (accumulate) v += acc[q];
      xv[q] = v;
    }
    store_pack<T, V>(dx + r * C, pack, xv);
  }
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
        const float sg = 1.0f / (1.0f + expf(-s));
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

template <typename G, typename C>
__global__ void sgd_kernel(float* p, float* buf, const G* g, int64_t n, SgdArgs h, StepControl c,
                           C* copy) {
  if (c.found_inf && *c.found_inf) return;
  const float inv = inv_scale_of(c.loss_scale);
  const bool first = c.step && *c.step == 1;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
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
}

struct AdamArgs {
  double lr, beta1, beta2, eps, weight_decay;
};

template <typename G, typename C>
__global__ void adam_kernel(float* p, float* m, float* v, const G* g, int64_t n, AdamArgs h,
                            StepControl c, C* copy) {
  if (c.found_inf && *c.found_inf) return;
  const float inv = inv_scale_of(c.loss_scale);
  const int t = *c.step;
  const double bc1 = 1.0 - pow(h.beta1, double(t)), bc2 = 1.0 - pow(h.beta2, double(t));
  const float step_size = float(h.lr / bc1), bc2_sqrt = float(sqrt(bc2));
  // 1 - beta in double, as torch computes it in Python before the fp32 kernel sees it: fp32's
  // 1 - float(0.999) is 1.3e-5 off.
  const float b1 = float(h.beta1), b2 = float(h.beta2), eps = float(h.eps);
  const float omb1 = float(1.0 - h.beta1), omb2 = float(1.0 - h.beta2);
  const float wd = float(h.weight_decay);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float w = p[i];
    const float gi = load_f(g, i) * inv + wd * w;
    const float mi = b1 * m[i] + omb1 * gi;
    const float vi = b2 * v[i] + omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    p[i] = w;
    if (copy) store_f(copy, i, w);
  }
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

size_t channel_reduce_scratch_bytes(int64_t rows, int channels, int segments) {
  const Chunks ch = reduce_chunks(rows, channels, segments);
  return 3 * size_t(ch.count) * size_t(segments) * size_t(channels) * sizeof(float);
}

void launch_bn_forward_train(DType t, const void* x, void* y, const float* gamma, const float* beta,
                             float* mean, float* invstd, float* running_mean, float* running_var,
                             const BnTrainSpec& s, void* scratch, cudaStream_t stream) {
  const int C = s.channels;
  if (s.rows <= 0 || C <= 0) return;
  const int ld_x = ld_or(s.ld_x, C), ld_y = ld_or(s.ld_y, C);
  float* part = static_cast<float*>(scratch);
  if (bn_vectorised(t, C, {ld_x, ld_y}, {x, y})) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / sizeof(T);
      const VecGeom g = vec_geom(C, V);
      const int chunks = vec_chunks(s.rows, C, g);
      const int64_t rows_per = (s.rows + chunks - 1) / chunks;
      bn_stats_vec<T, V><<<dim3(g.tiles, chunks), g.vx * g.vy, 0, stream>>>(
          static_cast<const T*>(x), s.rows, C, g.vx, g.vy, rows_per, part);
      CNN_CHECK_LAUNCH();
      bn_stats_finalize<<<channel_tiles(C), dim3(kTileC, kFinR), 0, stream>>>(
          part, C, chunks, s.rows, float(s.eps), float(s.momentum), float(1.0 - s.momentum), mean,
          invstd, running_mean, running_var);
      CNN_CHECK_LAUNCH();
      bn_apply_vec<T, V><<<dim3(g.tiles, vec_row_blocks(s.rows, g)), g.vx * g.vy, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), mean, invstd, gamma, beta, s.rows, C, g.vx,
          g.vy, s.relu);
      CNN_CHECK_LAUNCH();
    });
    return;
  }
  const Chunks ch = reduce_chunks(s.rows, C, 1);
  const dim3 block(kTileC, kTileR);
  CNN_DISPATCH_DTYPE(t, bn_stats_partial<T><<<dim3(channel_tiles(C), ch.count), block, 0, stream>>>(
                            static_cast<const T*>(x), ld_x, s.rows, C, ch.rows_per, part));
  CNN_CHECK_LAUNCH();
  bn_stats_finalize<<<channel_tiles(C), dim3(kTileC, kFinR), 0, stream>>>(
      part, C, ch.count, s.rows, float(s.eps), float(s.momentum), float(1.0 - s.momentum), mean,
      invstd, running_mean, running_var);
  CNN_CHECK_LAUNCH();
  CNN_DISPATCH_DTYPE(t, bn_apply<T><<<row_grid(s.rows, C), block, 0, stream>>>(
                            static_cast<const T*>(x), ld_x, static_cast<T*>(y), ld_y, mean, invstd,
                            gamma, beta, s.rows, C, s.relu));
  CNN_CHECK_LAUNCH();
}

void launch_bn_backward(DType t, const void* x, const void* y, const void* dy, void* dx,
                        const float* gamma, const float* mean, const float* invstd, float* dgamma,
                        float* dbeta, const BnTrainSpec& s, bool accumulate, void* scratch,
                        cudaStream_t stream) {
  const int C = s.channels;
  if (s.rows <= 0 || C <= 0) return;
  if (!dgamma || !dbeta) throw std::invalid_argument("launch_bn_backward: dgamma and dbeta needed");
  if (s.relu && !y) throw std::invalid_argument("launch_bn_backward: the ReLU mask needs y");
  const int ld_x = ld_or(s.ld_x, C), ld_y = ld_or(s.ld_y, C);
  if (bn_vectorised(t, C, {ld_x, ld_y}, {x, s.relu ? y : nullptr, dy, dx})) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / sizeof(T);
      const VecGeom g = vec_geom(C, V);
      const int chunks = vec_chunks(s.rows, C, g);
      const int64_t rows_per = (s.rows + chunks - 1) / chunks;
      float* part = static_cast<float*>(scratch);
      const T* yt = s.relu ? static_cast<const T*>(y) : nullptr;
      bn_grad_sums_vec<T, V><<<dim3(g.tiles, chunks), g.vx * g.vy, 0, stream>>>(
          static_cast<const T*>(x), yt, static_cast<const T*>(dy), mean, invstd, s.rows, C, g.vx,
          g.vy, rows_per, s.relu, part);
      CNN_CHECK_LAUNCH();
      channel_sums_finalize<2><<<dim3(channel_tiles(C), 1, 1), dim3(kTileC, kFinR), 0, stream>>>(
          part, C, chunks, BnGradOut{dgamma, dbeta});
      CNN_CHECK_LAUNCH();
      bn_backward_dx_vec<T, V>
          <<<dim3(g.tiles, vec_row_blocks(s.rows, g)), g.vx * g.vy, 0, stream>>>(
              static_cast<const T*>(x), yt, static_cast<const T*>(dy), static_cast<T*>(dx), gamma,
              mean, invstd, dgamma, dbeta, s.rows, C, g.vx, g.vy, s.relu, accumulate);
      CNN_CHECK_LAUNCH();
    });
    return;
  }
  CNN_DISPATCH_DTYPE(t, {
    const BnGradTerms<T> terms{static_cast<const T*>(x),
                               static_cast<const T*>(y),
                               static_cast<const T*>(dy),
                               mean,
                               invstd,
                               ld_x,
                               ld_y,
                               s.relu};
    launch_channel_sums<2>(terms, BnGradOut{dgamma, dbeta}, s.rows, C, 1, scratch, stream);
    bn_backward_dx<T><<<row_grid(s.rows, C), dim3(kTileC, kTileR), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy),
        static_cast<T*>(dx), ld_x, ld_y, gamma, mean, invstd, dgamma, dbeta, s.rows, C, s.relu,
        accumulate);
    CNN_CHECK_LAUNCH();
  });
}

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

void launch_maxpool_backward(DType t, const void* x, const void* dy, void* dx, const PoolSpec& s,
                             bool accumulate, cudaStream_t stream) {
  if (s.x.numel() <= 0) return;
  CNN_DISPATCH_DTYPE(
      t, pool_backward_kernel<T, true><<<blocks_for(s.x.numel()), kThreads, 0, stream>>>(
             static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), s.x, s.y,
             s.kernel, s.stride, s.pad, s.count_include_pad, ld_or(s.ld_x, s.x.c),
             ld_or(s.ld_y, s.y.c), accumulate));
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
  CNN_DISPATCH_DTYPE(t, global_avgpool_backward_kernel<T>
                     <<<row_grid(rows, d.c), dim3(kTileC, kTileR), 0, stream>>>(
                         static_cast<const T*>(dy), static_cast<T*>(dx), rows, d.c, d.h * d.w,
                         ld_or(s.ld_x, d.c), ld_or(s.ld_y, d.c), accumulate));
  CNN_CHECK_LAUNCH();
}

void launch_scale_backward(DType t, const void* x, const float* gate, const void* dy, void* dx,
                           float* dgate, const Dims& d, bool accumulate, void* scratch,
                           cudaStream_t stream) {
  const int64_t hw = int64_t(d.h) * d.w;
  if (d.n <= 0 || hw <= 0 || d.c <= 0) return;
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

void launch_adam_step(float* p, float* m, float* v, const void* g, DType gt, int64_t n,
                      const AdamRef& h, const StepControl& c, void* p_copy, DType copy_t,
                      cudaStream_t stream) {
  if (!c.step) throw std::invalid_argument("launch_adam_step: Adam needs the step count");
  if (!m || !v) throw std::invalid_argument("launch_adam_step: Adam needs m and v");
  if (n <= 0) return;
  const AdamArgs a{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay};
  CNN_DISPATCH_TWO(gt, copy_t,
                   adam_kernel<G, C><<<blocks_for(n), kThreads, 0, stream>>>(
                       p, m, v, static_cast<const G*>(g), n, a, c, static_cast<C*>(p_copy)));
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
