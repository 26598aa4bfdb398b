// StyleGAN3's kernels (kernels/stylegan3.h): one thread per output element, float accumulation,
// the storage type in and out.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/check.h"
#include "kernels/channel_kernels.cuh"
#include "kernels/convert.cuh"
#include "kernels/fir1d.cuh"
#include "kernels/stylegan3.h"

namespace cnnbench {

namespace {

using ck::blocks_for;  // kernels/channel_kernels.cuh

// x viewed as [outer][len][inner] -> y [outer][out_len][inner]: blockIdx.y walks the outer rows,
// the x threads the row's out_len x inner outputs (fir1d_output), so that 32-bit index arithmetic
// suffices and a narrow inner (the channels of a pass along W) still fills the blocks.
template <typename T>
__global__ void fir1d_kernel(const T* x, int outer, int len, int inner, int rows, int c,
                             const float* f, const float* pre_scale, const float* bias, Fir1dPass p,
                             int out_len, T* y) {
  const int per_row = out_len * inner;
  for (int o = blockIdx.y; o < outer; o += gridDim.y) {
    const T* xo = x + int64_t(o) * len * inner;
    T* yo = y + int64_t(o) * per_row;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < per_row; e += gridDim.x * blockDim.x)
      store_f(yo, e, fir1d_output(xo, o, e, len, inner, rows, c, f, pre_scale, bias, p));
  }
}

__global__ void fourier_prepare_kernel(const float* t, const float* tr, const float* freqs,
                                       const float* phases, int n, int c, float sr, float bw,
                                       float* fp) {
  const int64_t total = int64_t(n) * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ni = j / c;
    const int ci = int(j % c);
    const float* tn = t + ni * 4;
    const float norm = sqrtf(tn[0] * tn[0] + tn[1] * tn[1]);
    const float r_c = tn[0] / norm, r_s = tn[1] / norm, t_x = tn[2] / norm, t_y = tn[3] / norm;
    // m = m_r @ m_t: rows (r_c, -r_s, -(r_c t_x - r_s t_y)), (r_s, r_c, -(r_s t_x + r_c t_y)).
    const float m[2][3] = {{r_c, -r_s, -(r_c * t_x - r_s * t_y)},
                           {r_s, r_c, -(r_s * t_x + r_c * t_y)}};
    float a[2][3];  // the first two rows of m @ transform (m's third row is (0, 0, 1))
    for (int row = 0; row < 2; ++row)
      for (int col = 0; col < 3; ++col)
        a[row][col] = m[row][0] * tr[col] + m[row][1] * tr[3 + col] + m[row][2] * tr[6 + col];
    const float f0 = freqs[ci * 2], f1 = freqs[ci * 2 + 1];
    const float ph = phases[ci] + f0 * a[0][2] + f1 * a[1][2];
    const float fx = f0 * a[0][0] + f1 * a[1][0], fy = f0 * a[0][1] + f1 * a[1][1];
    const float amp = fminf(fmaxf(1.f - (sqrtf(fx * fx + fy * fy) - bw) / (sr / 2 - bw), 0.f), 1.f);
    float* o = fp + j * 4;
    o[0] = fx, o[1] = fy, o[2] = ph, o[3] = amp;
  }
}

template <typename T>
__global__ void fourier_features_kernel(const float* fp, int n, int c, int size, float half,
                                        float scale, T* y) {
  const int64_t total = int64_t(n) * size * size * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int ci = int(j % c);
    int64_t r = j / c;
    const int ix = int(r % size);
    r /= size;
    const int iy = int(r % size);
    const int64_t ni = r / size;
    const float gx = (2.f * ix + 1.f) / size - 1.f, gy = (2.f * iy + 1.f) / size - 1.f;
    const float* q = fp + (ni * c + ci) * 4;
    const float arg = (gx * half) * q[0] + (gy * half) * q[1] + q[2];
    store_f(y, j, sinpif(2.f * arg) * q[3] * scale);
  }
}

// One block per image; blockDim.x 256.
template <typename T>
__global__ void class_embed_kernel(const T* x, int z_dim, int classes, const float* embed,
                                   int embed_dim, const float* pw, const float* pb, float wg,
                                   float bg, T* y) {
  __shared__ float best_v[256];
  __shared__ int best_i[256];
  __shared__ float proj[1024];
  __shared__ float part_z[256], part_p[256];
  const int64_t ni = blockIdx.x;
  const T* xn = x + ni * (z_dim + classes);
  float bv = -INFINITY;
  int bi = classes;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) {
    const float v = load_f(xn, z_dim + j);
    if (v > bv) bv = v, bi = j;  // j rises: the first of equal maxima stays
  }
  best_v[threadIdx.x] = bv, best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float ov = best_v[threadIdx.x + half];
      const int oi = best_i[threadIdx.x + half];
      if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x]))
        best_v[threadIdx.x] = ov, best_i[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  const int cls = best_i[0] < classes ? best_i[0] : 0;
  const float* e = embed + int64_t(cls) * embed_dim;
  for (int k = threadIdx.x; k < z_dim; k += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < embed_dim; ++j) acc += e[j] * pw[int64_t(k) * embed_dim + j];
    const float v = acc * wg + pb[k] * bg;
    proj[k] = (v >= 0.f ? v : 0.2f * v) * 1.41421356f;
  }
  __syncthreads();
  // The two sums of squares in a fixed order (a tree over the threads' partials), so that every
  // replay gives the same bits: shared-memory atomicAdd's order varies from run to run (call 68:
  // StyleGAN-XL's fp32 replays differed in the 7th digit).
  float sz = 0.f, sp = 0.f;
  for (int k = threadIdx.x; k < z_dim; k += blockDim.x) {
    const float z = load_f(xn, k);
    sz += z * z, sp += proj[k] * proj[k];
  }
  part_z[threadIdx.x] = sz, part_p[threadIdx.x] = sp;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      part_z[threadIdx.x] += part_z[threadIdx.x + half],
          part_p[threadIdx.x] += part_p[threadIdx.x + half];
    __syncthreads();
  }
  const float rz = rsqrtf(part_z[0] / z_dim + 1e-8f), rp = rsqrtf(part_p[0] / z_dim + 1e-8f);
  T* yn = y + ni * 2 * z_dim;
  for (int k = threadIdx.x; k < z_dim; k += blockDim.x) {
    store_f(yn, k, load_f(xn, k) * rz);
    store_f(yn, z_dim + k, proj[k] * rp);
  }
}

__global__ void rms_normalize_kernel(float* s, int count) {
  __shared__ float part[32];
  float sum = 0.f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += s[i] * s[i];
  for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int k = 0; k < int(blockDim.x) / 32; ++k) total += part[k];
    part[0] = rsqrtf(total / count);
  }
  __syncthreads();
  const float g = part[0];
  for (int i = threadIdx.x; i < count; i += blockDim.x) s[i] *= g;
}

}  // namespace

void launch_fir1d(const void* x, const Dims& in, DType t, const float* f, const float* pre_scale,
                  const float* bias, const Fir1dPass& p, void* y, cudaStream_t st) {
  const int len = p.along_h ? in.h : in.w;
  const int out_len = p.out_len(len);
  const int64_t outer = p.along_h ? in.n : int64_t(in.n) * in.h;
  const int64_t inner = p.along_h ? int64_t(in.w) * in.c : in.c;
  const int64_t per_row = int64_t(out_len) * inner;
  if (outer <= 0 || per_row <= 0) return;
  if (per_row > INT32_MAX || outer > INT32_MAX || int64_t(len) * inner > INT32_MAX)
    throw std::logic_error("launch_fir1d: a row of " + std::to_string(per_row) +
                           " outputs passes 32-bit indexing");
  const int threads = 256;
  const dim3 grid(unsigned(std::min<int64_t>((per_row + threads - 1) / threads, 1 << 20)),
                  unsigned(std::min<int64_t>(outer, 65535)));
  CNN_DISPATCH_DTYPE(t, fir1d_kernel<T>
                     <<<grid, threads, 0, st>>>(static_cast<const T*>(x), int(outer), len,
                                                int(inner), p.along_h ? 1 : in.h, in.c, f,
                                                pre_scale, bias, p, out_len, static_cast<T*>(y)));
  CNN_CHECK_CUDA(cudaGetLastError());
}

std::vector<Fir1dPass> filtered_lrelu_passes(const FilteredLreluSpec& s, int up_taps,
                                             int down_taps) {
  std::vector<Fir1dPass> out;
  Fir1dPass act;
  act.act = true;
  act.slope = s.slope, act.act_gain = s.gain, act.clamp = s.clamp;
  if (s.up == 1 && up_taps == 1 && s.pad_x0 == 0 && s.pad_x1 == 0 && s.pad_y0 == 0 &&
      s.pad_y1 == 0) {
    out.push_back(act);
  } else {
    Fir1dPass u;
    u.up = s.up, u.taps = up_taps, u.pad0 = s.pad_x0, u.pad1 = s.pad_x1, u.gain = float(s.up);
    out.push_back(u);
    Fir1dPass v = act;
    v.along_h = true;
    v.up = s.up, v.taps = up_taps, v.pad0 = s.pad_y0, v.pad1 = s.pad_y1, v.gain = float(s.up);
    out.push_back(v);
  }
  if (s.down > 1 || down_taps > 1) {
    Fir1dPass d;
    d.down = s.down, d.taps = down_taps;
    out.push_back(d);
    d.along_h = true;
    out.push_back(d);
  }
  out.back().out_scale = s.out_scale;
  return out;
}

void launch_filtered_lrelu(const void* x, const Dims& in, DType t,
                           const std::vector<Fir1dPass>& passes,
                           const std::vector<const float*>& taps, const float* pre_scale,
                           const float* bias, const std::vector<void*>& tmp, void* y,
                           cudaStream_t st) {
  Dims d = in;
  for (size_t i = 0; i < passes.size(); ++i) {
    void* out = i + 1 == passes.size() ? y : tmp.at(i);
    launch_fir1d(x, d, t, taps.at(i), i == 0 ? pre_scale : nullptr, i == 0 ? bias : nullptr,
                 passes[i], out, st);
    d = passes[i].out_dims(d);
    x = out;
  }
}

std::vector<Fir1dPass> separable_up_passes(const FirSpec& s) {
  if (s.down != 1 || s.fh != s.fw)
    throw std::logic_error("separable_up_passes: an up-sampling by a square separable filter");
  Fir1dPass x;
  x.up = s.up, x.taps = s.fw, x.pad0 = s.pad_x0, x.pad1 = s.pad_x1;
  x.gain = std::sqrt(s.gain);
  Fir1dPass y = x;
  y.along_h = true, y.pad0 = s.pad_y0, y.pad1 = s.pad_y1;
  return {x, y};
}

Dims separable_up_tmp(const Dims& in, const FirSpec& s) {
  return separable_up_passes(s)[0].out_dims(in);
}

void launch_upfirdn2d_separable(const void* x, const Dims& in, DType t, const float* f,
                                const FirSpec& s, void* tmp, void* y, cudaStream_t st) {
  const std::vector<Fir1dPass> p = separable_up_passes(s);
  launch_fir1d(x, in, t, f, nullptr, nullptr, p[0], tmp, st);
  launch_fir1d(tmp, p[0].out_dims(in), t, f, nullptr, nullptr, p[1], y, st);
}

void launch_fourier_prepare(const float* t, const float* transform, const float* freqs,
                            const float* phases, int n, int c, float sampling_rate, float bandwidth,
                            float* fp, cudaStream_t st) {
  const int64_t total = int64_t(n) * c;
  if (total == 0) return;
  fourier_prepare_kernel<<<blocks_for(total, 128), 128, 0, st>>>(t, transform, freqs, phases, n, c,
                                                                 sampling_rate, bandwidth, fp);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_fourier_features(const float* fp, int n, int c, int size, float sampling_rate, DType t,
                             void* y, cudaStream_t st) {
  const int64_t total = int64_t(n) * size * size * c;
  if (total == 0) return;
  CNN_DISPATCH_DTYPE(t, fourier_features_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(
                            fp, n, c, size, 0.5f * size / sampling_rate, 1.f, static_cast<T*>(y)));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_fourier_features_f32(const float* fp, int n, int c, int size, float sampling_rate,
                                 float scale, float* y, cudaStream_t st) {
  const int64_t total = int64_t(n) * size * size * c;
  if (total <= 0) return;
  fourier_features_kernel<float><<<blocks_for(total, 256), 256, 0, st>>>(
      fp, n, c, size, 0.5f * size / sampling_rate, scale, y);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_class_embed(const void* x, DType t, int n, int z_dim, int classes, const float* embed,
                        int embed_dim, const float* proj_w, const float* proj_b, float weight_gain,
                        float bias_gain, void* y, cudaStream_t st) {
  if (n == 0) return;
  if (z_dim > 1024) throw std::logic_error("launch_class_embed: z_dim over 1024");
  CNN_DISPATCH_DTYPE(t, class_embed_kernel<T><<<n, 256, 0, st>>>(
                            static_cast<const T*>(x), z_dim, classes, embed, embed_dim, proj_w,
                            proj_b, weight_gain, bias_gain, static_cast<T*>(y)));
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_rms_normalize(float* s, int count, cudaStream_t st) {
  if (count == 0) return;
  rms_normalize_kernel<<<1, 1024, 0, st>>>(s, count);
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace cnnbench
