#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/storage.h"

namespace cnnbench {

namespace {

// Element i (NCHW order) of random_uniform's stream: splitmix64 after i + 1 steps from `state`,
// then lo + (hi - lo) * u in double, rounded to float, exactly as the host computes it (no fused
// multiply-add: the host's x86-64 code has none).
__device__ float uniform_at(uint64_t state, uint64_t i, float lo, float diff) {
  uint64_t z = state + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double u = __dmul_rn(double(z >> 11), 1.0 / 9007199254740992.0);
  return __double2float_rn(__dadd_rn(double(lo), __dmul_rn(double(diff), u)));
}

// One thread per NHWC element: which NCHW element it is, then its value in the storage type.
template <typename T>
__global__ void fill_uniform_nhwc_kernel(T* dst, uint64_t state, int c, int h, int w, int64_t total,
                                         float lo, float diff) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int ci = int(j % c);
    int64_t r = j / c;
    const int wi = int(r % w);
    r /= w;
    const int hi = int(r % h);
    const int64_t n = r / h;
    const uint64_t i = uint64_t(((n * c + ci) * h + hi) * w + wi);
    store_f(dst, j, uniform_at(state, i, lo, diff));
  }
}

template <typename T>
__global__ void frames_to_input_kernel(const uint8_t* frames, T* dst, int64_t total) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x)
    store_f(dst, j, __fdiv_rn(float(frames[j]), 255.f));
}

}  // namespace

void frames_to_input(const uint8_t* frames, const Dims& d, DType t, void* dst, cudaStream_t s) {
  const int64_t total = d.numel();
  if (total == 0) return;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 65536));
  CNN_DISPATCH_DTYPE(
      t, frames_to_input_kernel<T><<<blocks, threads, 0, s>>>(frames, static_cast<T*>(dst), total));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void fill_uniform_nhwc(void* dst, uint64_t state, const Dims& d, DType t, float lo, float hi,
                       cudaStream_t s) {
  const int64_t total = d.numel();
  if (total == 0) return;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 65536));
  CNN_DISPATCH_DTYPE(t, fill_uniform_nhwc_kernel<T><<<blocks, threads, 0, s>>>(
                            static_cast<T*>(dst), state, d.c, d.h, d.w, total, lo, hi - lo));
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace cnnbench
