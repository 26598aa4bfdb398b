#include <mma.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/check.h"
#include "kernels/activation.cuh"
#include "kernels/convert.cuh"
#include "kernels/mma_m16n8k8.cuh"
#include "kernels/stem.h"
#include "kernels/stem_rows.cuh"

namespace cnnbench {

namespace {

constexpr int kLdc = kStemOutputs + 4;  // the float accumulator tile's row stride
constexpr int kMaxTaps = 512;
constexpr int kMaxBlocksPerSm = 3;

// The conv's shape as both kernels take it (by value, as a kernel argument).
struct ShapeArgs {
  int H, W, C, Ho, Wo, R, S, stride, ph, pw, K, wld, ldy;
  Act act;
};

ShapeArgs shape_args(const StemSpec& s) {
  ShapeArgs a{};
  a.H = s.x.h, a.W = s.x.w, a.C = s.x.c, a.Ho = s.y.h, a.Wo = s.y.w;
  a.R = s.kernel, a.S = s.kw(), a.stride = s.stride, a.ph = s.pad, a.pw = s.pw();
  a.K = s.y.c, a.wld = s.wld(), a.ldy = s.ldy();
  a.act = s.act;
  return a;
}

struct StemArgs : ShapeArgs {
  int taps, taps_pad, ldk;
  int64_t M, tiles;
};

StemArgs stem_args(const StemSpec& s, const StemGeometry& g) {
  StemArgs a{};
  static_cast<ShapeArgs&>(a) = shape_args(s);
  a.taps = g.taps, a.taps_pad = g.taps_pad, a.ldk = g.ldk;
  a.M = g.pixels, a.tiles = g.tiles;
  return a;
}

// What each thread of the kernel runs, host and device (stem_emulate runs it on the host).
#define CNN_HD __host__ __device__ __forceinline__

using mma::zero_value;

// The weights into the shared [kStemOutputs][ldk] array ([output][tap], zeros past K and past
// the taps): thread t of the block.
template <typename T>
CNN_HD void stage_weights(const T* w, T* ws, const StemArgs& a, int t) {
  const int rs = a.R * a.S;
  for (int i = t; i < kStemOutputs * a.ldk; i += kStemThreads) {
    const int k = i / a.ldk, tap = i - k * a.ldk;
    float v = 0.0f;
    if (k < a.K && tap < a.taps) {
      const int pos = tap / a.C, c = tap - pos * a.C;  // pos = r * S + s
      v = load_f(w, (int64_t(k) * rs + pos) * a.wld + c);
    }
    store_f(ws, i, v);
  }
}

// Tile `tile`'s windows into the shared [kStemTile][ldk] array ([pixel][tap], tap = (r * S + s)
// * C + c): thread t gathers the window rows r = t / kStemTile, + 2, ... of pixel t % kStemTile,
// zeros outside the image, past the taps and for pixels past M.
template <typename T>
CNN_HD void gather(const T* x, T* as, const StemArgs& a, int64_t tile, int t) {
  const int row = t % kStemTile, part = t / kStemTile;
  constexpr int parts = kStemThreads / kStemTile;
  T* dst = as + int64_t(row) * a.ldk;
  const T zero = zero_value<T>();
  const int64_t m = tile * kStemTile + row;
  if (m >= a.M) {
    for (int i = part; i < a.taps_pad; i += parts) dst[i] = zero;
    return;
  }
  const int64_t hw = int64_t(a.Ho) * a.Wo;
  const int64_t n = m / hw;
  const int rem = int(m - n * hw);
  const int oh = rem / a.Wo, ow = rem - oh * a.Wo;
  const int ih0 = oh * a.stride - a.ph, iw0 = ow * a.stride - a.pw;
  for (int r = part; r < a.R; r += parts) {
    const int ih = ih0 + r;
    const bool row_in = ih >= 0 && ih < a.H;
    const T* src = x + (n * a.H + (row_in ? ih : 0)) * a.W * a.C;
    int tap = r * a.S * a.C;
    for (int s = 0; s < a.S; ++s) {
      const int iw = iw0 + s;
      const bool in = row_in && iw >= 0 && iw < a.W;
      for (int c = 0; c < a.C; ++c, ++tap) dst[tap] = in ? src[int64_t(iw) * a.C + c] : zero;
    }
  }
  if (part == 0)
    for (int i = a.taps; i < a.taps_pad; ++i) dst[i] = zero;
}

template <typename T>
struct alignas(16) Pack8 {
  T v[8];
};

// The tile's float accumulators ([kStemTile][kLdc]) plus the bias, through the activation, into
// y: 8 channels (16 bytes) a thread and step.
template <typename T>
CNN_HD void epilogue(const float* cs, const T* bias, T* y, const StemArgs& a, int64_t tile, int t) {
  constexpr int groups = kStemOutputs / 8;
  for (int i = t; i < kStemTile * groups; i += kStemThreads) {
    const int row = i / groups, k0 = (i - row * groups) * 8;
    const int64_t m = tile * kStemTile + row;
    if (k0 >= a.K || m >= a.M) continue;
    Pack8<T> p;
    for (int j = 0; j < 8; ++j) {
      const float b = bias ? load_f(bias, k0 + j) : 0.0f;
      store_f(p.v, j, activate(a.act, cs[row * kLdc + k0 + j] + b));
    }
    T* dst = y + m * a.ldy + k0;
#ifdef __CUDA_ARCH__
    *reinterpret_cast<Pack8<T>*>(dst) = p;
#else
    std::memcpy(static_cast<void*>(dst), &p, sizeof p);
#endif
  }
}

template <typename T>
__global__ void __launch_bounds__(kStemThreads)
    stem_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                T* __restrict__ y, StemArgs a) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char smem[];
  T* ws = reinterpret_cast<T*>(smem);
  unsigned char* tile_mem = smem + size_t(kStemOutputs) * a.ldk * sizeof(T);
  T* as = reinterpret_cast<T*>(tile_mem);
  float* cs = reinterpret_cast<float*>(tile_mem);  // the accumulators, once the tile is used
  stage_weights(w, ws, a, threadIdx.x);
  const int warp = threadIdx.x / 32, wm = warp % 4, wn = warp / 4;  // a 32x32 piece a warp
  for (int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
    gather(x, as, a, tile, threadIdx.x);
    __syncthreads();
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int kk = 0; kk < a.taps_pad; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb[2];
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(fa[i], as + (wm * 32 + i * 16) * a.ldk + kk, a.ldk);
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(fb[j], ws + (wn * 32 + j * 16) * a.ldk + kk, a.ldk);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();  // every warp is done with the windows before the accumulators overwrite them
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync(cs + (wm * 32 + i * 16) * kLdc + wn * 32 + j * 16, acc[i][j], kLdc,
                                wmma::mem_row_major);
    __syncthreads();
    epilogue(cs, bias, y, a, tile, threadIdx.x);
    __syncthreads();  // before the next tile's windows overwrite the accumulators
  }
}

template <typename T>
void emulate_t(const T* x, const T* w, const T* bias, T* y, const StemArgs& a) {
  std::vector<T> ws(size_t(kStemOutputs) * a.ldk), as(size_t(kStemTile) * a.ldk);
  std::vector<float> cs(size_t(kStemTile) * kLdc);
  for (int t = 0; t < kStemThreads; ++t) stage_weights(w, ws.data(), a, t);
  for (int64_t tile = 0; tile < a.tiles; ++tile) {
    for (int t = 0; t < kStemThreads; ++t) gather(x, as.data(), a, tile, t);
    for (int row = 0; row < kStemTile; ++row)
      for (int k = 0; k < kStemOutputs; ++k) {
        float acc = 0.0f;
        for (int tap = 0; tap < a.taps_pad; ++tap)
          acc += load_f(as.data(), int64_t(row) * a.ldk + tap) *
                 load_f(ws.data(), int64_t(k) * a.ldk + tap);
        cs[size_t(row) * kLdc + k] = acc;
      }
    for (int t = 0; t < kStemThreads; ++t) epilogue(cs.data(), bias, y, a, tile, t);
  }
}

#undef CNN_HD

// ---- The rows variant (StemVariant::Rows) ----
// A tile is up to kRowPix output pixels of one output row (n, oh, ow0..). Its R input rows, from
// the first window's left edge to the last one's right edge, sit in shared memory as they are, in
// the ring of stem_rows.cuh (a block takes a contiguous run of tiles down an image's rows; the
// next tile's new rows are loaded while one computes). NHWC: a pixel's taps of window row r,
// s * C + c, are S * C consecutive elements there, starting stride * C elements after the previous
// pixel's, so the tensor cores' A fragments are read straight from the rows (mma.sync m16n8k8: K
// is each window row's S * C taps padded to KR, a multiple of 8; taps past S * C are masked to
// zero, the weights there are zero too). No window tile is written. 4 warps; warp w takes pixels
// 32w..32w+31 (two m16 tiles) by all K outputs (K / 8 n8 tiles), float accumulators in registers,
// the epilogue from them to y.

constexpr int kRowPix = 128, kRowThreads = 128;
constexpr size_t kRowsMaxSmem = 227u << 10;

struct RowArgs : ShapeArgs {
  int SC, KR, ldw, PW, NT;
  stem_rows::Ring ring;  // the tiles (ring.tiles) and the rows kept in shared memory
};

stem_rows::Ring row_ring(const StemSpec& s, int row_width) {
  return stem_rows::make_ring(s.x.h, s.x.w, s.x.c, s.kernel, s.kw(), s.stride, s.pad, s.pw(), s.y.h,
                              s.y.w, s.y.n, kRowPix, row_width, kRowThreads, false);
}

RowArgs row_args(const StemSpec& s, const StemRowsGeometry& g) {
  RowArgs a{};
  static_cast<ShapeArgs&>(a) = shape_args(s);
  a.SC = g.taps_row, a.KR = g.kr, a.ldw = g.ldw, a.PW = g.row_width, a.NT = s.y.c / 8;
  a.ring = row_ring(s, g.row_width);
  return a;
}

#define CNN_HD __host__ __device__ __forceinline__

// The weights into shared [NT * 8][ldw]: row k holds window row r's taps at r * KR + s * C + c,
// zeros past S * C in each row's KR and past R * KR.
template <typename T>
CNN_HD void rows_stage_weights(const T* w, T* ws, const RowArgs& a, int t) {
  const int rows = a.NT * 8, rs = a.R * a.S;
  for (int i = t; i < rows * a.ldw; i += kRowThreads) {
    const int k = i / a.ldw, col = i - k * a.ldw;
    const int r = col / a.KR, j = col - r * a.KR;
    float v = 0.0f;
    if (r < a.R && j < a.SC) {
      const int sx = j / a.C, c = j - sx * a.C;
      v = load_f(w, (int64_t(k) * rs + r * a.S + sx) * a.wld + c);
    }
    store_f(ws, i, v);
  }
}

using RowTile = stem_rows::Tile;

using mma::Two;

// An A fragment register: pixel p of the tile, the window row that starts at `row` in the ring
// (its slot times PW), taps kk + 2 * q and the next (zero at and past S * C).
template <typename T>
CNN_HD Two<T> rows_a(const T* patch, const RowArgs& a, int p, int row, int kk, int q) {
  const int j = kk + 2 * q;
  const int at = row + p * a.stride * a.C + j;
  const T* src = patch + at;
  const T zero = zero_value<T>();
#ifdef __CUDA_ARCH__
  if (at % 2 == 0) {  // one 32-bit load (PW and j are even: where stride * C is, always)
    Two<T> v = *reinterpret_cast<const Two<T>*>(src);
    if (j >= a.SC) v.lo = zero;
    if (j + 1 >= a.SC) v.hi = zero;
    return v;
  }
#endif
  return {j < a.SC ? src[0] : zero, j + 1 < a.SC ? src[1] : zero};
}

// A B fragment register: output k, window row r, taps kk + 2 * q and the next.
template <typename T>
CNN_HD Two<T> rows_b(const T* ws, const RowArgs& a, int k, int r, int kk, int q) {
  const T* src = ws + k * a.ldw + r * a.KR + kk + 2 * q;  // even: a 32-bit load on the device
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const Two<T>*>(src);
#else
  return {src[0], src[1]};
#endif
}

// Lane (g, q) of warp w's accumulators (m16n8 C fragments: c0 c1 at row g, columns 2q and 2q + 1;
// c2 c3 at row g + 8) plus the bias, through the activation, into y.
template <typename T>
CNN_HD void rows_epilogue(const float (&acc)[2][8][4], const T* bias, T* y, const RowArgs& a,
                          const RowTile& rt, int p0, int g, int q) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int p = p0 + mt * 16 + g + half * 8;
      if (p >= rt.count) continue;
      const int64_t m = (rt.n * a.Ho + rt.oh) * a.Wo + rt.ow0 + p;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (nt >= a.NT) continue;
        const int k = nt * 8 + 2 * q;
        Two<T> v;
        store_f(&v.lo, 0, activate(a.act, acc[mt][nt][2 * half] + (bias ? load_f(bias, k) : 0.0f)));
        store_f(&v.hi, 0,
                activate(a.act, acc[mt][nt][2 * half + 1] + (bias ? load_f(bias, k + 1) : 0.0f)));
#ifdef __CUDA_ARCH__
        *reinterpret_cast<Two<T>*>(y + m * a.ldy + k) = v;
#else
        std::memcpy(static_cast<void*>(y + m * a.ldy + k), &v, sizeof v);
#endif
      }
    }
}

#undef CNN_HD

using mma::mma_16x8x8;
using mma::reg_of;

// The products of warp w's 32 pixels (p0 = 32w) of tile rt by all K outputs, into y.
template <typename T>
__device__ __forceinline__ void rows_tile(const T* patch, const T* ws, const T* bias, T* y,
                                          const RowArgs& a, const RowTile& rt, int p0, int g,
                                          int q) {
  float acc[2][8][4] = {};
  const int ih0 = stem_rows::first_row(a.ring, rt);
  for (int r = 0; r < a.R; ++r) {
    const int row = stem_rows::slot(a.ring, ih0 + r) * a.PW;
    for (int kk = 0; kk < a.KR; kk += 8) {
      uint32_t fa[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        fa[mt][0] = reg_of(rows_a(patch, a, p0 + mt * 16 + g, row, kk, q));
        fa[mt][1] = reg_of(rows_a(patch, a, p0 + mt * 16 + g + 8, row, kk, q));
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (nt < a.NT) {
          const uint32_t b = reg_of(rows_b(ws, a, nt * 8 + g, r, kk, q));
          mma_16x8x8<T>(acc[0][nt], fa[0][0], fa[0][1], b);
          mma_16x8x8<T>(acc[1][nt], fa[1][0], fa[1][1], b);
        }
      }
    }
  }
  rows_epilogue(acc, bias, y, a, rt, p0, g, q);
}

// ResNet's stem (7x7 / 2 over 3 channels into 64 outputs: NT 8, stride * C 6, KR 24, S * C 21)
// with every bound, stride and mask compiled in: rows_tile's fragments in its order (the same
// sums, bit for bit), but no branch in the 21 steps of a tile and each load a register plus a
// constant: an A word is its pixel's taps kk + 2q, kk + 2q + 1 of window row r (masked past 21),
// a B word output nt * 8 + g's. Call 117: rows_tile, a branch and run-time products around every
// load, ran the tile in 17 us where its mma and bytes take a few.
struct ResNetStem {
  static constexpr int NT = 8, STEP = 6, KR = 24, SC = 21, R = 7;
  static constexpr int LDW = 200;  // stem_rows_geometry's weight row for R * KR = 168
  static bool matches(const RowArgs& a) {
    return a.NT == NT && a.stride * a.C == STEP && a.KR == KR && a.SC == SC && a.R == R &&
           a.ldw == LDW;
  }
};

template <typename T>
__device__ __forceinline__ void rows_tile_resnet(const T* patch, const T* ws, const T* bias, T* y,
                                                 const RowArgs& a, const RowTile& rt, int p0, int g,
                                                 int q) {
  using F = ResNetStem;
  float acc[2][8][4] = {};
  const int ih0 = stem_rows::first_row(a.ring, rt);
  const T* wl = ws + g * F::LDW + 2 * q;  // output g's taps 2q, 2q + 1; nt * 8 + g's: + nt * 8 LDW
  const int pa = (p0 + g) * F::STEP + 2 * q;  // pixel p0 + g's taps 2q, 2q + 1 in a row
  // The last kk (16): taps 16 + 2q and 17 + 2q, zero from 21 on (rows_a's masks).
  const uint32_t last = q <= 1 ? 0xFFFFFFFFu : q == 2 ? 0x0000FFFFu : 0u;
#pragma unroll 1  // the 7 rows unrolled spilled 16 to 52 bytes at 128 registers
  for (int r = 0; r < F::R; ++r) {
    const T* arow = patch + stem_rows::slot(a.ring, ih0 + r) * a.PW + pa;
#pragma unroll
    for (int kk = 0; kk < F::KR; kk += 8) {
      const uint32_t m = kk + 8 < F::KR ? 0xFFFFFFFFu : last;
      uint32_t fa[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        fa[mt][0] = *reinterpret_cast<const uint32_t*>(arow + mt * 16 * F::STEP + kk) & m;
        fa[mt][1] = *reinterpret_cast<const uint32_t*>(arow + (mt * 16 + 8) * F::STEP + kk) & m;
      }
#pragma unroll
      for (int nt = 0; nt < F::NT; ++nt) {
        const uint32_t b =
            *reinterpret_cast<const uint32_t*>(wl + nt * 8 * F::LDW + r * F::KR + kk);
        mma_16x8x8<T>(acc[0][nt], fa[0][0], fa[0][1], b);
        mma_16x8x8<T>(acc[1][nt], fa[1][0], fa[1][1], b);
      }
    }
  }
  rows_epilogue(acc, bias, y, a, rt, p0, g, q);
}

// A block takes tiles [lo, hi) in order; while tile k computes, tile k + 1's new rows (where it is
// the row below) are in registers, stored into the ring's free slots after k's products.
// kResNet: the tiles by rows_tile_resnet (a launch where StemRowsGeometry::resnet).
template <typename T, bool kResNet>
__global__ void __launch_bounds__(kRowThreads, 4)
    stem_rows_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                     T* __restrict__ y, RowArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  T* ws = reinterpret_cast<T*>(smem);
  T* patch = ws + size_t(a.NT) * 8 * a.ldw;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  const int p0 = warp * 32;
  const stem_rows::Ring& ring = a.ring;
  const int64_t lo = stem_rows::first_tile(ring, gridDim.x, blockIdx.x),
                hi = stem_rows::first_tile(ring, gridDim.x, blockIdx.x + 1);
  if (lo >= hi) return;  // more blocks than tiles
  rows_stage_weights(w, ws, a, tid);
  RowTile rt = stem_rows::tile_at(ring, lo);
  stem_rows::fill_all(x, patch, ring, rt, tid);
  for (int64_t k = lo; k < hi; ++k) {
    const bool more = k + 1 < hi, succ = more && stem_rows::successor(ring, k);
    const RowTile next = more ? stem_rows::tile_at(ring, k + 1) : rt;
    stem_rows::NewRows<T> pre;
    if (succ) stem_rows::load_new(x, pre, ring, next, tid);
    __syncthreads();      // the weights staged; tile k's rows in place
    if (p0 < rt.count) {  // else no pixels here
      if constexpr (kResNet)
        rows_tile_resnet(patch, ws, bias, y, a, rt, p0, g, q);
      else
        rows_tile(patch, ws, bias, y, a, rt, p0, g, q);
    }
    if (succ) stem_rows::store_new(patch, pre, ring, next, tid);  // slots tile k does not read
    __syncthreads();  // every warp done with tile k's rows
    if (more && !succ) stem_rows::fill_all(x, patch, ring, next, tid);
    rt = next;
  }
}

// The rows kernel's threads on the host: the staging, the fill, the fragments each lane loads
// and the epilogue are the kernel's own code; the m16n8k8 product is done in float from the
// lanes' fragments as the PTX ISA lays them out (A: a0 row g, a1 row g + 8, columns 2q and
// 2q + 1; B: rows 2q and 2q + 1 of column g; C: c0 c1 row g, c2 c3 row g + 8, columns 2q, 2q + 1).
template <typename T>
void emulate_rows_t(const T* x, const T* w, const T* bias, T* y, const RowArgs& a) {
  const stem_rows::Ring& ring = a.ring;
  std::vector<T> ws(size_t(a.NT) * 8 * a.ldw), patch(size_t(ring.slots) * a.PW);
  for (int t = 0; t < kRowThreads; ++t) rows_stage_weights(w, ws.data(), a, t);
  float acc[32][2][8][4];
  // Two blocks (the output does not depend on how many: each pixel is one tile's), so that the
  // ring's paths all run: down the rows, across an image's or a segment's end, a block's start.
  const int blocks = int(std::min<int64_t>(a.ring.tiles, 2));
  for (int blk = 0; blk < blocks; ++blk) {
    const int64_t lo = stem_rows::first_tile(ring, blocks, blk),
                  hi = stem_rows::first_tile(ring, blocks, blk + 1);
    for (int t = 0; t < kRowThreads; ++t)
      stem_rows::fill_all(x, patch.data(), ring, stem_rows::tile_at(ring, lo), t);
    for (int64_t tile = lo; tile < hi; ++tile) {
      const RowTile rt = stem_rows::tile_at(ring, tile);
      const int ih0 = stem_rows::first_row(ring, rt);
      for (int warp = 0; warp < kRowThreads / 32; ++warp) {
        const int p0 = warp * 32;
        if (p0 >= rt.count) continue;
        std::memset(acc, 0, sizeof acc);
        for (int r = 0; r < a.R; ++r) {
          const int row = stem_rows::slot(ring, ih0 + r) * a.PW;
          for (int kk = 0; kk < a.KR; kk += 8)
            for (int nt = 0; nt < a.NT; ++nt)
              for (int mt = 0; mt < 2; ++mt) {
                Two<T> a0[32], a1[32], b[32];
                float c[32][4];
                for (int lane = 0; lane < 32; ++lane) {
                  const int g = lane / 4, q = lane % 4;
                  a0[lane] = rows_a(patch.data(), a, p0 + mt * 16 + g, row, kk, q);
                  a1[lane] = rows_a(patch.data(), a, p0 + mt * 16 + g + 8, row, kk, q);
                  b[lane] = rows_b(ws.data(), a, nt * 8 + g, r, kk, q);
                  std::memcpy(c[lane], acc[lane][mt][nt], sizeof c[lane]);
                }
                mma::emulate_mma_16x8x8(c, a0, a1, b);
                for (int lane = 0; lane < 32; ++lane)
                  std::memcpy(acc[lane][mt][nt], c[lane], sizeof c[lane]);
              }
        }
        for (int lane = 0; lane < 32; ++lane)
          rows_epilogue(acc[lane], bias, y, a, rt, p0, lane / 4, lane % 4);
      }
      if (tile + 1 >= hi) break;
      const RowTile next = stem_rows::tile_at(ring, tile + 1);
      for (int t = 0; t < kRowThreads; ++t) {
        if (stem_rows::successor(ring, tile)) {
          stem_rows::NewRows<T> pre;
          stem_rows::load_new(x, pre, ring, next, t);
          stem_rows::store_new(patch.data(), pre, ring, next, t);
        } else {
          stem_rows::fill_all(x, patch.data(), ring, next, t);
        }
      }
    }
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

using stem_rows::raise_smem_once;

template <typename T>
void launch_t(const void* x, const void* w, const void* bias, void* y, const StemArgs& a,
              size_t smem, int grid, cudaStream_t stream) {
  raise_smem_once<stem_kernel<T>>();
  stem_kernel<T>
      <<<grid, kStemThreads, smem, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                             static_cast<const T*>(bias), static_cast<T*>(y), a);
  CNN_CHECK_CUDA(cudaGetLastError());
}

template <typename T, bool kResNet>
void launch_rows_k(const void* x, const void* w, const void* bias, void* y, const RowArgs& a,
                   size_t smem, int grid, cudaStream_t stream) {
  const int device = raise_smem_once<stem_rows_kernel<T, kResNet>>();
  if (grid <= 0) {  // persistent blocks: as many as are resident at once (registers, shared memory)
    // Asked once per device and shared-memory size: eager launches pay no occupancy query.
    static std::mutex mu;  // one map a kernel: each instantiation has its own
    static std::map<std::pair<int, size_t>, int> resident;
    std::lock_guard<std::mutex> lock(mu);
    auto it = resident.find({device, smem});
    if (it == resident.end()) {
      int sms = 0, per_sm = 0;
      CNN_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      CNN_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, stem_rows_kernel<T, kResNet>, kRowThreads, smem));
      it = resident.emplace(std::make_pair(device, smem), sms * std::max(per_sm, 1)).first;
    }
    grid = int(std::min<int64_t>(a.ring.tiles, it->second));
  }
  grid = int(std::min<int64_t>(grid, a.ring.tiles));  // a block a tile at most
  stem_rows_kernel<T, kResNet>
      <<<grid, kRowThreads, smem, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                            static_cast<const T*>(bias), static_cast<T*>(y), a);
  CNN_CHECK_CUDA(cudaGetLastError());
}

template <typename T>
void launch_rows_t(const void* x, const void* w, const void* bias, void* y, const RowArgs& a,
                   size_t smem, int grid, bool resnet, cudaStream_t stream) {
  if (resnet)  // StemRowsGeometry::resnet
    launch_rows_k<T, true>(x, w, bias, y, a, smem, grid, stream);
  else
    launch_rows_k<T, false>(x, w, bias, y, a, smem, grid, stream);
}

}  // namespace

StemGeometry stem_geometry(const StemSpec& s) {
  auto no = [](const std::string& why) { throw std::invalid_argument("stem kernel: " + why); };
  if (s.x.c < 1 || s.x.c > 8)
    no("the input has " + std::to_string(s.x.c) + " channels, not 1 to 8");
  if (s.y.c < 8 || s.y.c > kStemOutputs || s.y.c % 8)
    no(std::to_string(s.y.c) + " outputs, not a multiple of 8 up to " +
       std::to_string(kStemOutputs));
  if (s.ldy() % 8 || s.ldy() < s.y.c) no("y's row stride is not a multiple of 8 at least K");
  if (s.wld() < s.x.c) no("the weights' rows are narrower than the input's channels");
  if (s.kernel < 1 || s.kw() < 1 || s.stride < 1 || s.pad < 0 || s.pw() < 0)
    no("a kernel, stride or pad out of range");
  if (s.x.n != s.y.n || s.y.h != (s.x.h + 2 * s.pad - s.kernel) / s.stride + 1 ||
      s.y.w != (s.x.w + 2 * s.pw() - s.kw()) / s.stride + 1 || s.y.h < 1 || s.y.w < 1)
    no("y is not what the kernel, stride and pads give");
  StemGeometry g;
  g.taps = s.kernel * s.kw() * s.x.c;
  if (g.taps > kMaxTaps) no(std::to_string(g.taps) + " taps, over " + std::to_string(kMaxTaps));
  g.taps_pad = (g.taps + 15) / 16 * 16;
  g.ldk = g.taps_pad + 8;
  g.pixels = int64_t(s.y.n) * s.y.h * s.y.w;
  g.tiles = (g.pixels + kStemTile - 1) / kStemTile;
  const size_t elem = 2;  // fp16 and bf16
  g.smem = size_t(kStemOutputs) * g.ldk * elem +
           std::max(size_t(kStemTile) * g.ldk * elem, size_t(kStemTile) * kLdc * sizeof(float));
  return g;
}

const char* stem_variant_name(StemVariant v) {
  return v == StemVariant::Rows ? "rows" : "tile";
}

StemRowsGeometry stem_rows_geometry(const StemSpec& s) {
  stem_geometry(s);  // the limits both kernels share (channels, outputs, strides, y's shape)
  StemRowsGeometry g;
  g.taps_row = s.kw() * s.x.c;
  g.kr = (g.taps_row + 7) / 8 * 8;
  // Weight rows of R * KR taps, padded so that a B fragment's 8 rows (words ldw / 2 apart) and
  // 4 lanes fall in 32 different banks: ldw / 2 = 4 (mod 32).
  g.ldw = s.kernel * g.kr;
  while (g.ldw % 64 != 8) g.ldw += 2;
  // An input row as the tile's pixels read it: the last pixel's window starts
  // (kRowPix - 1) * stride * C elements in and its fragments read KR taps; even, for alignment.
  g.row_width = (kRowPix - 1) * s.stride * s.x.c + g.kr;
  g.row_width += g.row_width % 2;
  const stem_rows::Ring ring = row_ring(s, g.row_width);
  g.ring_rows = ring.slots;
  g.tiles = ring.tiles;
  const size_t elem = 2;  // fp16 and bf16
  g.smem = (size_t(s.y.c) * g.ldw + size_t(g.ring_rows) * g.row_width) * elem;
  if (g.smem > kRowsMaxSmem)
    throw std::invalid_argument("stem kernel (rows): " + std::to_string(g.smem) +
                                " bytes of shared memory, over " + std::to_string(kRowsMaxSmem));
  g.resnet = ResNetStem::matches(row_args(s, g));
  return g;
}

StemSpec stem_spec(const ConvSpec& s, int real_c) {
  StemSpec t;
  t.x = s.x;
  t.x.c = real_c;
  t.y = s.y;
  t.kernel = s.kernel, t.kernel_w = s.kw(), t.stride = s.stride, t.pad = s.pad, t.pad_w = s.pw();
  t.w_ld = s.x.c;
  t.ld_y = s.ldy();
  t.act = s.act;
  return t;
}

bool stem_eligible(const ConvSpec& s, int real_c, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (s.precision != Precision::FP16 && s.precision != Precision::BF16)
    return no("fp16 and bf16 only");
  if (s.groups != 1) return no("grouped");
  if (s.dilation != 1) return no("dilated");
  if (s.residual || s.residual_after_act) return no("adds a residual");
  if (real_c > s.x.c) return no("the image is wider than the conv's input");
  try {
    stem_geometry(stem_spec(s, real_c));
  } catch (const std::invalid_argument& e) {
    return no(e.what());
  }
  return true;
}

bool stem_aligned(const void* image, const ConvBuffers& b) {
  return aligned16(image) && aligned16(b.w) && (!b.bias || aligned16(b.bias)) && aligned16(b.y);
}

using stem_rows::by_half_type;

void launch_stem(DType t, const void* x, const void* w, const void* bias, void* y,
                 const StemSpec& s, int grid, cudaStream_t stream, StemVariant variant) {
  if (!aligned16(x) || !aligned16(w) || !aligned16(y) || (bias && !aligned16(bias)))
    throw std::invalid_argument("launch_stem: a buffer is not 16-byte aligned");
  if (variant == StemVariant::Rows) {
    const StemRowsGeometry g = stem_rows_geometry(s);
    if (g.tiles == 0) return;
    const RowArgs a = row_args(s, g);
    by_half_type(t, "launch_stem", [&](auto tag) {
      launch_rows_t<decltype(tag)>(x, w, bias, y, a, g.smem, grid, g.resnet, stream);
    });
    return;
  }
  const StemGeometry g = stem_geometry(s);
  if (g.tiles == 0) return;
  if (grid <= 0) {
    int device = 0, sms = 0;
    CNN_CHECK_CUDA(cudaGetDevice(&device));
    CNN_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int per_sm =
        int(std::clamp<size_t>((228u << 10) / (g.smem + (1u << 10)), 1, size_t(kMaxBlocksPerSm)));
    grid = int(std::min<int64_t>(g.tiles, int64_t(sms) * per_sm));
  }
  const StemArgs a = stem_args(s, g);
  by_half_type(t, "launch_stem",
               [&](auto tag) { launch_t<decltype(tag)>(x, w, bias, y, a, g.smem, grid, stream); });
}

void stem_emulate(DType t, const void* x, const void* w, const void* bias, void* y,
                  const StemSpec& s, StemVariant variant) {
  by_half_type(t, "stem_emulate", [&](auto tag) {
    using T = decltype(tag);
    const T *xt = static_cast<const T*>(x), *wt = static_cast<const T*>(w),
            *bt = static_cast<const T*>(bias);
    T* yt = static_cast<T*>(y);
    if (variant == StemVariant::Rows)
      emulate_rows_t(xt, wt, bt, yt, row_args(s, stem_rows_geometry(s)));
    else
      emulate_t(xt, wt, bt, yt, stem_args(s, stem_geometry(s)));
  });
}

}  // namespace cnnbench
