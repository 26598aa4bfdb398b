#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/upsample.h"

namespace cnnbench {

namespace {

// One thread per output element (n, oh, ow, c); 64-bit offsets.
template <typename T>
__global__ void upsample_nearest_kernel(const T* x, T* y, int c, int h, int w, int factor, int ld_x,
                                        int ld_y, int64_t total) {
  const int ow_n = w * factor, oh_n = h * factor;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int ci = int(i % c);
    int64_t r = i / c;
    const int ow = int(r % ow_n);
    r /= ow_n;
    const int oh = int(r % oh_n);
    const int64_t n = r / oh_n;
    const int64_t src = ((n * h + oh / factor) * w + ow / factor) * ld_x + ci;
    const int64_t dst = ((n * oh_n + oh) * ow_n + ow) * ld_y + ci;
    y[dst] = x[src];
  }
}

}  // namespace

void launch_upsample_nearest(DType t, const void* x, const Dims& d, int factor, int ld_x, void* y,
                             int ld_y, cudaStream_t stream) {
  if (factor < 1) throw std::invalid_argument("upsample: factor below 1");
  ld_x = ld_x ? ld_x : d.c;
  ld_y = ld_y ? ld_y : d.c;
  const int64_t total = d.numel() * factor * factor;
  if (total == 0) return;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 65536));
  CNN_DISPATCH_DTYPE(t, upsample_nearest_kernel<T>
                     <<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                      d.c, d.h, d.w, factor, ld_x, ld_y, total));
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace cnnbench
