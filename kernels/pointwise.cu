#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/pointwise.h"

namespace cnnbench {

namespace {
template <typename T>
__global__ void epilogue_kernel(T* y, const T* x, const T* scale, const T* bias, const T* z,
                                bool relu, int64_t numel, int channels) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    const int c = int(i % channels);
    float v = load_f(x, i);
    if (scale) v *= load_f(scale, c);
    if (bias) v += load_f(bias, c);
    if (z) v += load_f(z, i);
    if (relu) v = fmaxf(v, 0.0f);
    store_f(y, i, v);
  }
}
}  // namespace

void launch_epilogue(DType t, void* y, const void* x, const void* scale, const void* bias,
                     const void* z, bool relu, int64_t numel, int channels, cudaStream_t stream) {
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((numel + threads - 1) / threads, 132 * 16));
  CNN_DISPATCH_DTYPE(
      t, epilogue_kernel<T><<<blocks, threads, 0, stream>>>(
             static_cast<T*>(y), static_cast<const T*>(x), static_cast<const T*>(scale),
             static_cast<const T*>(bias), static_cast<const T*>(z), relu, numel, channels));
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
