// SynthesisInput's Fourier features in float32 and their backward (kernels/fourier_backward.h).
// The position arithmetic mirrors fourier_features_kernel (kernels/stylegan3.cu), so that the
// backward differentiates the very angles the forward evaluated.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/check.h"
#include "kernels/channel_kernels.cuh"
#include "kernels/fourier_backward.h"

namespace cnnbench {

namespace {

using ck::blocks_for;  // kernels/channel_kernels.cuh

constexpr float kTwoPi = 6.28318530717958647692f;

// arg = gx half fx + gy half fy + phase at column ix, row iy: theta = 2 pi arg.
__device__ __forceinline__ float fourier_arg(const float* q, int ix, int iy, int size, float half) {
  const float gx = (2.f * ix + 1.f) / size - 1.f, gy = (2.f * iy + 1.f) / size - 1.f;
  return (gx * half) * q[0] + (gy * half) * q[1] + q[2];
}

// Block (kTileC, kLanes): threadIdx.x a channel of the tile blockIdx.x, threadIdx.y a lane over
// the positions of image blockIdx.y; the lanes' partial sums are added in lane order.
constexpr int kTileC = 32, kLanes = 8;

__global__ void fourier_features_backward_kernel(const float* fp, const float* dy, int c, int size,
                                                 float half, float scale, float* dfp) {
  __shared__ float part[4][kLanes][kTileC];
  const int ci = blockIdx.x * kTileC + threadIdx.x;
  const int64_t ni = blockIdx.y;
  float s[4] = {0.f, 0.f, 0.f, 0.f};  // sum dy cos(theta) gx, ... gy, dy cos(theta), dy sin(theta)
  if (ci < c) {
    const float* q = fp + (ni * c + ci) * 4;
    const float* dyn = dy + ni * size * size * c + ci;
    for (int p = threadIdx.y; p < size * size; p += kLanes) {
      const int ix = p % size, iy = p / size;
      const float g = dyn[int64_t(p) * c];
      float sn, cs;
      sincospif(2.f * fourier_arg(q, ix, iy, size, half), &sn, &cs);
      const float gc = g * cs;
      s[0] += gc * ((2.f * ix + 1.f) / size - 1.f);
      s[1] += gc * ((2.f * iy + 1.f) / size - 1.f);
      s[2] += gc;
      s[3] += g * sn;
    }
  }
  for (int k = 0; k < 4; ++k) part[k][threadIdx.y][threadIdx.x] = s[k];
  __syncthreads();
  if (threadIdx.y < 4 && ci < c) {
    const int k = threadIdx.y;
    float v = 0.f;
    for (int l = 0; l < kLanes; ++l) v += part[k][l][threadIdx.x];
    const float* q = fp + (ni * c + ci) * 4;
    const float d_arg = scale * q[3] * kTwoPi;  // d y / d arg = scale amp 2 pi cos(theta)
    const float out[4] = {v * d_arg * half, v * d_arg * half, v * d_arg, v * scale};
    dfp[(ni * c + ci) * 4 + k] = out[k];
  }
}

constexpr int kPrepThreads = 256;

// One block per image: each thread sums its channels' da [2][3], the block adds them in a fixed
// tree, and thread 0 carries da back through m = m_r @ m_t and the normalisation of t.
__global__ void fourier_prepare_backward_kernel(const float* t, const float* tr, const float* freqs,
                                                const float* dfp, int c, float sr, float bw,
                                                float* dt) {
  __shared__ float part[6][kPrepThreads];
  const int64_t ni = blockIdx.x;
  const float* tn = t + ni * 4;
  const float norm = sqrtf(tn[0] * tn[0] + tn[1] * tn[1]);
  const float u[4] = {tn[0] / norm, tn[1] / norm, tn[2] / norm, tn[3] / norm};
  const float m[2][3] = {{u[0], -u[1], -(u[0] * u[2] - u[1] * u[3])},
                         {u[1], u[0], -(u[1] * u[2] + u[0] * u[3])}};
  float a[2][2];  // the first two columns of m @ transform: the frequencies' matrix
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 2; ++col)
      a[row][col] = m[row][0] * tr[col] + m[row][1] * tr[3 + col] + m[row][2] * tr[6 + col];
  const float band = sr / 2 - bw;
  float da[6] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f};  // da[0][0..2], da[1][0..2]
  for (int ci = threadIdx.x; ci < c; ci += kPrepThreads) {
    const float f0 = freqs[ci * 2], f1 = freqs[ci * 2 + 1];
    const float fx = f0 * a[0][0] + f1 * a[1][0], fy = f0 * a[0][1] + f1 * a[1][1];
    const float* g = dfp + (ni * c + ci) * 4;
    float gfx = g[0], gfy = g[1];
    const float r = sqrtf(fx * fx + fy * fy);
    const float raw = 1.f - (r - bw) / band;
    if (raw >= 0.f && raw <= 1.f && r > 0.f) {  // d amp / d f = -f / (r band)
      const float k = g[3] / (r * band);
      gfx -= k * fx;
      gfy -= k * fy;
    }
    da[0] += gfx * f0, da[3] += gfx * f1;
    da[1] += gfy * f0, da[4] += gfy * f1;
    da[2] += g[2] * f0, da[5] += g[2] * f1;
  }
  for (int k = 0; k < 6; ++k) part[k][threadIdx.x] = da[k];
  __syncthreads();
  for (int s = kPrepThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s)
      for (int k = 0; k < 6; ++k) part[k][threadIdx.x] += part[k][threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  // a = m @ transform: dm[r][k] = sum_q da[r][q] transform[k][q].
  float dm[2][3];
  for (int row = 0; row < 2; ++row)
    for (int k = 0; k < 3; ++k) {
      float v = 0.f;
      for (int q = 0; q < 3; ++q) v += part[row * 3 + q][0] * tr[k * 3 + q];
      dm[row][k] = v;
    }
  float du[4];
  du[0] = dm[0][0] + dm[1][1] - u[2] * dm[0][2] - u[3] * dm[1][2];
  du[1] = -dm[0][1] + dm[1][0] + u[3] * dm[0][2] - u[2] * dm[1][2];
  du[2] = -u[0] * dm[0][2] - u[1] * dm[1][2];
  du[3] = u[1] * dm[0][2] - u[0] * dm[1][2];
  const float proj = du[0] * u[0] + du[1] * u[1] + du[2] * u[2] + du[3] * u[3];
  float* o = dt + ni * 4;
  o[0] = (du[0] - u[0] * proj) / norm;
  o[1] = (du[1] - u[1] * proj) / norm;
  o[2] = du[2] / norm;
  o[3] = du[3] / norm;
}

}  // namespace

void launch_fourier_features_backward(const float* fp, const float* dy, int n, int c, int size,
                                      float sampling_rate, float scale, float* dfp,
                                      cudaStream_t stream) {
  if (n <= 0 || c <= 0) return;
  if (n > 65535 || int64_t(size) * size > INT32_MAX / 2)
    throw std::invalid_argument("launch_fourier_features_backward: batch " + std::to_string(n) +
                                " or size " + std::to_string(size) + " too large");
  const dim3 grid(unsigned((c + kTileC - 1) / kTileC), unsigned(n));
  fourier_features_backward_kernel<<<grid, dim3(kTileC, kLanes), 0, stream>>>(
      fp, dy, c, size, 0.5f * size / sampling_rate, scale, dfp);
  CNN_CHECK_LAUNCH();
}

void launch_fourier_prepare_backward(const float* t, const float* transform, const float* freqs,
                                     const float* phases, const float* dfp, int n, int c,
                                     float sampling_rate, float bandwidth, float* dt,
                                     cudaStream_t stream) {
  (void)phases;  // the phases enter fp additively: no gradient to t through them
  if (n <= 0) return;
  fourier_prepare_backward_kernel<<<n, kPrepThreads, 0, stream>>>(t, transform, freqs, dfp, c,
                                                                  sampling_rate, bandwidth, dt);
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
