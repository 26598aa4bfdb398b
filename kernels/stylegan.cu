// StyleGAN's synthesis kernels (kernels/stylegan.h): NHWC, one thread per output element, float
// accumulation, the storage type in and out.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "harness/check.h"
#include "kernels/channel_kernels.cuh"
#include "kernels/convert.cuh"
#include "kernels/stylegan.h"

namespace cnnbench {

namespace {

using ck::blocks_for;  // kernels/channel_kernels.cuh

template <typename T>
__global__ void upfirdn2d_kernel(const T* x, int n, int c, int h, int w, const float* f, FirSpec s,
                                 int oh, int ow, T* y, int y_ld) {
  const int64_t total = int64_t(n) * oh * ow * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int ci = int(j % c);
    int64_t r = j / c;
    const int ox = int(r % ow);
    r /= ow;
    const int oy = int(r % oh);
    const int64_t ni = r / oh;
    float acc = 0.f;
    for (int a = 0; a < s.fh; ++a) {
      const int uy = oy * s.down + a - s.pad_y0;
      if (uy < 0 || uy % s.up) continue;
      const int iy = uy / s.up;
      if (iy >= h) continue;
      for (int b = 0; b < s.fw; ++b) {
        const int ux = ox * s.down + b - s.pad_x0;
        if (ux < 0 || ux % s.up) continue;
        const int ix = ux / s.up;
        if (ix >= w) continue;
        acc += load_f(x, ((ni * h + iy) * w + ix) * c + ci) *
               f[(s.fh - 1 - a) * s.fw + (s.fw - 1 - b)];
      }
    }
    store_f(y, ((ni * oh + oy) * ow + ox) * int64_t(y_ld) + ci, acc * s.gain);
  }
}

template <typename T>
__global__ void bias_act_kernel(const T* x, T* y, int64_t total, int c, int hw, const float* bias,
                                const float* noise, BiasActSpec s) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int ci = int(j % c);
    float v = load_f(x, j);
    if (noise) v += s.noise_strength * noise[(j / c) % hw];
    if (bias) v += bias[ci];
    v = (v >= 0.f ? v : v * s.slope) * s.gain;
    if (s.clamp > 0.f) v = fminf(fmaxf(v, -s.clamp), s.clamp);
    store_f(y, j, v);
  }
}

template <typename T>
__global__ void channel_scale_kernel(const T* x, T* y, int64_t total, int c, int64_t per_image,
                                     const float* scale) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x)
    store_f(y, j, load_f(x, j) * scale[(j / per_image) * c + j % c]);
}

// One block per vector: the mean square over its c channels, then the scale.
template <typename T>
__global__ void normalize_2nd_moment_kernel(const T* x, T* y, int c) {
  const int64_t base = int64_t(blockIdx.x) * c;
  __shared__ float part[32];
  float sum = 0.f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    const float v = load_f(x, base + i);
    sum += v * v;
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int k = 0; k < int(blockDim.x) / 32; ++k) total += part[k];
    part[0] = rsqrtf(total / c + 1e-8f);
  }
  __syncthreads();
  const float r = part[0];
  for (int i = threadIdx.x; i < c; i += blockDim.x) store_f(y, base + i, load_f(x, base + i) * r);
}

template <typename T>
__global__ void affine_kernel(const T* w, int n, int wdim, const float* a, const float* b, float wg,
                              float bg, float sg, int c, float* styles) {
  const int64_t total = int64_t(n) * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ni = j / c, ci = j % c;
    float acc = 0.f;
    for (int k = 0; k < wdim; ++k) acc += load_f(w, ni * wdim + k) * a[ci * wdim + k];
    styles[j] = (acc * wg + (b ? b[ci] * bg : 0.f)) * sg;
  }
}

__global__ void demod_kernel(const float* styles, const float* wsq, int n, int c, int k, float* d) {
  const int64_t total = int64_t(n) * k;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ni = j / k, ki = j % k;
    float sum = 0.f;
    for (int ci = 0; ci < c; ++ci) {
      const float st = styles[ni * c + ci];
      sum += wsq[ki * c + ci] * st * st;
    }
    d[j] = rsqrtf(sum + 1e-8f);
  }
}

}  // namespace

void launch_upfirdn2d(const void* x, const Dims& in, DType t, const float* f, const FirSpec& s,
                      void* y, int y_ld, cudaStream_t st) {
  const int oh = s.out_h(in.h), ow = s.out_w(in.w);
  const int64_t total = int64_t(in.n) * oh * ow * in.c;
  if (total <= 0) return;
  CNN_DISPATCH_DTYPE(t, upfirdn2d_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(
                            static_cast<const T*>(x), in.n, in.c, in.h, in.w, f, s, oh, ow,
                            static_cast<T*>(y), y_ld ? y_ld : in.c));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_bias_act(const void* x, void* y, const Dims& d, DType t, const float* bias,
                     const float* noise, const BiasActSpec& s, cudaStream_t st) {
  const int64_t total = d.numel();
  if (total == 0) return;
  CNN_DISPATCH_DTYPE(
      t, bias_act_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(
             static_cast<const T*>(x), static_cast<T*>(y), total, d.c, d.h * d.w, bias, noise, s));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_channel_scale(const void* x, void* y, const Dims& d, DType t, const float* scale,
                          cudaStream_t st) {
  const int64_t total = d.numel();
  if (total == 0) return;
  CNN_DISPATCH_DTYPE(t, channel_scale_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(
                            static_cast<const T*>(x), static_cast<T*>(y), total, d.c,
                            int64_t(d.h) * d.w * d.c, scale));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_normalize_2nd_moment(const void* x, void* y, int n, int c, DType t, cudaStream_t st) {
  if (n == 0) return;
  CNN_DISPATCH_DTYPE(t, normalize_2nd_moment_kernel<T>
                     <<<n, 256, 0, st>>>(static_cast<const T*>(x), static_cast<T*>(y), c));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_affine(const void* w, DType t, int n, int wdim, const float* a, const float* b,
                   float weight_gain, float bias_gain, float style_gain, int c, float* styles,
                   cudaStream_t st) {
  const int64_t total = int64_t(n) * c;
  if (total == 0) return;
  CNN_DISPATCH_DTYPE(t, affine_kernel<T><<<blocks_for(total, 128), 128, 0, st>>>(
                            static_cast<const T*>(w), n, wdim, a, b, weight_gain, bias_gain,
                            style_gain, c, styles));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_demod(const float* styles, const float* wsq, int n, int c, int k, float* d,
                  cudaStream_t st) {
  const int64_t total = int64_t(n) * k;
  if (total == 0) return;
  demod_kernel<<<blocks_for(total, 256), 256, 0, st>>>(styles, wsq, n, c, k, d);
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace cnnbench
