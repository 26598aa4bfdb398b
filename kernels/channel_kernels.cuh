// The pieces the training kernels share (train_kernels.cu, batchnorm_train.cu): launch geometry,
// 16-byte packed loads and stores, and the two-pass per-channel reductions (partial sums per block
// in a fixed order, then a finalize kernel, so that a run repeats bit for bit).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/tensor.h"

namespace cnnbench {
namespace ck {

// ---- Launch geometry ---------------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 16;  // grid-stride loops above this
// Per-channel kernels: a block is kTileC channels (threadIdx.x, coalesced over NHWC's innermost
// dimension) by kTileR row lanes (threadIdx.y).
constexpr int kTileC = 32;
constexpr int kTileR = 8;
// The reductions split rows into chunks, one block per (channel tile, chunk, segment), aiming at
// about kTargetBlocks blocks with at least kMinRowsPerThread rows per thread; a finalize kernel
// then combines a channel's chunks, kFinThreads / TC lanes per channel, in a fixed order.
constexpr int kTargetBlocks = 2048;
constexpr int kMaxChunks = 1024;
constexpr int kMinRowsPerThread = 4;
constexpr int kFinThreads = 1024;
// A finalize lane loads this many of its chunks' partials before adding (merging) them in order.
constexpr int kFinBatch = 8;

inline int blocks_for(int64_t n, int threads = kThreads) {
  return int(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, kMaxBlocks)));
}

inline int ld_or(int ld, int c) {
  return ld > 0 ? ld : c;
}

inline int channel_tiles(int channels) {
  return (channels + kTileC - 1) / kTileC;
}

// The finalize kernels' block: TC channels (threadIdx.x) by kFinThreads / TC lanes (threadIdx.y),
// TC 32 or 8. With 32, a reduction of few channels in one segment ran on a few SMs: ResNet-50's
// 64-channel BatchNorms at 256 (two blocks) took 12 to 13 us to combine their 400 KB of partials
// (call 101's ncu), where 2,048 channels (64 blocks) took 5.4. So 8 where 32 would give fewer
// blocks than the H100's and H200's 132 SMs: four times the blocks, a warp reading four 32-byte
// sectors. CNNBENCH_FIN_CHANNELS=32 (or 8) forces one, for the A/B on the device.
inline int fin_channels(int channels, int segments) {
  static const int forced = env_int_in("CNNBENCH_FIN_CHANNELS", 0, 0, 32);
  if (forced == 8 || forced == 32) return forced;
  return int64_t(channel_tiles(channels)) * segments < 132 ? 8 : 32;
}
inline int fin_tiles(int channels, int tc) {
  return (channels + tc - 1) / tc;
}
// Calls f with the finalize's TC as a std::integral_constant.
template <typename F>
void with_fin_channels(int channels, int segments, F&& f) {
  if (fin_channels(channels, segments) == 8)
    f(std::integral_constant<int, 8>{});
  else
    f(std::integral_constant<int, 32>{});
}

// A grid for the row-tiled elementwise kernels: channel tiles by row blocks (grid-stride).
inline dim3 row_grid(int64_t rows, int channels) {
  const int tiles = channel_tiles(channels);
  const int64_t want = (rows + kTileR - 1) / kTileR;
  const int64_t most = std::max<int64_t>(1, kMaxBlocks / tiles);
  return dim3(tiles, unsigned(std::max<int64_t>(1, std::min<int64_t>({want, most, 65535}))));
}

struct Chunks {
  int count;
  int64_t rows_per;  // rows of a chunk; the last ones may hold fewer (or none)
};
inline Chunks reduce_chunks(int64_t rows, int channels, int segments) {
  const int64_t blocks = int64_t(channel_tiles(channels)) * segments;
  const int64_t want = (kTargetBlocks + blocks - 1) / blocks;
  const int64_t most =
      std::max<int64_t>(1, (rows + kTileR * kMinRowsPerThread - 1) / (kTileR * kMinRowsPerThread));
  Chunks c;
  c.count = int(std::max<int64_t>(1, std::min<int64_t>({want, most, kMaxChunks})));
  c.rows_per = std::max<int64_t>(1, (rows + c.count - 1) / c.count);
  return c;
}

// The most chunks a reduction over `segments` groups of `rows` rows may split into, what
// channel_reduce_scratch_bytes sizes the partials for: the per-element path's (reduce_chunks), or
// where more, the vectorised path's at its narrowest column tiling (16-byte packs of 8 channels:
// ceil(channels / 256) tiles), about kTargetBlocks blocks in all. Sized by the per-element path
// alone (32-channel tiles), a vectorised pass over 256 channels or more got 256 blocks of 256
// threads, two an SM: one 16-byte load in flight a thread, about 60% of the bandwidth.
inline int reduce_room(int64_t rows, int channels, int segments) {
  const int64_t scalar = reduce_chunks(rows, channels, segments).count;
  const int64_t tiles = std::max<int64_t>(1, (int64_t(channels) / 8 + 31) / 32);
  const int64_t blocks = tiles * segments;
  const int64_t want = (kTargetBlocks + blocks - 1) / blocks;
  return int(std::max<int64_t>(
      scalar, std::min<int64_t>({want, std::max<int64_t>(1, rows), int64_t(kMaxChunks)})));
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// ---- Vector loads for the packed elementwise kernels -------------------------------------------

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Pack j of p, as one 16-byte access on the device; on the host (kernels whose threads are also
// run there, as tests) through memcpy, which the host compiler's aliasing rules allow.
template <typename T, int V>
__host__ __device__ __forceinline__ Pack<T, V> read_pack(const T* p, int64_t j) {
#ifdef __CUDA_ARCH__
  return reinterpret_cast<const Pack<T, V>*>(p)[j];
#else
  Pack<T, V> pk;
  std::memcpy(&pk, p + j * V, sizeof pk);
  return pk;
#endif
}

template <typename T, int V>
__host__ __device__ __forceinline__ void write_pack(T* p, int64_t j, const Pack<T, V>& pk) {
#ifdef __CUDA_ARCH__
  reinterpret_cast<Pack<T, V>*>(p)[j] = pk;
#else
  std::memcpy(static_cast<void*>(p + j * V), &pk, sizeof pk);
#endif
}

template <typename T, int V>
__host__ __device__ __forceinline__ void load_pack(const T* p, int64_t j, float (&out)[V]) {
  if (!p) {
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = 0.0f;
    return;
  }
  const Pack<T, V> pk = read_pack<T, V>(p, j);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = load_f(pk.v, k);
}

template <typename T, int V>
__host__ __device__ __forceinline__ void store_pack(T* p, int64_t j, const float (&in)[V]) {
  Pack<T, V> pk;
#pragma unroll
  for (int k = 0; k < V; ++k) store_f(pk.v, k, in[k]);
  write_pack<T, V>(p, j, pk);
}

// Stores v as pack j of p; with `accumulate`, adds the pack p holds first (v then holds the sum).
template <typename T, int V>
__host__ __device__ __forceinline__ void store_pack_acc(T* p, int64_t j, float (&v)[V],
                                                        bool accumulate) {
  if (accumulate) {
    float old[V];
    load_pack<T, V>(p, j, old);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] += old[k];
  }
  store_pack<T, V>(p, j, v);
}

template <typename T>
__device__ __forceinline__ float load_or0(const T* p, int64_t i) {
  return p ? load_f(p, i) : 0.0f;
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

// Pass 2. Grid (fin_tiles(C, TC), 1, segments), block (TC, kFinThreads / TC); out(segment, c,
// sums).
template <int K, int TC, typename Out>
__global__ void __launch_bounds__(kFinThreads)
    channel_sums_finalize(const float* part, int C, int chunks, Out out) {
  constexpr int R = kFinThreads / TC;  // lanes a channel
  __shared__ float sh[K][R][TC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * TC + tx, seg = blockIdx.z, segs = gridDim.z;
  float acc[K];
#pragma unroll
  for (int q = 0; q < K; ++q) acc[q] = 0.0f;
  // kFinBatch chunks loaded before they are added, in the same order as one at a time (the same
  // sums bit for bit, one memory latency a batch instead of one a chunk); a missing chunk adds
  // nothing.
  if (c < C)
    for (int k0 = ty; k0 < chunks; k0 += kFinBatch * R) {
      float v[kFinBatch][K];
#pragma unroll
      for (int u = 0; u < kFinBatch; ++u) {
        const int k = k0 + u * R;
#pragma unroll
        for (int q = 0; q < K; ++q)
          v[u][q] = k < chunks ? part[((int64_t(q) * segs + seg) * chunks + k) * C + c] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kFinBatch; ++u)
        if (k0 + u * R < chunks)
#pragma unroll
          for (int q = 0; q < K; ++q) acc[q] += v[u][q];
    }
#pragma unroll
  for (int q = 0; q < K; ++q) sh[q][ty][tx] = acc[q];
  __syncthreads();
  for (int h = R / 2; h > 0; h /= 2) {
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
  with_fin_channels(C, segments, [&](auto tc) {
    constexpr int TC = decltype(tc)::value;
    channel_sums_finalize<K, TC>
        <<<dim3(fin_tiles(C, TC), 1, segments), dim3(TC, kFinThreads / TC), 0, stream>>>(
            part, C, ch.count, out);
  });
  CNN_CHECK_LAUNCH();
}

// ---- Vectorised per-channel geometry
// ------------------------------------------------------------- Packed NHWC rows whose channel
// count is a multiple of V = 16 / sizeof(T): a thread owns one 16-byte pack of V adjacent channels
// in a column and walks the rows; a block is vx packs across by vy row lanes (vx * vy <= kThreads),
// threads numbered along the row first, so that a warp reads whole rows of a narrow tensor at once.

struct VecGeom {
  int vx = 1, vy = 1;  // packs across a block, row lanes
  int tiles = 1;       // column tiles: tiles * vx >= packs
};

inline VecGeom vec_geom(int channels, int V) {
  const int packs = channels / V;
  VecGeom g;
  g.tiles = (packs + 31) / 32;
  g.vx = (packs + g.tiles - 1) / g.tiles;
  g.vy = kThreads / g.vx;
  return g;
}

// The rows a lane takes at least in the vectorised passes: kVecApplyRows in the apply and dx
// passes, kVecSumRows in the partial-sum passes (BatchNorm's, and the squeeze-excitation scale's
// backward sums, which call 95 did not time). Fewer, fuller blocks at the small tensors: at
// ResNet-50's layer3 and layer4 shapes at batch 256 (12,544 to 50,176 rows) a grid of kMaxBlocks
// gave a lane of the 256- and 512-channel stages 1 to 3 rows, for which it loaded 3 to 6 floats
// of constants a channel, and the sums took 4 rows a lane into up to 1,024 chunks. Call 95 (H100,
// ResNet-50 fp16 training at 256, results/2026-12-06_h100): (1, 4) 41,055.7 us a step, (4, 8)
// 40,836.1, (8, 16) 40,248.7; layer3's and layer4's BatchNorm stages gave the 0.81 ms, bn1's and
// layer1's moved under 2 us. CNNBENCH_VEC_APPLY_ROWS and CNNBENCH_VEC_SUM_ROWS override them for an
// A/B; neither changes an apply's result, and a sum's only by its chunking (still a fixed order).
constexpr int kVecApplyRows = 8;
constexpr int kVecSumRows = 16;
inline int vec_apply_rows() {
  static const int n = env_int_in("CNNBENCH_VEC_APPLY_ROWS", kVecApplyRows, 1, 1024);
  return n;
}
inline int vec_sum_rows() {
  static const int n = env_int_in("CNNBENCH_VEC_SUM_ROWS", kVecSumRows, 1, 1024);
  return n;
}

// Index i of n walked forwards, or from the end when `rev` (BatchNorm's sweep order,
// bn_sweep in kernels/train_kernels.h): a bijection on [0, n) either way.
__host__ __device__ inline int64_t swept(int64_t i, int64_t n, bool rev) {
  return rev ? n - 1 - i : i;
}

// Row blocks for a grid-stride pass over `rows`: about kMaxBlocks blocks in all, at least
// vec_apply_rows() rows a lane.
inline unsigned vec_row_blocks(int64_t rows, const VecGeom& g) {
  const int64_t per = int64_t(g.vy) * vec_apply_rows();
  const int64_t want = (rows + per - 1) / per;
  const int64_t most = std::max<int64_t>(1, kMaxBlocks / g.tiles);
  return unsigned(std::max<int64_t>(1, std::min<int64_t>({want, most, 65535})));
}

// Chunks for a vectorised reduction pass over `segments` groups of `rows` rows: about
// kTargetBlocks blocks, at least vec_sum_rows() (kVecSumRows) rows per lane, and never more
// than reduce_room (what the scratch was sized for) allows.
inline int vec_chunks(int64_t rows, int channels, const VecGeom& g, int segments = 1) {
  const int64_t room = reduce_room(rows, channels, segments);
  const int64_t blocks = int64_t(g.tiles) * segments;
  const int64_t want = (kTargetBlocks + blocks - 1) / blocks;
  const int64_t per = int64_t(g.vy) * vec_sum_rows();
  const int64_t most = std::max<int64_t>(1, (rows + per - 1) / per);
  return int(std::max<int64_t>(1, std::min<int64_t>({room, want, most})));
}

// A vectorised reduction block's K sums of V channels per thread (s[k][q]), its row lanes merged
// pairwise into lane 0's registers (lane l takes lane l + h where l is a multiple of 2h, so any
// number of lanes works), through sh[(k * V + q) * kThreads + thread]; every thread of the block
// must call it, the block at most kThreads threads (vx * vy, vec_geom's) and sh K * V * kThreads
// floats. A fixed order: the same bits every run.
template <int K, int V>
__device__ __forceinline__ void merge_lane_sums(float (&s)[K][V], float* sh, int lane, int vx,
                                                int vy) {
  const int me = threadIdx.x;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int q = 0; q < V; ++q) sh[(k * V + q) * kThreads + me] = s[k][q];
  for (int h = 1; h < vy; h *= 2) {
    __syncthreads();
    if (lane % (2 * h) == 0 && lane + h < vy) {
      const int o = me + h * vx;
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int q = 0; q < V; ++q) {
          s[k][q] += sh[(k * V + q) * kThreads + o];
          sh[(k * V + q) * kThreads + me] = s[k][q];
        }
    }
  }
}

// Whether the vectorised kernels take tensors of `channels` in type t: every stride packed, every
// pointer given 16-byte aligned, and the 16-byte pack dividing the channels.
inline bool vectorisable(DType t, int channels, std::initializer_list<int> lds,
                         std::initializer_list<const void*> ptrs) {
  const int V = 16 / int(dtype_size(t));
  if (channels % V != 0) return false;
  for (int ld : lds)
    if (ld != channels) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

}  // namespace ck
}  // namespace cnnbench
