#include "kernels/stem_wgrad.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/mma_m16n8k8.cuh"
#include "kernels/stem_rows.cuh"

namespace cnnbench {

namespace {

using mma::Two;
using mma::zero_value;

constexpr int kMaxMTiles = 4;     // K up to 64
constexpr int kTilesPerWarp = 6;  // column tiles a warp: up to 24 in all
constexpr int kWarps = kStemWgradThreads / 32;

using stem_rows::Ring;
using WgTile = stem_rows::Tile;

struct WgArgs {
  Ring ring;  // the image, the conv's shape, the tiles and the rows (stem_rows.cuh)
  int K, SC, KR, cols, MT, NT;
  int cpr;  // dy's 16-byte chunks a pixel (K / 8: 2, 4 or 8)
  int swz;  // log2(8 / cpr): pixels that share a 128-byte line of dy's buffer
};

Ring wg_ring(const StemWgradSpec& s, int row_width) {
  return stem_rows::make_ring(s.x.h, s.x.w, s.x.c, s.kernel, s.kw(), s.stride, s.pad, s.pw(), s.y.h,
                              s.y.w, s.x.n, kStemWgradPix, row_width, kStemWgradThreads, true);
}

WgArgs wg_args(const StemWgradSpec& s, const StemWgradGeometry& g) {
  WgArgs a{};
  a.ring = wg_ring(s, g.row_width);
  a.K = s.y.c, a.SC = g.taps_row, a.KR = g.kr, a.cols = g.cols;
  a.MT = s.y.c / 16, a.NT = g.cols / 8, a.cpr = s.y.c / 8;
  a.swz = a.cpr == 8 ? 0 : a.cpr == 4 ? 1 : 2;
  return a;
}

#define CNN_HD __host__ __device__ __forceinline__

// dy's rows of a tile in shared memory as they are in dy ([pixel][K]), 16 bytes (8 channels) a
// chunk, chunk c of pixel p at chunk c XOR ((p >> swz) mod cpr), where 2^swz pixels share a
// 128-byte line: the 8 pixels an ldmatrix reads at one chunk then sit in 8 different 16-byte bank
// groups for K = 16, 32 and 64 alike.
CNN_HD int wg_dy_at(const WgArgs& a, int p, int c) {
  return p * a.K + ((c ^ ((p >> a.swz) & (a.cpr - 1))) << 3);
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return unsigned(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Tile t's dy into buf: 8 channels a copy (cp.async on the device, 16 bytes, zeros for the pixels
// from count on), every pixel slot of the tile, kStemWgradPix of them.
template <typename T>
CNN_HD void wg_copy_dy(const T* dy, T* buf, const WgArgs& a, const WgTile& t, int tid) {
  const int64_t base = ((t.n * a.ring.Ho + t.oh) * a.ring.Wo + t.ow0) * int64_t(a.K);
  for (int e = tid; e < kStemWgradPix * a.cpr; e += kStemWgradThreads) {
    const int p = e / a.cpr, c = e - p * a.cpr;  // cpr a power of 2: a shift
    const bool valid = p < t.count;
    const T* src = dy + (valid ? base + int64_t(p) * a.K + c * 8 : 0);
    T* dst = buf + wg_dy_at(a, p, c);
#ifdef __CUDA_ARCH__
    cp_async16(dst, src, valid);
#else
    for (int i = 0; i < 8; ++i) dst[i] = valid ? src[i] : mma::zero_value<T>();
#endif
  }
}

// The A fragment register ldmatrix.trans gives lane (g, q) for output k (16 mt + g, or + 8) and
// pixels p, p + 1 (p = p0 + 2q): the host's form, reading buf as the device's ldmatrix does.
template <typename T>
CNN_HD Two<T> wg_a(const T* buf, const WgArgs& a, int k, int p) {
  return {buf[wg_dy_at(a, p, k >> 3) + (k & 7)], buf[wg_dy_at(a, p + 1, k >> 3) + (k & 7)]};
}

// Where a B fragment's column col (window row col / KR, tap col % KR of it) lies: its window row
// and its element in that row, or -1 at taps past S * C (zeros); the same for every tile.
CNN_HD void wg_b_col(const WgArgs& a, int col, int* r, int* j) {
  *r = col / a.KR;
  const int tap = col - *r * a.KR;
  *j = tap < a.SC ? tap : -1;
}

// The column's start in the ring for the tile whose first input row is ih0, or -1 (zeros).
CNN_HD int wg_b_offset(const WgArgs& a, int ih0, int r, int j) {
  return j < 0 ? -1 : stem_rows::slot(a.ring, ih0 + r) * a.ring.PW + j;
}

// A B fragment register: the column at `off` (wg_b_offset), pixels p and p + 1.
template <typename T>
CNN_HD Two<T> wg_b(const T* rows, const WgArgs& a, int off, int p) {
  if (off < 0) return {zero_value<T>(), zero_value<T>()};
  const int step = a.ring.stride * a.ring.C;  // one pixel to the next
  const T* src = rows + off + p * step;
  return {src[0], src[step]};
}

// Lane (g, q) of warp w's accumulators into the block's partial sums [K][cols]: column tile
// nt = w + 4 * jt, m tile mt (c0 c1 at row 16 mt + g, columns 8 nt + 2q and the next; c2 c3 at
// row + 8).
CNN_HD void wg_store_partial(const float (&acc)[kMaxMTiles][kTilesPerWarp][4], float* part,
                             const WgArgs& a, int warp, int g, int q) {
#pragma unroll
  for (int mt = 0; mt < kMaxMTiles; ++mt)
#pragma unroll
    for (int jt = 0; jt < kTilesPerWarp; ++jt) {
      const int nt = warp + kWarps * jt;
      if (mt >= a.MT || nt >= a.NT) continue;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int k = mt * 16 + g + (i / 2) * 8, col = nt * 8 + 2 * q + i % 2;
        part[int64_t(k) * a.cols + col] = acc[mt][jt][i];
      }
    }
}

// dW's elements (KRSC).
CNN_HD int wg_dw_count(const WgArgs& a) {
  return a.K * a.ring.R * a.ring.S * a.ring.C;
}

// The reduce's block: kRedElems elements of dw by kRedLanes lanes; lane l adds the partial sums
// of blocks l, l + kRedLanes, ... in that order, then the lanes' sums are added pairwise (l and
// l + 4, l and l + 2, l and l + 1). A fixed order: the same sums on every run and every card.
constexpr int kRedElems = 32, kRedLanes = 8;

// Lane l's sum for dw's element e (KRSC: k, r, s, c).
CNN_HD float wg_reduce_lane(const float* part, const WgArgs& a, int blocks, int e, int l) {
  const int C = a.ring.C, S = a.ring.S, R = a.ring.R;
  const int c = e % C, s = e / C % S, r = e / (C * S) % R, k = e / (C * S * R);
  const int64_t at = int64_t(k) * a.cols + r * a.KR + s * C + c;
  const int64_t plane = int64_t(a.K) * a.cols;
  float sum = 0.0f;
#pragma unroll 4
  for (int b = l; b < blocks; b += kRedLanes) sum += part[b * plane + at];
  return sum;
}

// The lanes' sums combined pairwise (v[l] for l < kRedLanes, in place; v[0] the result).
CNN_HD void wg_reduce_tree(float* v, int l, int half) {
  if (l < half) v[l] += v[l + half];
}

#undef CNN_HD

// A warp's products for one tile: its kTilesPerWarp column tiles by the MT m tiles, 8 pixels a
// step, a full tile's 14 steps unrolled by 2. The fragments are wg_a's and wg_b's (A by
// ldmatrix.trans: lane l gives the address of pixel p0 + l % 8 at chunk 2 mt + l / 8, x4 two m
// tiles a load, x2 the one of K = 16), with no branch in the steps: a warp's column tiles past NT
// and the columns past S * C (wg_b_offset's -1) read where column 0 reads and are masked to zeros
// (their products are never stored, or add zeros, as before); the A addresses move by a constant
// (p0 is a multiple of 8, so a lane's swizzle does not change) and the B places by
// p0 * stride * C. Call 116's loop (a branch around every mma and load: 255 PTX instructions for
// 24 mma) ran 18 us a tile where its mma, loads and bytes take 2 to 4.
template <typename T, int MT, int STEP>
__device__ __forceinline__ void wg_products(const T* cur, const T* rows, const WgArgs& a, int ih0,
                                            const int (&br)[kTilesPerWarp],
                                            const int (&bj)[kTilesPerWarp], int warp, int lane,
                                            int count, float (&acc)[kMaxMTiles][kTilesPerWarp][4]) {
  // STEP: stride * C where it is compiled in (6: ResNet's stem, then every B load of an unrolled
  // tile is a register plus a constant), 0 where it is read at run time.
  const int q = lane % 4, step = STEP > 0 ? STEP : a.ring.stride * a.ring.C;
  int boff[kTilesPerWarp];
  uint32_t keep[kTilesPerWarp];
  const int col0 = wg_b_offset(a, ih0, 0, 0);  // column 0's: a masked column reads where it reads
#pragma unroll
  for (int jt = 0; jt < kTilesPerWarp; ++jt) {
    const int off = wg_b_offset(a, ih0, br[jt], bj[jt]);
    const bool valid = warp + kWarps * jt < a.NT && off >= 0;
    boff[jt] = (valid ? off : col0) + 2 * q * step;
    keep[jt] = valid ? 0xFFFFFFFFu : 0u;
  }
  // Lane l's ldmatrix row at p0 = 0: pixel l % 8, chunk 2 mt + l / 8 (x4: two m tiles a load).
  unsigned at[MT > 1 ? MT / 2 : 1];
  const unsigned char* b8 = reinterpret_cast<const unsigned char*>(cur);
#pragma unroll
  for (int mp = 0; mp < (MT > 1 ? MT / 2 : 1); ++mp)
    at[mp] =
        smem_addr(b8 + 2 * wg_dy_at(a, lane & 7, MT > 1 ? 4 * mp + (lane >> 3) : (lane >> 3) & 1));
  auto one_step = [&](int p0) {
    uint32_t fa[kMaxMTiles][2];
    const unsigned da = unsigned(p0) * (16u * MT) * 2u;  // p0 pixels of K = 16 MT, 2 bytes each
    if (MT == 1) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                   : "=r"(fa[0][0]), "=r"(fa[0][1])
                   : "r"(at[0] + da));
    } else {
#pragma unroll
      for (int mp = 0; mp < MT / 2; ++mp)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(fa[2 * mp][0]), "=r"(fa[2 * mp][1]), "=r"(fa[2 * mp + 1][0]),
                       "=r"(fa[2 * mp + 1][1])
                     : "r"(at[mp] + da));
    }
    const int ps = p0 * step;
#pragma unroll
    for (int jt = 0; jt < kTilesPerWarp; ++jt) {
      const T* src = rows + boff[jt] + ps;
      const uint32_t b = mma::reg_of(Two<T>{src[0], src[step]}) & keep[jt];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma::mma_16x8x8<T>(acc[mt][jt], fa[mt][0], fa[mt][1], b);
    }
  };
  if (count == kStemWgradPix) {
#pragma unroll 2  // fully unrolled, ResNet's kernel spilled 36 bytes at 168 registers
    for (int p0 = 0; p0 < kStemWgradPix; p0 += 8) one_step(p0);
  } else {
    for (int p0 = 0; p0 < count; p0 += 8) one_step(p0);
  }
}

// A block takes tiles [lo, hi) in order, two of dy's tile buffers in turn: while tile k computes,
// tile k + 1's dy is in flight (cp.async) and, where k + 1 is the row below, its new input rows
// are in registers, stored into the ring's free slots once k's products are issued. MT: K / 16;
// STEP: wg_products'.
template <typename T, int MT, int STEP>
__global__ void __launch_bounds__(kStemWgradThreads, 3)
    stem_wgrad_kernel(const T* __restrict__ x, const T* __restrict__ dy, float* __restrict__ part,
                      WgArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* const buf0 = reinterpret_cast<T*>(smem);
  T* const rows = buf0 + 2 * kStemWgradPix * a.K;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  float acc[kMaxMTiles][kTilesPerWarp][4];
#pragma unroll
  for (int mt = 0; mt < kMaxMTiles; ++mt)
#pragma unroll
    for (int jt = 0; jt < kTilesPerWarp; ++jt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][jt][i] = 0.0f;
  int br[kTilesPerWarp], bj[kTilesPerWarp];
#pragma unroll
  for (int jt = 0; jt < kTilesPerWarp; ++jt)
    wg_b_col(a, (warp + kWarps * jt) * 8 + g, &br[jt], &bj[jt]);
  const int64_t lo = stem_rows::first_tile(a.ring, gridDim.x, blockIdx.x),
                hi = stem_rows::first_tile(a.ring, gridDim.x, blockIdx.x + 1);
  WgTile t = stem_rows::tile_at(a.ring, lo);
  stem_rows::fill_all(x, rows, a.ring, t, tid);
  wg_copy_dy(dy, buf0, a, t, tid);
  cp_async_commit();
  for (int64_t k = lo; k < hi; ++k) {
    T* const cur = buf0 + (int(k - lo) & 1) * kStemWgradPix * a.K;
    T* const next = buf0 + (int(k - lo + 1) & 1) * kStemWgradPix * a.K;
    const bool more = k + 1 < hi, succ = more && stem_rows::successor(a.ring, k);
    WgTile tn = t;
    stem_rows::NewRows<T> pre;
    if (more) {
      tn = stem_rows::tile_at(a.ring, k + 1);
      wg_copy_dy(dy, next, a, tn, tid);  // next was read by tile k - 1: the barrier below it
      cp_async_commit();
      if (succ) stem_rows::load_new(x, pre, a.ring, tn, tid);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile k's dy and rows in place
    wg_products<T, MT, STEP>(cur, rows, a, stem_rows::first_row(a.ring, t), br, bj, warp, lane,
                             t.count, acc);
    if (succ) stem_rows::store_new(rows, pre, a.ring, tn, tid);  // slots tile k does not read
    __syncthreads();  // every warp done with tile k's dy buffer and rows
    if (more && !succ) stem_rows::fill_all(x, rows, a.ring, tn, tid);
    t = tn;
  }
  wg_store_partial(acc, part + int64_t(blockIdx.x) * a.K * a.cols, a, warp, g, q);
}

__global__ void __launch_bounds__(kRedElems* kRedLanes)
    stem_wgrad_reduce(const float* __restrict__ part, float* __restrict__ dw, WgArgs a, int blocks,
                      bool accumulate) {
  __shared__ float sh[kRedElems][kRedLanes];
  const int total = wg_dw_count(a);
  const int i = threadIdx.x / kRedLanes, l = threadIdx.x % kRedLanes;
  const int e = blockIdx.x * kRedElems + i;
  sh[i][l] = e < total ? wg_reduce_lane(part, a, blocks, e, l) : 0.0f;
  for (int half = kRedLanes / 2; half > 0; half /= 2) {
    __syncthreads();
    wg_reduce_tree(sh[i], l, half);
  }
  if (l == 0 && e < total) dw[e] = accumulate ? dw[e] + sh[i][0] : sh[i][0];
}

// The kernels' threads on the host, block by block in order, the lanes' fragments multiplied by
// mma::emulate_mma_16x8x8: the same tiles a block, the same ring of rows (filled whole or a
// successor's new rows, as the kernel decides) and the same dy layout as the device's.
template <typename T>
void emulate_t(const T* x, const T* dy, float* dw, const WgArgs& a, int blocks, bool accumulate) {
  std::vector<T> rows(size_t(a.ring.slots) * a.ring.PW), buf(size_t(kStemWgradPix) * a.K);
  std::vector<float> part(size_t(blocks) * a.K * a.cols, 0.0f);
  static float acc[kWarps][32][kMaxMTiles][kTilesPerWarp][4];
  for (int blk = 0; blk < blocks; ++blk) {
    std::memset(acc, 0, sizeof acc);
    const int64_t lo = stem_rows::first_tile(a.ring, blocks, blk),
                  hi = stem_rows::first_tile(a.ring, blocks, blk + 1);
    for (int tid = 0; tid < kStemWgradThreads; ++tid)
      stem_rows::fill_all(x, rows.data(), a.ring, stem_rows::tile_at(a.ring, lo), tid);
    for (int64_t tile = lo; tile < hi; ++tile) {
      const WgTile t = stem_rows::tile_at(a.ring, tile);
      for (int tid = 0; tid < kStemWgradThreads; ++tid) wg_copy_dy(dy, buf.data(), a, t, tid);
      const int ih0 = stem_rows::first_row(a.ring, t);
      for (int p0 = 0; p0 < t.count; p0 += 8)
        for (int warp = 0; warp < kWarps; ++warp)
          for (int jt = 0; jt < kTilesPerWarp; ++jt) {
            const int nt = warp + kWarps * jt;
            if (nt >= a.NT) continue;
            for (int mt = 0; mt < a.MT; ++mt) {
              Two<T> a0[32], a1[32], b[32];
              float c[32][4];
              for (int lane = 0; lane < 32; ++lane) {
                const int g = lane / 4, q = lane % 4;
                int br, bj;
                wg_b_col(a, nt * 8 + g, &br, &bj);
                a0[lane] = wg_a(buf.data(), a, mt * 16 + g, p0 + 2 * q);
                a1[lane] = wg_a(buf.data(), a, mt * 16 + g + 8, p0 + 2 * q);
                b[lane] = wg_b(rows.data(), a, wg_b_offset(a, ih0, br, bj), p0 + 2 * q);
                std::memcpy(c[lane], acc[warp][lane][mt][jt], sizeof c[lane]);
              }
              mma::emulate_mma_16x8x8(c, a0, a1, b);
              for (int lane = 0; lane < 32; ++lane)
                std::memcpy(acc[warp][lane][mt][jt], c[lane], sizeof c[lane]);
            }
          }
      if (tile + 1 >= hi) break;
      const WgTile tn = stem_rows::tile_at(a.ring, tile + 1);
      for (int tid = 0; tid < kStemWgradThreads; ++tid) {
        if (stem_rows::successor(a.ring, tile)) {
          stem_rows::NewRows<T> pre;
          stem_rows::load_new(x, pre, a.ring, tn, tid);
          stem_rows::store_new(rows.data(), pre, a.ring, tn, tid);
        } else {
          stem_rows::fill_all(x, rows.data(), a.ring, tn, tid);
        }
      }
    }
    for (int warp = 0; warp < kWarps; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        wg_store_partial(acc[warp][lane], part.data() + size_t(blk) * a.K * a.cols, a, warp,
                         lane / 4, lane % 4);
  }
  const int total = wg_dw_count(a);
  for (int e = 0; e < total; ++e) {
    float v[kRedLanes];
    for (int l = 0; l < kRedLanes; ++l) v[l] = wg_reduce_lane(part.data(), a, blocks, e, l);
    for (int half = kRedLanes / 2; half > 0; half /= 2)
      for (int l = 0; l < kRedLanes; ++l) wg_reduce_tree(v, l, half);
    dw[e] = accumulate ? dw[e] + v[0] : v[0];
  }
}

template <typename T, int MT, int STEP>
void wg_launch(const StemWgradGeometry& g, const WgArgs& a, const T* x, const T* dy, float* part,
               cudaStream_t stream) {
  if (g.smem > (48u << 10)) stem_rows::raise_smem_once<stem_wgrad_kernel<T, MT, STEP>>();
  stem_wgrad_kernel<T, MT, STEP><<<g.blocks, kStemWgradThreads, g.smem, stream>>>(x, dy, part, a);
}

template <typename T, int MT>
void wg_launch_step(const StemWgradGeometry& g, const WgArgs& a, const T* x, const T* dy,
                    float* part, cudaStream_t stream) {
  if (a.ring.stride * a.ring.C == 6)
    wg_launch<T, MT, 6>(g, a, x, dy, part, stream);
  else
    wg_launch<T, MT, 0>(g, a, x, dy, part, stream);
}

}  // namespace

StemWgradGeometry stem_wgrad_geometry(const StemWgradSpec& s) {
  const int C = s.x.c, K = s.y.c, R = s.kernel, S = s.kw();
  auto bad = [](const std::string& why) {
    throw std::invalid_argument("stem weight gradient: " + why);
  };
  if (C < 1 || C > 8) bad("the image has " + std::to_string(C) + " channels (1 to 8)");
  if (K != 16 && K != 32 && K != 64) bad(std::to_string(K) + " outputs (16, 32 or 64)");
  if (R < 1 || S < 1 || s.stride < 1 || s.pad < 0 || s.pw() < 0) bad("kernel, stride or pad");
  const int Ho = (s.x.h + 2 * s.pad - R) / s.stride + 1,
            Wo = (s.x.w + 2 * s.pw() - S) / s.stride + 1;
  if (s.y.n != s.x.n || s.y.h != Ho || s.y.w != Wo || Ho < 1 || Wo < 1)
    bad("y is " + s.y.str() + ", the conv gives " + std::to_string(Ho) + "x" + std::to_string(Wo));
  StemWgradGeometry g;
  g.taps_row = S * C;
  g.kr = (g.taps_row + 7) / 8 * 8;
  g.cols = R * g.kr;
  if (g.cols / 8 > kTilesPerWarp * kWarps)
    bad(std::to_string(g.cols / 8) + " column tiles (at most " +
        std::to_string(kTilesPerWarp * kWarps) + ")");
  g.row_width = ((kStemWgradPix - 1) * s.stride + S) * C;
  g.row_width += g.row_width % 2;
  const Ring ring = wg_ring(s, g.row_width);
  g.rows_ahead = ring.ahead;
  g.ring_rows = ring.slots;
  g.tiles = ring.tiles;
  if (s.max_blocks < 0) bad("max_blocks " + std::to_string(s.max_blocks));
  g.blocks = int(std::min<int64_t>(g.tiles, s.max_blocks > 0 ? s.max_blocks : kStemWgradBlocks));
  g.smem = (size_t(g.ring_rows) * g.row_width + 2 * size_t(kStemWgradPix) * K) * 2;
  if (g.smem > (227u << 10)) bad("shared memory over 227 KiB");
  g.scratch = size_t(g.blocks) * K * g.cols * sizeof(float);
  return g;
}

bool stem_wgrad_eligible(DType t, const StemWgradSpec& s, const char** why) {
  if (t != DType::F16 && t != DType::BF16) {
    if (why) *why = "storage not fp16 or bf16";
    return false;
  }
  try {
    stem_wgrad_geometry(s);
  } catch (const std::invalid_argument&) {
    if (why) *why = "shape";
    return false;
  }
  return true;
}

void launch_stem_wgrad(DType t, const void* x, const void* dy, float* dw, const StemWgradSpec& s,
                       void* scratch, cudaStream_t stream) {
  const StemWgradGeometry g = stem_wgrad_geometry(s);
  const WgArgs a = wg_args(s, g);
  if (reinterpret_cast<uintptr_t>(x) % 4 != 0 || reinterpret_cast<uintptr_t>(dy) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(scratch) % 16 != 0)
    throw std::invalid_argument(
        "launch_stem_wgrad: x (4 bytes), dy (16: its rows are copied 16 bytes at a time) or the "
        "scratch (16) misaligned");
  float* part = static_cast<float*>(scratch);
  stem_rows::by_half_type(t, "launch_stem_wgrad", [&](auto tag) {
    using T = decltype(tag);
    const T *tx = static_cast<const T*>(x), *tdy = static_cast<const T*>(dy);
    if (a.MT == 1)
      wg_launch_step<T, 1>(g, a, tx, tdy, part, stream);
    else if (a.MT == 2)
      wg_launch_step<T, 2>(g, a, tx, tdy, part, stream);
    else
      wg_launch_step<T, 4>(g, a, tx, tdy, part, stream);
  });
  CNN_CHECK_LAUNCH();
  const int total = wg_dw_count(a);
  stem_wgrad_reduce<<<(total + kRedElems - 1) / kRedElems, kRedElems * kRedLanes, 0, stream>>>(
      part, dw, a, g.blocks, s.accumulate);
  CNN_CHECK_LAUNCH();
}

void stem_wgrad_emulate(DType t, const void* x, const void* dy, float* dw, const StemWgradSpec& s) {
  const StemWgradGeometry g = stem_wgrad_geometry(s);
  const WgArgs a = wg_args(s, g);
  stem_rows::by_half_type(t, "stem_wgrad_emulate", [&](auto tag) {
    using T = decltype(tag);
    emulate_t(static_cast<const T*>(x), static_cast<const T*>(dy), dw, a, g.blocks, s.accumulate);
  });
}

}  // namespace cnnbench
