// What the stem's kernels share (the forward's rows kernel, stem.cu; the weight gradient's,
// stem_wgrad.cu): the row tiles and the ring of input rows they keep in shared memory, host and
// device (their threads also run on the host), and two launch helpers.
//
// A tile is up to `pix` output pixels of one output row; its R input rows, from the first window's
// left edge on, sit in shared memory as they are (NHWC: a pixel's taps of window row r are S * C
// consecutive elements there, stride * C after the previous pixel's). A block takes a contiguous
// run of tiles in the order (image, column segment, output row), so its next tile is usually the
// row below, whose windows share R - stride input rows with this one's. The rows live in a ring
// of R + stride slots (input row ih in slot ih mod slots): the next tile's stride new rows go into
// slots the current tile does not read, so they can be loaded (into registers) while it computes
// and stored before the barrier that ends it. Where the next tile is not the row below (an image's
// or a segment's end) or the rows do not fit the registers set aside, all R rows are filled after
// that barrier. (Calls 68 and 107: both kernels filled all R rows and then computed, and waited on
// those loads every tile: the rows kernel ran 2x slower than the tile kernel, the weight gradient
// 1.76x slower than cuDNN's.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

#include "harness/check.h"
#include "kernels/mma_m16n8k8.cuh"
#include "kernels/tensor.h"

namespace cnnbench {
namespace stem_rows {

#define CNN_HD __host__ __device__ __forceinline__

// A successor's new rows a thread holds: at most kMaxNewRows rows (the stride) of kMaxPerRow
// elements. 7 covers the forward rows kernel's ResNet stem rows (786 elements over 128 threads);
// at 6 it fell back to filling every row every tile there (a review's find before any GPU run).
inline constexpr int kMaxNewRows = 2, kMaxPerRow = 7;

struct Tile {
  int64_t n;
  int oh, ow0, count;  // count: the tile's pixels (pix but a row's last)
};

// The input, the tiles and the ring, as the kernels and their host threads see them.
struct Ring {
  int H, W, C, R, S, stride, ph, pw;  // the image and the conv
  int Ho, Wo, pix, segs;              // the tiles: pix output pixels, segs a row
  int PW;                             // a row's elements in shared memory
  int slots;                          // R + stride where ahead, else R
  int per_row;                        // a row's elements a thread, ceil(PW / threads)
  int threads;
  bool ahead;     // the next tile's new rows loaded while one computes
  bool cap_last;  // zeros past the tile's last window (the weight gradient: dy is zero for a
                  // partial tile's missing pixels, and 0 * inf would not be)
  int64_t tiles;
};

// The ring for an image of H x W x C, a conv of R x S / stride (pads ph, pw) giving Ho x Wo, tiles
// of pix pixels, rows of PW elements, `threads` a block (host).
inline Ring make_ring(int H, int W, int C, int R, int S, int stride, int ph, int pw, int Ho, int Wo,
                      int N, int pix, int PW, int threads, bool cap_last) {
  Ring g{};
  g.H = H, g.W = W, g.C = C, g.R = R, g.S = S, g.stride = stride, g.ph = ph, g.pw = pw;
  g.Ho = Ho, g.Wo = Wo, g.pix = pix, g.segs = (Wo + pix - 1) / pix, g.PW = PW;
  g.threads = threads, g.per_row = (PW + threads - 1) / threads;
  g.ahead = stride < R && stride <= kMaxNewRows && g.per_row <= kMaxPerRow;
  g.slots = g.ahead ? R + stride : R;
  g.cap_last = cap_last;
  g.tiles = int64_t(N) * Ho * g.segs;
  return g;
}

// Tile `tile`: tile = (n * segs + seg) * Ho + oh.
CNN_HD Tile tile_at(const Ring& g, int64_t tile) {
  Tile t;
  t.oh = int(tile % g.Ho);
  const int64_t rest = tile / g.Ho;
  const int seg = int(rest % g.segs);
  t.n = rest / g.segs;
  t.ow0 = seg * g.pix;
  t.count = g.Wo - t.ow0 < g.pix ? g.Wo - t.ow0 : g.pix;
  return t;
}

// The input row of tile t's first window row (its output row's, so negative in the padding).
CNN_HD int first_row(const Ring& g, const Tile& t) {
  return t.oh * g.stride - g.ph;
}

// Whether tile + 1 is the row below tile (same image and segment) and takes only its new rows.
CNN_HD bool successor(const Ring& g, int64_t tile) {
  return g.ahead && (tile + 1) % g.Ho != 0;
}

// Block b of `blocks`: tiles [first_tile(b), first_tile(b + 1)), every block one at least where
// tiles >= blocks.
CNN_HD int64_t first_tile(const Ring& g, int blocks, int b) {
  return g.tiles * b / blocks;
}

// Input row ih's slot.
CNN_HD int slot(const Ring& g, int ih) {
  const int m = ih % g.slots;
  return m < 0 ? m + g.slots : m;
}

// Where input row ih's elements come from, for tile t: element j of its slot is x[first + j] for
// j in [lo, hi), zero elsewhere (outside the image; past the last window where cap_last). In NHWC
// a row's elements from column iw0 on are contiguous: a coalesced copy with no division.
struct RowSrc {
  int64_t first;
  int lo, hi;
};

CNN_HD RowSrc row_src(const Ring& g, const Tile& t, int ih) {
  RowSrc r;
  const int iw0 = t.ow0 * g.stride - g.pw;
  r.lo = -iw0 * g.C;
  r.hi = (g.W - iw0) * g.C;
  if (g.cap_last) {
    const int used = ((t.count - 1) * g.stride + g.S) * g.C;
    if (used < r.hi) r.hi = used;
  }
  if (ih < 0 || ih >= g.H) r.hi = r.lo;  // a row of the padding: all zeros
  r.first = ((t.n * g.H + ih) * g.W + iw0) * int64_t(g.C);
  return r;
}

template <typename T>
CNN_HD T elem(const T* x, const RowSrc& r, int j) {
  return j >= r.lo && j < r.hi ? x[r.first + j] : mma::zero_value<T>();
}

// All R input rows of tile t into their slots.
template <typename T>
CNN_HD void fill_all(const T* x, T* rows, const Ring& g, const Tile& t, int tid) {
  const int ih0 = first_row(g, t);
  for (int r = 0; r < g.R; ++r) {
    const RowSrc src = row_src(g, t, ih0 + r);
    T* dst = rows + slot(g, ih0 + r) * g.PW;
    for (int j = tid; j < g.PW; j += g.threads) dst[j] = elem(x, src, j);
  }
}

// Tile t's new rows (its last `stride`), thread tid's elements (j = tid + i * threads of new row r
// at v[r][i]): load_new, then store_new into their slots.
template <typename T>
struct NewRows {
  T v[kMaxNewRows][kMaxPerRow];
};

template <typename T>
CNN_HD void load_new(const T* x, NewRows<T>& pre, const Ring& g, const Tile& t, int tid) {
  const int ih = first_row(g, t) + g.R - g.stride;  // its new rows
#pragma unroll
  for (int r = 0; r < kMaxNewRows; ++r) {
    if (r >= g.stride) break;
    const RowSrc src = row_src(g, t, ih + r);
#pragma unroll
    for (int i = 0; i < kMaxPerRow; ++i)
      if (i < g.per_row) pre.v[r][i] = elem(x, src, tid + i * g.threads);  // past PW: not stored
  }
}

template <typename T>
CNN_HD void store_new(T* rows, const NewRows<T>& pre, const Ring& g, const Tile& t, int tid) {
  const int ih = first_row(g, t) + g.R - g.stride;  // its new rows
#pragma unroll
  for (int r = 0; r < kMaxNewRows; ++r) {
    if (r >= g.stride) break;
    T* dst = rows + slot(g, ih + r) * g.PW;
#pragma unroll
    for (int i = 0; i < kMaxPerRow; ++i) {
      const int j = tid + i * g.threads;
      if (i < g.per_row && j < g.PW) dst[j] = pre.v[r][i];
    }
  }
}

#undef CNN_HD

// f(T{}) with T the storage type of t: __half or __nv_bfloat16; else invalid_argument naming
// `who`.
template <typename F>
void by_half_type(DType t, const char* who, F&& f) {
  if (t == DType::F16)
    f(__half{});
  else if (t == DType::BF16)
    f(__nv_bfloat16{});
  else
    throw std::invalid_argument(std::string(who) + ": fp16 and bf16 only");
}

// Per device: a kernel's dynamic shared memory raised to the device's opt-in limit once, before
// its first launch there. Returns the current device.
inline constexpr int kMaxDevices = 64;
template <auto Kernel>
int raise_smem_once() {
  static std::once_flag once[kMaxDevices];
  int device = 0;
  CNN_CHECK_CUDA(cudaGetDevice(&device));
  if (device >= kMaxDevices) throw std::invalid_argument("raise_smem_once: device index over 63");
  std::call_once(once[device], [device] {
    int optin = 0;
    CNN_CHECK_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    CNN_CHECK_CUDA(
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  });
  return device;
}

}  // namespace stem_rows
}  // namespace cnnbench
