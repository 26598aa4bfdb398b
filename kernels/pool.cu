#include <cfloat>

#include "harness/check.h"
#include "kernels/convert.cuh"
#include "kernels/pool.h"

namespace cnnbench {

namespace {

// One thread per output element; consecutive threads take consecutive channels (coalesced).
template <typename T, bool kMax>
__global__ void pool_kernel(const T* x, T* y, Dims in, Dims out, int k, int s, int p,
                            bool count_include_pad) {
  const int64_t total = int64_t(out.n) * out.c * out.h * out.w;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int c = int(i % out.c);
    int64_t r = i / out.c;
    const int ow = int(r % out.w);
    r /= out.w;
    const int oh = int(r % out.h);
    const int n = int(r / out.h);
    const int h0 = oh * s - p, w0 = ow * s - p;
    float acc = kMax ? -FLT_MAX : 0.0f;
    int count = 0;
    for (int dh = 0; dh < k; ++dh) {
      const int h = h0 + dh;
      if (h < 0 || h >= in.h) continue;
      for (int dw = 0; dw < k; ++dw) {
        const int w = w0 + dw;
        if (w < 0 || w >= in.w) continue;
        const float v = load_f(x, ((int64_t(n) * in.h + h) * in.w + w) * in.c + c);
        acc = kMax ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    }
    if (!kMax) {
      // PyTorch counts padded positions inside the padded image, never past its far edge.
      const int hend = min(h0 + k, in.h + p), wend = min(w0 + k, in.w + p);
      const int padded = (hend - h0) * (wend - w0);
      acc /= float(count_include_pad ? padded : max(count, 1));
    }
    store_f(y, i, acc);
  }
}

template <typename T>
__global__ void global_avgpool_kernel(const T* x, T* y, int n, int c, int hw) {
  const int64_t total = int64_t(n) * c;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t img = i / c, ch = i % c;
    const T* base = x + img * hw * c + ch;
    float acc = 0.0f;
    for (int j = 0; j < hw; ++j) acc += load_f(base, int64_t(j) * c);
    store_f(y, i, acc / float(hw));
  }
}

int blocks_for(int64_t n, int threads) {
  return int(std::min<int64_t>((n + threads - 1) / threads, 132 * 32));
}

}  // namespace

void launch_maxpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream) {
  CNN_DISPATCH_DTYPE(t, pool_kernel<T, true><<<blocks_for(s.y.numel(), 256), 256, 0, stream>>>(
                            static_cast<const T*>(x), static_cast<T*>(y), s.x, s.y, s.kernel,
                            s.stride, s.pad, s.count_include_pad));
  CNN_CHECK_LAUNCH();
}

void launch_avgpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream) {
  CNN_DISPATCH_DTYPE(t, pool_kernel<T, false><<<blocks_for(s.y.numel(), 256), 256, 0, stream>>>(
                            static_cast<const T*>(x), static_cast<T*>(y), s.x, s.y, s.kernel,
                            s.stride, s.pad, s.count_include_pad));
  CNN_CHECK_LAUNCH();
}

void launch_global_avgpool(DType t, const void* x, void* y, const Dims& d, cudaStream_t stream) {
  const int64_t total = int64_t(d.n) * d.c;
  CNN_DISPATCH_DTYPE(t, global_avgpool_kernel<T><<<blocks_for(total, 128), 128, 0, stream>>>(
                            static_cast<const T*>(x), static_cast<T*>(y), d.n, d.c, d.h * d.w));
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
