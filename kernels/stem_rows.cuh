// What the stem's kernels share (the forward's, stem.cu; the weight gradient's, stem_wgrad.cu):
// the row tiles, host and device (a tile is up to `pix` output pixels of one output row, and its
// input rows go into shared memory as they are), and two launch helpers.
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

struct Tile {
  int64_t n;
  int oh, ow0, count;  // count: the tile's pixels (pix but a row's last)
};

// Tile `tile` of an output of Ho rows of Wo pixels, `segs` = ceil(Wo / pix) tiles a row.
__host__ __device__ __forceinline__ Tile tile_of(int64_t tile, int segs, int Ho, int Wo, int pix) {
  Tile t;
  const int seg = int(tile % segs);
  const int64_t row = tile / segs;
  t.n = row / Ho;
  t.oh = int(row - t.n * Ho);
  t.ow0 = seg * pix;
  t.count = Wo - t.ow0 < pix ? Wo - t.ow0 : pix;
  return t;
}

// The input the tile's windows cover (H x W x C NHWC, R rows from oh * stride - ph, elements from
// column ow0 * stride - pw on) into shared [R][PW]: element j of row r is input column
// ow0 * stride - pw + j / C, channel j % C; zeros outside the image and from element `cap` on.
// In NHWC a row's elements from column iw0 on are contiguous, so element j is x's element
// (row start + iw0 * C + j), inside the image where j lies in [-iw0 * C, (W - iw0) * C): a
// threads-wide contiguous (coalesced) copy per row with no division. (Call 68: the rows kernel
// ran 2x slower than the tile kernel when this fill had two integer divisions per element.)
// Thread `tid` of `threads`.
template <typename T>
__host__ __device__ __forceinline__ void fill(const T* x, T* rows, int H, int W, int C, int R,
                                              int stride, int ph, int pw, int PW, const Tile& t,
                                              int cap, int tid, int threads) {
  const int iw0 = t.ow0 * stride - pw, ih0 = t.oh * stride - ph;
  const T zero = mma::zero_value<T>();
  const int lo = -iw0 * C, hi = (W - iw0) * C < cap ? (W - iw0) * C : cap;
  for (int r = 0; r < R; ++r) {
    const int ih = ih0 + r;
    T* dst = rows + r * PW;
    if (ih < 0 || ih >= H) {
      for (int j = tid; j < PW; j += threads) dst[j] = zero;
      continue;
    }
    // x's index of element j is first + j; only formed where it lies inside the row.
    const int64_t first = ((t.n * H + ih) * W + iw0) * int64_t(C);
    for (int j = tid; j < PW; j += threads) dst[j] = j >= lo && j < hi ? x[first + j] : zero;
  }
}

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
