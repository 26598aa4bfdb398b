// The minibatch standard deviation's kernels (kernels/mbstd.h): one block of kThreads per group
// j, whose members are the samples j + g n/G (g < G): element e of member g at x[(g n/G + j) K
// + e], K = h * w * c, so the members of (j, e) lie `stride` = (n/G) K apart. Each thread walks
// the elements with a stride of kThreads, the members' values re-read from memory (G is small);
// the per-group sums go through block_sum, a fixed-order tree in shared memory. The per-element
// arithmetic is in __host__ __device__ functions, so that a host program can replay it.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/check.h"
#include "kernels/mbstd.h"

namespace cnnbench {

namespace {

constexpr int kThreads = 256;
constexpr float kEps = float(kMbstdEps);

// The statistics of one element over the G members p[0], p[stride], ...: y_m = (p_m - mu) - cor
// (the corrected two-pass centring: cor, the mean of p_m - mu, removes mu's rounding, so that
// for two members y is (p_0 - p_1) / 2 to the last bit however close they are), sd = sqrt(mean
// of y^2 + 1e-8).
struct ElemStats {
  float mu, cor, sd;
  __host__ __device__ float y(float v) const { return (v - mu) - cor; }
};
__host__ __device__ inline ElemStats elem_stats(const float* p, int64_t stride, int G) {
  ElemStats s;
  float sum = 0.f;
  for (int m = 0; m < G; ++m) sum += p[m * stride];
  s.mu = sum / G;
  float r = 0.f;
  for (int m = 0; m < G; ++m) r += p[m * stride] - s.mu;
  s.cor = r / G;
  float v = 0.f;
  for (int m = 0; m < G; ++m) {
    const float y = s.y(p[m * stride]);
    v += y * y;
  }
  s.sd = sqrtf(v / G + kEps);
  return s;
}
// A = sum_m y_m xd_m, with the tangents xd_m at pd[m * stride].
__host__ __device__ inline float elem_a(const float* p, const float* pd, int64_t stride, int G,
                                        const ElemStats& s) {
  float a = 0.f;
  for (int m = 0; m < G; ++m) a += s.y(p[m * stride]) * pd[m * stride];
  return a;
}
__host__ __device__ inline float elem_mean(const float* p, int64_t stride, int G) {
  float sum = 0.f;
  for (int m = 0; m < G; ++m) sum += p[m * stride];
  return sum / G;
}

// The per-group constants of the backward: S (the sum of dy[..., c] over the group and (h, w))
// and Gd (of the tangent half's, dual only) as the multipliers of the per-element terms.
struct BackCoef {
  float k_stat;  // S / (G K): times y / sd, the ordinary backward's statistics term
  float k_dot;   // Gd / (G K): times (ydot / sd - A y / (G sd^3)), the primal half's term via gd
};
// dx_m, the primal half's (the ordinary backward's where not dual), and dxd_m, the tangent half's,
// of member m of an element: x its value, xd its tangent, dyp and dyd its dy values.
__host__ __device__ inline float elem_dx(float x, float dyp, float xd, float xd_mean, float a,
                                         const ElemStats& s, int G, const BackCoef& k, bool dual) {
  const float y = s.y(x);
  float v = dyp + k.k_stat * y / s.sd;
  if (dual) v += k.k_dot * ((xd - xd_mean) / s.sd - a * y / (G * s.sd * s.sd * s.sd));
  return v;
}
__host__ __device__ inline float elem_dxd(float x, float dyd, const ElemStats& s,
                                          const BackCoef& k) {
  return dyd + k.k_dot * s.y(x) / s.sd;
}

// The sum of v over the block (blockDim.x == kThreads), the same on every thread.
__device__ float block_sum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();  // sh free for the next call
  return r;
}

struct Geom {
  int n, hw, c, group, groups;
  int64_t K;       // hw * c
  int64_t stride;  // groups * K: from one member to the next
  // Sample i of group blockIdx.x's member m.
  __device__ int64_t member(int m) const { return int64_t(m) * groups + blockIdx.x; }
  // The offset in y (rows of c + 1) of element e of sample i.
  __device__ int64_t y_at(int64_t i, int64_t e) const { return (i * hw + e / c) * (c + 1) + e % c; }
};

// Copies sample src_i of x into sample dst_i of y and writes `s` into its extra channel.
__device__ void write_sample(const float* x, int64_t src_i, float s, const Geom& g, int64_t dst_i,
                             float* y) {
  for (int64_t e = threadIdx.x; e < g.K; e += kThreads) y[g.y_at(dst_i, e)] = x[src_i * g.K + e];
  for (int p = threadIdx.x; p < g.hw; p += kThreads) y[(dst_i * g.hw + p) * (g.c + 1) + g.c] = s;
}

// The sum of dy[..., c] over the group's members (offset by `base` samples) and (h, w).
__device__ float extra_sum(const float* dy, int64_t base, const Geom& g, float* sh) {
  float s = 0.f;
  for (int k = threadIdx.x; k < g.group * g.hw; k += kThreads) {
    const int64_t i = base + g.member(k / g.hw);
    s += dy[(i * g.hw + k % g.hw) * (g.c + 1) + g.c];
  }
  return block_sum(s, sh);
}

__global__ void mbstd_forward_kernel(const float* x, Geom g, bool dual, float* y) {
  __shared__ float sh[kThreads];
  const float* xj = x + int64_t(blockIdx.x) * g.K;  // member 0 of the group
  const float* xdj = xj + int64_t(g.n) * g.K;       // its tangent (dual only)
  float acc = 0.f, acc_dot = 0.f;
  for (int64_t e = threadIdx.x; e < g.K; e += kThreads) {
    const ElemStats st = elem_stats(xj + e, g.stride, g.group);
    acc += st.sd;
    if (dual) acc_dot += elem_a(xj + e, xdj + e, g.stride, g.group, st) / (g.group * st.sd);
  }
  const float s = block_sum(acc, sh) / float(g.K);
  const float s_dot = dual ? block_sum(acc_dot, sh) / float(g.K) : 0.f;
  for (int m = 0; m < g.group; ++m) {
    const int64_t i = g.member(m);
    write_sample(x, i, s, g, i, y);
    if (dual) write_sample(x, g.n + i, s_dot, g, g.n + i, y);
  }
}

// dx from dy (the ordinary backward), or, where dual, dx2 from dy2 (both halves).
__global__ void mbstd_backward_kernel(const float* x, const float* dy, Geom g, bool dual,
                                      float* dx) {
  __shared__ float sh[kThreads];
  BackCoef k;
  k.k_stat = extra_sum(dy, 0, g, sh) / (float(g.group) * float(g.K));
  k.k_dot = dual ? extra_sum(dy, g.n, g, sh) / (float(g.group) * float(g.K)) : 0.f;
  const float* xj = x + int64_t(blockIdx.x) * g.K;
  const float* xdj = xj + int64_t(g.n) * g.K;
  for (int64_t e = threadIdx.x; e < g.K; e += kThreads) {
    const ElemStats st = elem_stats(xj + e, g.stride, g.group);
    const float a = dual ? elem_a(xj + e, xdj + e, g.stride, g.group, st) : 0.f;
    const float xd_mean = dual ? elem_mean(xdj + e, g.stride, g.group) : 0.f;
    for (int m = 0; m < g.group; ++m) {
      const int64_t i = g.member(m);
      const float xv = x[i * g.K + e];
      const float xd = dual ? x[(g.n + i) * g.K + e] : 0.f;
      dx[i * g.K + e] = elem_dx(xv, dy[g.y_at(i, e)], xd, xd_mean, a, st, g.group, k, dual);
      if (dual) dx[(g.n + i) * g.K + e] = elem_dxd(xv, dy[g.y_at(g.n + i, e)], st, k);
    }
  }
}

Geom make_geom(const char* what, int n, int h, int w, int c, int group) {
  if (n < 0 || h <= 0 || w <= 0 || c <= 0 || group <= 0 || n % group != 0)
    throw std::invalid_argument(std::string(what) + ": batch " + std::to_string(n) +
                                " is not a multiple of the group " + std::to_string(group) +
                                " (or an empty dimension)");
  if (int64_t(h) * w > (1 << 30)) throw std::invalid_argument(std::string(what) + ": h * w");
  Geom g;
  g.n = n, g.hw = h * w, g.c = c, g.group = group, g.groups = n / group;
  g.K = int64_t(h) * w * c;
  g.stride = int64_t(g.groups) * g.K;
  return g;
}

}  // namespace

void launch_mbstd_forward(const float* x, int n, int h, int w, int c, int group, float* y,
                          cudaStream_t stream) {
  const Geom g = make_geom("launch_mbstd_forward", n, h, w, c, group);
  if (n == 0) return;
  mbstd_forward_kernel<<<g.groups, kThreads, 0, stream>>>(x, g, false, y);
  CNN_CHECK_LAUNCH();
}

void launch_mbstd_backward(const float* x, const float* dy, int n, int h, int w, int c, int group,
                           float* dx, cudaStream_t stream) {
  const Geom g = make_geom("launch_mbstd_backward", n, h, w, c, group);
  if (n == 0) return;
  mbstd_backward_kernel<<<g.groups, kThreads, 0, stream>>>(x, dy, g, false, dx);
  CNN_CHECK_LAUNCH();
}

void launch_mbstd_forward_dual(const float* x2, int n, int h, int w, int c, int group, float* y2,
                               cudaStream_t stream) {
  const Geom g = make_geom("launch_mbstd_forward_dual", n, h, w, c, group);
  if (n == 0) return;
  mbstd_forward_kernel<<<g.groups, kThreads, 0, stream>>>(x2, g, true, y2);
  CNN_CHECK_LAUNCH();
}

void launch_mbstd_backward_dual(const float* x2, const float* dy2, int n, int h, int w, int c,
                                int group, float* dx2, cudaStream_t stream) {
  const Geom g = make_geom("launch_mbstd_backward_dual", n, h, w, c, group);
  if (n == 0) return;
  mbstd_backward_kernel<<<g.groups, kThreads, 0, stream>>>(x2, dy2, g, true, dx2);
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
