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

struct WgArgs {
  int H, W, C, Ho, Wo, K, R, S, stride, ph, pw;
  int SC, KR, cols, PW, ldt, MT, NT, segs;
  int kpl;    // log2(K / 8): dy's threads a pixel
  bool dy16;  // dy 16-byte aligned (the fill's vector loads)
  int64_t tiles;
};

WgArgs wg_args(const StemWgradSpec& s, const StemWgradGeometry& g) {
  WgArgs a{};
  a.H = s.x.h, a.W = s.x.w, a.C = s.x.c, a.Ho = s.y.h, a.Wo = s.y.w, a.K = s.y.c;
  a.R = s.kernel, a.S = s.kw(), a.stride = s.stride, a.ph = s.pad, a.pw = s.pw();
  a.SC = g.taps_row, a.KR = g.kr, a.cols = g.cols, a.PW = g.row_width, a.ldt = g.ldt;
  a.MT = s.y.c / 16, a.NT = g.cols / 8;
  a.kpl = s.y.c == 16 ? 1 : s.y.c == 32 ? 2 : 3;
  a.segs = (s.y.w + kStemWgradPix - 1) / kStemWgradPix;
  a.tiles = g.tiles;
  return a;
}

#define CNN_HD __host__ __device__ __forceinline__

using WgTile = stem_rows::Tile;

CNN_HD WgTile wg_tile(const WgArgs& a, int64_t tile) {
  return stem_rows::tile_of(tile, a.segs, a.Ho, a.Wo, kStemWgradPix);
}

// The tile's input rows into shared [R][PW], as the stem's rows kernel fills them
// (stem_rows::fill), and zeros past the tile's last window too (so that a partial tile's unused
// taps are zeros, not whatever the image holds there: dy is zero for its missing pixels, and
// 0 * inf would not be).
template <typename T>
CNN_HD void wg_fill_rows(const T* x, T* rows, const WgArgs& a, const WgTile& t, int tid) {
  const int used = ((t.count - 1) * a.stride + a.S) * a.C;
  stem_rows::fill(x, rows, a.H, a.W, a.C, a.R, a.stride, a.ph, a.pw, a.PW, t, used, tid,
                  kStemWgradThreads);
}

// Where pixel p of dy^T's row k sits in shared memory: p XOR 8 * ((k / 8) % 8). The fill's 8
// threads of a pixel write rows 8 apart, which with a plain layout (ldt / 2 = 4 mod 8, as the A
// loads need to be free of bank conflicts) all fall in one bank: 8-way conflicts at K = 64. The
// XOR spreads them over 8 banks and keeps pixel pairs (p even, p + 1) together in one word for the
// A loads (whose 8 rows g share k / 8, so the same XOR). Rows are 128 pixels wide for it.
CNN_HD int wg_sw(int k, int p) {
  return p ^ (((k >> 3) & 7) << 3);
}

// dy's rows of the tile transposed into shared [K][ldt]: dyt[k][p] = dy[n, oh, ow0 + p, k], zero
// for p from count to the tile's width (a partial tile's missing pixels add nothing). A thread
// takes 8 channels of a pixel at a time (one 16-byte load where dy is 16-byte aligned, as the
// arena's buffers are), K / 8 threads a pixel, so a warp reads 4 or more whole pixels' rows; no
// division (K is 16, 32 or 64: kpl = log2(K / 8)).
template <typename T>
CNN_HD void wg_fill_dyt(const T* dy, T* dyt, const WgArgs& a, const WgTile& t, int tid) {
  static_assert(sizeof(T) == 2, "16-bit storage");
  const int64_t base = ((t.n * a.Ho + t.oh) * a.Wo + t.ow0) * int64_t(a.K);
  const int per_pixel = a.K / 8, k0 = (tid & (per_pixel - 1)) * 8;
  const uint16_t* src = reinterpret_cast<const uint16_t*>(dy);
  uint16_t* dst = reinterpret_cast<uint16_t*>(dyt);
  for (int p = tid >> a.kpl; p < kStemWgradPix; p += kStemWgradThreads >> a.kpl) {
    uint32_t w[4] = {0, 0, 0, 0};  // channels k0 .. k0 + 7, two a word (the lower first)
    if (p < t.count) {
      const int64_t at = base + int64_t(p) * a.K + k0;
#ifdef __CUDA_ARCH__
      if (a.dy16) {
        const uint4 v = *reinterpret_cast<const uint4*>(src + at);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
      } else
#endif
        for (int i = 0; i < 4; ++i)
          w[i] = uint32_t(src[at + 2 * i]) | uint32_t(src[at + 2 * i + 1]) << 16;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int k = k0 + 2 * i;
      dst[k * a.ldt + wg_sw(k, p)] = uint16_t(w[i] & 0xffffu);
      dst[(k + 1) * a.ldt + wg_sw(k + 1, p)] = uint16_t(w[i] >> 16);
    }
  }
}

// An A fragment register: output k, pixels p and p + 1 (p even: one 32-bit load on the device).
template <typename T>
CNN_HD Two<T> wg_a(const T* dyt, const WgArgs& a, int k, int p) {
  const T* src = dyt + k * a.ldt + wg_sw(k, p);  // p even: p + 1 stays beside it
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const Two<T>*>(src);
#else
  return {src[0], src[1]};
#endif
}

// Where a B fragment's column col (window row col / KR, tap col % KR of it) starts in the rows,
// or -1 at taps past S * C (zeros): the same for every tile, so a thread works it out once.
CNN_HD int wg_b_offset(const WgArgs& a, int col) {
  const int r = col / a.KR, j = col - r * a.KR;
  return j < a.SC ? r * a.PW + j : -1;
}

// A B fragment register: the column at `off` (wg_b_offset), pixels p and p + 1.
template <typename T>
CNN_HD Two<T> wg_b(const T* rows, const WgArgs& a, int off, int p) {
  if (off < 0) return {zero_value<T>(), zero_value<T>()};
  const T* src = rows + off + p * a.stride * a.C;
  return {src[0], src[a.stride * a.C]};
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

// The reduce's block: kRedElems elements of dw by kRedLanes lanes; lane l adds the partial sums
// of blocks l, l + kRedLanes, ... in that order, then the lanes' sums are added pairwise (l and
// l + 4, l and l + 2, l and l + 1). A fixed order: the same sums on every run and every card.
constexpr int kRedElems = 32, kRedLanes = 8;

// Lane l's sum for dw's element e (KRSC: k, r, s, c).
CNN_HD float wg_reduce_lane(const float* part, const WgArgs& a, int blocks, int e, int l) {
  const int c = e % a.C, s = e / a.C % a.S, r = e / (a.C * a.S) % a.R, k = e / (a.C * a.S * a.R);
  const int64_t at = int64_t(k) * a.cols + r * a.KR + s * a.C + c;
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

template <typename T>
__global__ void __launch_bounds__(kStemWgradThreads, 3)
    stem_wgrad_kernel(const T* __restrict__ x, const T* __restrict__ dy, float* __restrict__ part,
                      WgArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* rows = reinterpret_cast<T*>(smem);
  T* dyt = rows + size_t(a.R) * a.PW;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  float acc[kMaxMTiles][kTilesPerWarp][4];
#pragma unroll
  for (int mt = 0; mt < kMaxMTiles; ++mt)
#pragma unroll
    for (int jt = 0; jt < kTilesPerWarp; ++jt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][jt][i] = 0.0f;
  int boff[kTilesPerWarp];
#pragma unroll
  for (int jt = 0; jt < kTilesPerWarp; ++jt)
    boff[jt] = wg_b_offset(a, (warp + kWarps * jt) * 8 + g);
  for (int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
    const WgTile t = wg_tile(a, tile);
    __syncthreads();  // every warp done with the last tile's rows
    wg_fill_rows(x, rows, a, t, threadIdx.x);
    wg_fill_dyt(dy, dyt, a, t, threadIdx.x);
    __syncthreads();
    for (int p0 = 0; p0 < t.count; p0 += 8) {
      uint32_t fa[kMaxMTiles][2] = {};
#pragma unroll
      for (int mt = 0; mt < kMaxMTiles; ++mt)
        if (mt < a.MT) {
          fa[mt][0] = mma::reg_of(wg_a(dyt, a, mt * 16 + g, p0 + 2 * q));
          fa[mt][1] = mma::reg_of(wg_a(dyt, a, mt * 16 + g + 8, p0 + 2 * q));
        }
#pragma unroll
      for (int jt = 0; jt < kTilesPerWarp; ++jt) {
        const int nt = warp + kWarps * jt;
        if (nt >= a.NT) continue;
        const uint32_t b = mma::reg_of(wg_b(rows, a, boff[jt], p0 + 2 * q));
#pragma unroll
        for (int mt = 0; mt < kMaxMTiles; ++mt)
          if (mt < a.MT) mma::mma_16x8x8<T>(acc[mt][jt], fa[mt][0], fa[mt][1], b);
      }
    }
  }
  wg_store_partial(acc, part + int64_t(blockIdx.x) * a.K * a.cols, a, warp, g, q);
}

__global__ void __launch_bounds__(kRedElems* kRedLanes)
    stem_wgrad_reduce(const float* __restrict__ part, float* __restrict__ dw, WgArgs a, int blocks,
                      bool accumulate) {
  __shared__ float sh[kRedElems][kRedLanes];
  const int total = a.K * a.R * a.S * a.C;
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
// mma::emulate_mma_16x8x8.
template <typename T>
void emulate_t(const T* x, const T* dy, float* dw, const WgArgs& a, int blocks, bool accumulate) {
  std::vector<T> rows(size_t(a.R) * a.PW), dyt(size_t(a.K) * a.ldt);
  std::vector<float> part(size_t(blocks) * a.K * a.cols, 0.0f);
  static float acc[kWarps][32][kMaxMTiles][kTilesPerWarp][4];
  for (int blk = 0; blk < blocks; ++blk) {
    std::memset(acc, 0, sizeof acc);
    for (int64_t tile = blk; tile < a.tiles; tile += blocks) {
      const WgTile t = wg_tile(a, tile);
      for (int tid = 0; tid < kStemWgradThreads; ++tid) {
        wg_fill_rows(x, rows.data(), a, t, tid);
        wg_fill_dyt(dy, dyt.data(), a, t, tid);
      }
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
                a0[lane] = wg_a(dyt.data(), a, mt * 16 + g, p0 + 2 * q);
                a1[lane] = wg_a(dyt.data(), a, mt * 16 + g + 8, p0 + 2 * q);
                b[lane] = wg_b(rows.data(), a, wg_b_offset(a, nt * 8 + g), p0 + 2 * q);
                std::memcpy(c[lane], acc[warp][lane][mt][jt], sizeof c[lane]);
              }
              mma::emulate_mma_16x8x8(c, a0, a1, b);
              for (int lane = 0; lane < 32; ++lane)
                std::memcpy(acc[warp][lane][mt][jt], c[lane], sizeof c[lane]);
            }
          }
    }
    for (int warp = 0; warp < kWarps; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        wg_store_partial(acc[warp][lane], part.data() + size_t(blk) * a.K * a.cols, a, warp,
                         lane / 4, lane % 4);
  }
  const int total = a.K * a.R * a.S * a.C;
  for (int e = 0; e < total; ++e) {
    float v[kRedLanes];
    for (int l = 0; l < kRedLanes; ++l) v[l] = wg_reduce_lane(part.data(), a, blocks, e, l);
    for (int half = kRedLanes / 2; half > 0; half /= 2)
      for (int l = 0; l < kRedLanes; ++l) wg_reduce_tree(v, l, half);
    dw[e] = accumulate ? dw[e] + v[0] : v[0];
  }
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
  g.ldt = 136;  // 128 swizzled pixels (wg_sw) + 8: ldt / 2 = 4 (mod 8), A loads conflict-free
  g.tiles = int64_t(s.x.n) * Ho * ((Wo + kStemWgradPix - 1) / kStemWgradPix);
  g.blocks = int(std::min<int64_t>(g.tiles, kStemWgradBlocks));
  g.smem = (size_t(R) * g.row_width + size_t(K) * g.ldt) * 2;
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
  WgArgs a = wg_args(s, g);
  a.dy16 = reinterpret_cast<uintptr_t>(dy) % 16 == 0;
  if (reinterpret_cast<uintptr_t>(x) % 4 != 0 || reinterpret_cast<uintptr_t>(dy) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(scratch) % 16 != 0)
    throw std::invalid_argument("launch_stem_wgrad: x, dy or the scratch misaligned");
  float* part = static_cast<float*>(scratch);
  stem_rows::by_half_type(t, "launch_stem_wgrad", [&](auto tag) {
    using T = decltype(tag);
    if (g.smem > (48u << 10)) stem_rows::raise_smem_once<stem_wgrad_kernel<T>>();
    stem_wgrad_kernel<T><<<g.blocks, kStemWgradThreads, g.smem, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), part, a);
  });
  CNN_CHECK_LAUNCH();
  const int total = a.K * a.R * a.S * a.C;
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
