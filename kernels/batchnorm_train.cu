// BatchNorm in training mode, forward and backward (declared in kernels/train_kernels.h), with
// what a network fuses into it: the residual added after it and the activation after that (ReLU
// or SiLU). Two paths compute the same things:
// - scalar kernels, one element per thread (kTileC channels by kTileR row lanes), for any stride
//   and channel count (a channel slice of a concat buffer, 3 channels);
// - vectorised kernels for packed rows whose channel count the 16-byte pack divides: a thread
//   owns V adjacent channels (8 in fp16/bf16, 4 in fp32) of a column, keeps their constants in
//   registers while it walks rows, and Welford's update shares one reciprocal across the pack.
// Both write the same partial layout, so the finalize kernels are shared, and every sum runs in a
// fixed order: a run repeats bit for bit. CNNBENCH_SCALAR_BN=1 forces the scalar path (for
// comparison).
// SiLU's sigmoid, forward and backward, runs on the multi-function unit (ex2.approx and rcp.approx,
// sigmoid_mufu): its derivative had made the fused backward issue-bound, at about half the
// bandwidth of the ReLU form (issue 9). CNNBENCH_BN_EXACT_SILU=1 takes expf and an IEEE division
// again (for comparison).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include "kernels/activation.cuh"
#include "kernels/channel_kernels.cuh"
#include "kernels/train_kernels.h"

namespace cnnbench {

using namespace ck;

namespace {

// SiLU's sigmoid: sigmoid_mufu (M), or expf and an IEEE division (the form before).
template <bool M>
__device__ __forceinline__ float silu_sigmoid(float v) {
  return M ? sigmoid_mufu(v) : 1.0f / (1.0f + expf(-v));
}

// The forward's activation: activate's (SiLU through sigmoid_mufu), or with M false SiLU as
// v / (1 + expf(-v)), the form before (CNNBENCH_BN_EXACT_SILU=1).
template <Act A, bool M>
__device__ __forceinline__ float bn_activate(float v) {
  if (A == Act::SiLU && !M) return v / (1.0f + expf(-v));
  return activate(A, v);
}

// The gradient through the activation: d = dy * act'(v) for the pre-activation v, given (ReLU)
// the activation's output y or (SiLU) v itself.
template <Act A, bool M>
__device__ __forceinline__ float act_grad(float dy, float y, float v) {
  if (A == Act::ReLU) return y > 0.0f ? dy : 0.0f;
  if (A == Act::SiLU) {
    const float s = silu_sigmoid<M>(v);
    return dy * s * (1.0f + v * (1.0f - s));
  }
  return dy;
}

// ReLU's mask where the backward is not given y (a BatchNorm with no residual): the forward's
// pre-activation v = (x - mean) * (invstd * gamma) + beta, recomputed in the forward's order of
// operations (bn_apply, bn_apply_vec), is positive after rounding to the storage type exactly where
// the stored y = relu(v) is. Saves reading y twice.
// Rounding to nearest even keeps v positive exactly above half the type's smallest subnormal (that
// half itself rounds to the even 0): 2^-25 for fp16 (subnormals from 2^-24), 2^-134 for bf16
// (from 2^-133; a float subnormal); negatives, zeros and NaN are not positive either way. So a
// compare stands for the round trip (two conversions an element, which made the ReLU backward
// from x conversion-heavy); bn_stored_positive exposes it, and a CPU test checks it against the
// round trip through the storage type.
template <typename T>
__host__ __device__ __forceinline__ float stored_positive(float v) {
  if (std::is_same<T, __half>::value) return v > 0x1p-25f ? 1.0f : 0.0f;
  if (std::is_same<T, __nv_bfloat16>::value) return v > 0x1p-134f ? 1.0f : 0.0f;
  return v > 0.0f ? 1.0f : 0.0f;
}

// ---- Statistics
// ----------------------------------------------------------------------------------

// Pass 1, scalar. Grid (channel tiles, chunks): each thread runs Welford over its rows of the
// chunk, the block merges its row lanes, and writes (count, mean, M2) per channel to
// part[q][chunk][c], q = 0, 1, 2.
template <typename T>
__global__ void bn_stats_partial(const T* x, int ld_x, int64_t rows, int C, int64_t rows_per,
                                 float* part) {
  __shared__ float sn[kTileR][kTileC], sm[kTileR][kTileC], s2[kTileR][kTileC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileC + tx, chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t r0 = int64_t(chunk) * rows_per, r1 = min(rows, r0 + rows_per);
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  if (c < C)
    for (int64_t r = r0 + ty; r < r1; r += kTileR) {
      const float v = load_f(x, r * ld_x + c);
      n += 1.0f;
      const float d = v - mean;
      mean += d / n;
      m2 += d * (v - mean);
    }
  sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
  __syncthreads();
  for (int h = kTileR / 2; h > 0; h /= 2) {
    if (ty < h) {
      welford_merge(n, mean, m2, sn[ty + h][tx], sm[ty + h][tx], s2[ty + h][tx]);
      sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
    }
    __syncthreads();
  }
  if (ty == 0 && c < C) {
    const int64_t plane = int64_t(chunks) * C, at = int64_t(chunk) * C + c;
    part[at] = n;
    part[plane + at] = mean;
    part[2 * plane + at] = m2;
  }
}

// Pass 1, vectorised: the same partials, a pack of V channels per thread. Lanes merge pairwise
// (lane l takes lane l + h where l is a multiple of 2h), so any number of lanes works.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    bn_stats_vec(const T* x, int64_t rows, int C, int vx, int vy, int64_t rows_per, float* part,
                 bool rev) {
  __shared__ float sh[(2 * V + 1) * kThreads];
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  const bool active = pack * V < C;
  const int64_t chunk = swept(blockIdx.y, gridDim.y, rev);  // rows and partials alike
  const int64_t r0 = chunk * rows_per, r1 = min(rows, r0 + rows_per);
  float n = 0.0f, mean[V], m2[V];
#pragma unroll
  for (int k = 0; k < V; ++k) mean[k] = 0.0f, m2[k] = 0.0f;
  // Two rows' packs loaded before either is taken in, in the same order as one at a time: the
  // same bits, two loads in flight a thread.
  if (active)
    for (int64_t r = r0 + lane; r < r1; r += 2 * int64_t(vy)) {
      float v[2][V];
      const bool second = r + vy < r1;
      load_pack<T, V>(x + r * C, pack, v[0]);
      if (second) load_pack<T, V>(x + (r + vy) * C, pack, v[1]);
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (u == 1 && !second) break;
        n += 1.0f;
        const float inv = 1.0f / n;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = v[u][k] - mean[k];
          mean[k] += d * inv;
          m2[k] += d * (v[u][k] - mean[k]);
        }
      }
    }
  const int me = threadIdx.x;
  sh[me] = n;
#pragma unroll
  for (int k = 0; k < V; ++k)
    sh[(1 + k) * kThreads + me] = mean[k], sh[(1 + V + k) * kThreads + me] = m2[k];
  for (int h = 1; h < vy; h *= 2) {
    __syncthreads();
    if (lane % (2 * h) == 0 && lane + h < vy) {
      const int o = me + h * vx;
      const float nb = sh[o];
      if (nb != 0.0f) {
        const float nn = n + nb, f = nb / nn;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = sh[(1 + k) * kThreads + o] - mean[k];
          mean[k] += d * f;
          m2[k] += sh[(1 + V + k) * kThreads + o] + d * d * n * f;
          sh[(1 + k) * kThreads + me] = mean[k];
          sh[(1 + V + k) * kThreads + me] = m2[k];
        }
        n = nn;
        sh[me] = n;
      }
    }
  }
  if (lane != 0 || !active) return;
  const int64_t plane = int64_t(gridDim.y) * C;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int64_t at = chunk * C + pack * V + k;
    part[at] = n;
    part[plane + at] = mean[k];
    part[2 * plane + at] = m2[k];
  }
}

// Pass 2. Grid (fin_tiles(C, TC)), block (TC, R = kFinThreads / TC): lane ty merges chunks ty,
// ty + R, ...
// then the lanes merge pairwise; mean, invstd and the running statistics.
template <int TC>
__global__ void __launch_bounds__(kFinThreads)
    bn_stats_finalize(const float* part, int C, int chunks, int64_t rows, float eps, float momentum,
                      float keep, float* mean_out, float* invstd_out, float* running_mean,
                      float* running_var) {
  constexpr int R = kFinThreads / TC;  // lanes a channel
  __shared__ float sn[R][TC], sm[R][TC], s2[R][TC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * TC + tx;
  const int64_t plane = int64_t(chunks) * C;
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  // kFinBatch chunks' partials loaded before they are merged, in the same order as one at a
  // time: one memory latency a batch instead of one a chunk (a missing chunk reads as count 0,
  // which welford_merge skips, as it skips an empty chunk).
  if (c < C)
    for (int k0 = ty; k0 < chunks; k0 += kFinBatch * R) {
      float pn[kFinBatch], pm[kFinBatch], p2[kFinBatch];
#pragma unroll
      for (int u = 0; u < kFinBatch; ++u) {
        const int k = k0 + u * R;
        const int64_t at = int64_t(k) * C + c;
        pn[u] = k < chunks ? part[at] : 0.0f;
        pm[u] = k < chunks ? part[plane + at] : 0.0f;
        p2[u] = k < chunks ? part[2 * plane + at] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kFinBatch; ++u) welford_merge(n, mean, m2, pn[u], pm[u], p2[u]);
    }
  sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
  __syncthreads();
  for (int h = R / 2; h > 0; h /= 2) {
    if (ty < h) {
      welford_merge(n, mean, m2, sn[ty + h][tx], sm[ty + h][tx], s2[ty + h][tx]);
      sn[ty][tx] = n, sm[ty][tx] = mean, s2[ty][tx] = m2;
    }
    __syncthreads();
  }
  if (ty != 0 || c >= C) return;
  const float var = m2 / float(rows);
  mean_out[c] = mean;
  invstd_out[c] = 1.0f / sqrtf(var + eps);
  // keep = 1 - momentum, computed in double on the host.
  if (running_mean) running_mean[c] = keep * running_mean[c] + momentum * mean;
  if (running_var) running_var[c] = keep * running_var[c] + momentum * (m2 / float(rows - 1));
}

void launch_bn_stats_finalize(const float* part, int C, int chunks, int64_t rows, float eps,
                              float momentum, float keep, float* mean, float* invstd,
                              float* running_mean, float* running_var, cudaStream_t stream) {
  with_fin_channels(C, 1, [&](auto tc) {
    constexpr int TC = decltype(tc)::value;
    bn_stats_finalize<TC><<<fin_tiles(C, TC), dim3(TC, kFinThreads / TC), 0, stream>>>(
        part, C, chunks, rows, eps, momentum, keep, mean, invstd, running_mean, running_var);
  });
  CNN_CHECK_LAUNCH();
}

// ---- Forward: y = act((x - mean) * invstd * gamma + beta + z) -----------------------------------

template <typename T, Act A, bool M>
__global__ void bn_apply(const T* x, int ld_x, const T* z, int ld_z, T* y, int ld_y,
                         const float* mean, const float* invstd, const float* gamma,
                         const float* beta, int64_t rows, int C) {
  const int c = blockIdx.x * kTileC + threadIdx.x;
  if (c >= C) return;
  const float mu = mean[c], k = invstd[c] * (gamma ? gamma[c] : 1.0f), b = beta ? beta[c] : 0.0f;
  for (int64_t r = int64_t(blockIdx.y) * kTileR + threadIdx.y; r < rows;
       r += int64_t(gridDim.y) * kTileR) {
    float v = __fmaf_rn(load_f(x, r * ld_x + c) - mu, k, b);  // the mask's recompute: the same
    if (z) v += load_f(z, r * ld_z + c);
    store_f(y, r * ld_y + c, bn_activate<A, M>(v));
  }
}

// With `mask` (ReLU only): byte r * (C / V) + pack holds bit q set where y's stored value q of
// the pack is positive, the test the backward makes on y.
template <typename T, int V, Act A, bool M>
__global__ void __launch_bounds__(kThreads)
    bn_apply_vec(const T* x, const T* z, T* y, uint8_t* mask, const float* mean,
                 const float* invstd, const float* gamma, const float* beta, int64_t rows, int C,
                 int vx, int vy, bool rev) {
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  if (pack * V >= C) return;
  float mu[V], k[V], b[V];
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const int c = pack * V + q;
    mu[q] = mean[c];
    k[q] = invstd[c] * (gamma ? gamma[c] : 1.0f);
    b[q] = beta ? beta[c] : 0.0f;
  }
  for (int64_t i = int64_t(blockIdx.y) * vy + lane; i < rows; i += int64_t(gridDim.y) * vy) {
    const int64_t r = swept(i, rows, rev);
    float v[V], zv[V];
    load_pack<T, V>(x + r * C, pack, v);
    if (z) load_pack<T, V>(z + r * C, pack, zv);
#pragma unroll
    for (int q = 0; q < V; ++q) {
      v[q] = __fmaf_rn(v[q] - mu[q], k[q], b[q]);  // stored_positive's recompute: the same
      if (z) v[q] += zv[q];
      v[q] = bn_activate<A, M>(v[q]);
    }
    store_pack<T, V>(y + r * C, pack, v);
    if (A == Act::ReLU && mask) {
      unsigned bits = 0;
#pragma unroll
      for (int q = 0; q < V; ++q)
        if (stored_positive<T>(v[q]) > 0.0f) bits |= 1u << q;
      mask[r * (C / V) + pack] = uint8_t(bits);
    }
  }
}

// ---- Backward
// ------------------------------------------------------------------------------------ d = dy
// through the activation (ReLU: masked by the forward's output y > 0; SiLU: times SiLU's derivative
// at v = xhat * gamma + beta, recomputed); dbeta = sum d, dgamma = sum d * xhat; dx = gamma *
// invstd * (d - dbeta / rows - xhat * dgamma / rows); dz = d where asked.

// Scalar pass 1's terms, for launch_channel_sums: (d, d * xhat).
template <typename T, Act A, bool M>
struct BnGradTerms {
  const T *x, *y, *dy;
  const float *mean, *invstd, *gamma, *beta;
  int ld_x, ld_y;
  __device__ void operator()(int, int64_t r, int c, float (&v)[2]) const {
    const float xv = load_f(x, r * ld_x + c);
    const float xhat = (xv - mean[c]) * invstd[c];
    const float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
    const float pre = A == Act::SiLU ? xhat * g + b : 0.0f;
    float mask = 0.0f;
    if (A == Act::ReLU)
      mask = y ? load_f(y, r * ld_y + c)
               : stored_positive<T>(__fmaf_rn(xv - mean[c], invstd[c] * g, b));
    const float d = act_grad<A, M>(load_f(dy, r * ld_y + c), mask, pre);
    v[0] = d;
    v[1] = d * xhat;
  }
};

// Pass 2 of both paths: dbeta, dgamma, and the dx kernel's per-channel coefficients,
// coef[0][c] = gamma * invstd (on d), coef[1][c] = -gamma * invstd^2 * dgamma / rows (on x - mean),
// coef[2][c] = -gamma * invstd * dbeta / rows.
struct BnGradOut {
  float *dgamma, *dbeta, *coef;
  const float *gamma, *invstd;
  int C;
  float inv_rows;
  __device__ void operator()(int, int c, const float (&s)[2]) const {
    dbeta[c] = s[0];
    dgamma[c] = s[1];
    const float is = invstd[c], k = (gamma ? gamma[c] : 1.0f) * is;
    coef[c] = k;
    coef[C + c] = -k * is * s[1] * inv_rows;
    coef[2 * C + c] = -k * s[0] * inv_rows;
  }
};

template <typename T, Act A, bool M>
__global__ void bn_backward_dx(const T* x, const T* y, const T* dy, T* dx, T* dz, int ld_x,
                               int ld_y, int ld_z, const float* mean, const float* invstd,
                               const float* gamma, const float* beta, const float* coef,
                               int64_t rows, int C, bool accumulate, bool accumulate_dz) {
  const int c = blockIdx.x * kTileC + threadIdx.x;
  if (c >= C) return;
  const float mu = mean[c], is = invstd[c];
  const float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
  const float ca = coef[c], cb = coef[C + c], cc = coef[2 * C + c];
  for (int64_t r = int64_t(blockIdx.y) * kTileR + threadIdx.y; r < rows;
       r += int64_t(gridDim.y) * kTileR) {
    const float xc = load_f(x, r * ld_x + c) - mu;
    float mask = 0.0f;
    if (A == Act::ReLU)
      mask = y ? load_f(y, r * ld_y + c) : stored_positive<T>(__fmaf_rn(xc, is * g, b));
    const float d = act_grad<A, M>(load_f(dy, r * ld_y + c), mask, xc * is * g + b);
    float v = ca * d + cb * xc + cc;
    if (accumulate) v += load_f(dx, r * ld_x + c);
    store_f(dx, r * ld_x + c, v);
    if (dz) store_f(dz, r * ld_z + c, accumulate_dz ? load_f(dz, r * ld_z + c) + d : d);
  }
}

// Where the vectorised backward takes ReLU's mask from (a template parameter, so that each form
// holds only its own registers): the saved y, the forward's bits, or recomputed from x.
enum class MaskFrom { Y, Bits, X };

// Vectorised pass 1: (d, d * xhat) summed per channel and chunk, to part[q][chunk][c]
// (channel_sums_finalize's layout with one segment).
// The mask's source S is a template parameter so that each form holds only its own registers:
// with the three sources chosen at run time in one kernel, the ReLU forms held 92 to 96 registers
// (2 blocks of 256 an SM) and ran at 31 to 62% of the bandwidth on ResNet-50's shapes, the plain
// form (56 to 69 registers, 3 to 4 blocks) at 77 to 97% (call 81). Two rows in flight a thread at
// 2 blocks an SM was slower still (call 86). The terms that depend on the mask are rounded by
// explicit intrinsics, so that each form computes the same bits from the same mask whatever the
// compiler contracts in its own instantiation (call 86: the y and bits forms differed in dx's
// last bits when left to contraction). SiLU's derivative is taken at the forward's own
// pre-activation, __fmaf_rn(x - mean, invstd * gamma, beta) (bn_apply_vec's), in both passes:
// pass 1 had taken it at (x - mean) * invstd * gamma + beta, a last bit away from pass 3's.
// B, the blocks of 256 threads an SM the registers must leave room for: 3 by default (at most 80
// registers; ptxas spills nothing in any form but the exact-SiLU comparison one, 8 to 16 bytes),
// where the SiLU forms and ReLU's from-x form had held 89 to 94 (2 blocks) and the forms at 3 to 4
// blocks ran at up to 90% of the bandwidth in call 87. 1 (no bound) under
// CNNBENCH_BN_BWD_FREE_REGS=1, for the A/B. Neither changes a result: the bound moves registers,
// not arithmetic.
template <typename T, int V, Act A, bool M, MaskFrom S, int B>
__global__ void __launch_bounds__(kThreads, B)
    bn_grad_sums_vec(const T* x, const T* y, const uint8_t* mask, const T* dy, const float* mean,
                     const float* invstd, const float* gamma, const float* beta, int64_t rows,
                     int C, int vx, int vy, int64_t rows_per, float* part, bool rev) {
  __shared__ float sh[2 * V * kThreads];
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  const bool active = pack * V < C;
  const int64_t chunk = swept(blockIdx.y, gridDim.y, rev);  // rows and partials alike
  const int64_t r0 = chunk * rows_per, r1 = min(rows, r0 + rows_per);
  float s[2][V], mu[V], is[V], kv[V], bv[V], kf[V];  // s: the sums of d and d * xhat
  // ReLU's mask: read from y, from the forward's bits, or recomputed (stored_positive).
  constexpr bool from_x = A == Act::ReLU && S == MaskFrom::X;
  constexpr bool use_y = A == Act::ReLU && S == MaskFrom::Y;
  constexpr bool use_bits = A == Act::ReLU && S == MaskFrom::Bits;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const int c = active ? pack * V + q : 0;
    s[0][q] = 0.0f, s[1][q] = 0.0f;
    mu[q] = mean[c], is[q] = invstd[c];
    if (A == Act::SiLU || from_x) kv[q] = gamma ? gamma[c] : 1.0f, bv[q] = beta ? beta[c] : 0.0f;
    kf[q] = from_x || A == Act::SiLU ? is[q] * kv[q] : 0.0f;  // invstd * gamma, as the forward's
  }
  if (active)
    for (int64_t r = r0 + lane; r < r1; r += vy) {
      float d[V], xv[V], yv[V];
      load_pack<T, V>(dy + r * C, pack, d);
      load_pack<T, V>(x + r * C, pack, xv);
      if (use_y) load_pack<T, V>(y + r * C, pack, yv);
      const unsigned bits = use_bits ? mask[r * (C / V) + pack] : 0u;
#pragma unroll
      for (int q = 0; q < V; ++q) {
        const float xc = __fsub_rn(xv[q], mu[q]);
        if (from_x) yv[q] = stored_positive<T>(__fmaf_rn(xc, kf[q], bv[q]));
        if (use_bits) yv[q] = (bits >> q) & 1u ? 1.0f : 0.0f;
        const float xhat = __fmul_rn(xc, is[q]);
        const float dq = act_grad<A, M>(d[q], A == Act::ReLU ? yv[q] : 0.0f,
                                        A == Act::SiLU ? __fmaf_rn(xc, kf[q], bv[q]) : 0.0f);
        s[0][q] = __fadd_rn(s[0][q], dq);
        s[1][q] = __fmaf_rn(dq, xhat, s[1][q]);
      }
    }
  merge_lane_sums<2, V>(s, sh, lane, vx, vy);
  if (lane != 0 || !active) return;
  const int64_t chunks = gridDim.y;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const int64_t c = pack * V + q;
    part[chunk * C + c] = s[0][q];
    part[(chunks + chunk) * C + c] = s[1][q];
  }
}

// Vectorised pass 3: dx (= or +=) coef0 * d + coef1 * (x - mean) + coef2, and dz (= or +=) d;
// the mask's source and the rounding as pass 1.
template <typename T, int V, Act A, bool M, MaskFrom S, int B>
__global__ void __launch_bounds__(kThreads, B)
    bn_backward_dx_vec(const T* x, const T* y, const uint8_t* mask, const T* dy, T* dx, T* dz,
                       const float* mean, const float* invstd, const float* gamma,
                       const float* beta, const float* coef, int64_t rows, int C, int vx, int vy,
                       bool accumulate, bool accumulate_dz, bool rev) {
  const int col = threadIdx.x % vx, lane = threadIdx.x / vx;
  const int pack = blockIdx.x * vx + col;
  if (pack * V >= C) return;
  float mu[V], ca[V], cb[V], cc[V], kv[V], bv[V];
  constexpr bool from_x = A == Act::ReLU && S == MaskFrom::X;  // as bn_grad_sums_vec
  constexpr bool use_y = A == Act::ReLU && S == MaskFrom::Y;
  constexpr bool use_bits = A == Act::ReLU && S == MaskFrom::Bits;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const int c = pack * V + q;
    mu[q] = mean[c];
    ca[q] = coef[c], cb[q] = coef[C + c], cc[q] = coef[2 * C + c];
    if (A == Act::SiLU || from_x) {  // v = (x - mean) * kv + bv
      kv[q] = invstd[c] * (gamma ? gamma[c] : 1.0f);
      bv[q] = beta ? beta[c] : 0.0f;
    }
  }
  for (int64_t i = int64_t(blockIdx.y) * vy + lane; i < rows; i += int64_t(gridDim.y) * vy) {
    const int64_t r = swept(i, rows, rev);
    float d[V], xv[V], yv[V];
    load_pack<T, V>(dy + r * C, pack, d);
    load_pack<T, V>(x + r * C, pack, xv);
    if (use_y) load_pack<T, V>(y + r * C, pack, yv);
    const unsigned bits = use_bits ? mask[r * (C / V) + pack] : 0u;
#pragma unroll
    for (int q = 0; q < V; ++q) {
      const float xc = __fsub_rn(xv[q], mu[q]);
      if (from_x) yv[q] = stored_positive<T>(__fmaf_rn(xc, kv[q], bv[q]));
      if (use_bits) yv[q] = (bits >> q) & 1u ? 1.0f : 0.0f;
      d[q] = act_grad<A, M>(d[q], A == Act::ReLU ? yv[q] : 0.0f,
                            A == Act::SiLU ? __fmaf_rn(xc, kv[q], bv[q]) : 0.0f);
      xv[q] = __fmaf_rn(ca[q], d[q], __fmaf_rn(cb[q], xc, cc[q]));
    }
    store_pack_acc<T, V>(dx + r * C, pack, xv, accumulate);
    if (dz) store_pack_acc<T, V>(dz + r * C, pack, d, accumulate_dz);
  }
}

bool scalar_bn_forced() {
  static const bool forced = env_is_one("CNNBENCH_SCALAR_BN");
  return forced;
}

bool free_regs_forced() {
  static const bool forced = env_is_one("CNNBENCH_BN_BWD_FREE_REGS");
  return forced;
}

bool exact_silu_forced() {
  static const bool forced = env_is_one("CNNBENCH_BN_EXACT_SILU");
  return forced;
}

// The row blocks of an apply or dx pass: vec_row_blocks', or under kBnSweepOneWave no more than
// fit on the device at once (every block resident, so the grid-stride loop walks the rows as one
// front, not once a wave).
// The blocks of `threads` threads of `kernel` resident on the current device at once, asked once
// per (device, kernel, block size) and kept: the BatchNorm launches need it at every launch.
int resident_blocks(const void* kernel, int threads) {
  static std::mutex m;
  static std::map<std::tuple<int, const void*, int>, int> known;
  int dev = 0;
  CNN_CHECK_CUDA(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(m);
  const auto key = std::make_tuple(dev, kernel, threads);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  int sms = 0, per_sm = 0;
  CNN_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CNN_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return known[key] = per_sm * sms;
}

template <typename K>
unsigned sweep_row_blocks(K kernel, int64_t rows, const VecGeom& g, int sweep) {
  const unsigned want = vec_row_blocks(rows, g);
  if (!(sweep & kBnSweepOneWave)) return want;
  const int resident = resident_blocks(reinterpret_cast<const void*>(kernel), g.vx * g.vy);
  const int64_t wave = std::max<int64_t>(1, int64_t(resident) / g.tiles);
  return unsigned(std::min<int64_t>(want, wave));
}

// Calls the body with A the compile-time activation (None, ReLU or SiLU) and M whether SiLU's
// sigmoid runs on the multi-function unit (sigmoid_mufu; not under CNNBENCH_BN_EXACT_SILU=1).
#define CNN_DISPATCH_BN_ACT(act, ...)  \
  do {                                 \
    switch (act) {                     \
      case Act::ReLU: {                \
        constexpr Act A = Act::ReLU;   \
        constexpr bool M = true;       \
        __VA_ARGS__;                   \
      } break;                         \
      case Act::SiLU:                  \
        if (exact_silu_forced()) {     \
          constexpr Act A = Act::SiLU; \
          constexpr bool M = false;    \
          __VA_ARGS__;                 \
        } else {                       \
          constexpr Act A = Act::SiLU; \
          constexpr bool M = true;     \
          __VA_ARGS__;                 \
        }                              \
        break;                         \
      default: {                       \
        constexpr Act A = Act::None;   \
        constexpr bool M = true;       \
        __VA_ARGS__;                   \
      } break;                         \
    }                                  \
  } while (0)

void check_act(Act a, const char* who) {
  if (a != Act::None && a != Act::ReLU && a != Act::SiLU)
    throw std::invalid_argument(std::string(who) + ": the activation must be none, ReLU or SiLU");
}

// A ReLU mask goes with ReLU and the vectorised kernels only (bn_relu_masks_available).
void check_relu_mask(const uint8_t* mask, const BnTrainSpec& s, bool vec, const char* who) {
  if (!mask) return;
  if (s.act != Act::ReLU)
    throw std::invalid_argument(std::string(who) + ": a ReLU mask without ReLU");
  if (!vec)
    throw std::invalid_argument(std::string(who) +
                                ": a ReLU mask needs packed, 16-byte aligned rows whose channels "
                                "the 16-byte pack divides (and no CNNBENCH_SCALAR_BN)");
}

}  // namespace

// ---- Launchers
// -----------------------------------------------------------------------------------

size_t channel_reduce_scratch_bytes(int64_t rows, int channels, int segments) {
  const int room = reduce_room(rows, channels, segments);
  // The partials, then three coefficients per channel (BatchNorm's backward).
  return (3 * size_t(room) * size_t(segments) + 3) * size_t(channels) * sizeof(float);
}

namespace {
std::atomic<int>& sweep_bits() {
  static std::atomic<int> bits{env_int_in("CNNBENCH_BN_SWEEP", kBnSweepDefault, 0, kBnSweepAll)};
  return bits;
}
}  // namespace

int bn_sweep() {
  return sweep_bits().load(std::memory_order_relaxed);
}

int set_bn_sweep(int bits) {
  if (bits < 0 || bits > kBnSweepAll)
    throw std::invalid_argument("set_bn_sweep: " + std::to_string(bits) + " is not 0 to " +
                                std::to_string(kBnSweepAll));
  return sweep_bits().exchange(bits);
}

bool bn_relu_masks_available() {
  return !scalar_bn_forced();
}

bool bn_stored_positive(DType t, float v) {
  bool positive = false;
  CNN_DISPATCH_DTYPE(t, positive = stored_positive<T>(v) > 0.0f);
  return positive;
}

void launch_bn_forward_train(DType t, const void* x, const void* z, void* y, const float* gamma,
                             const float* beta, float* mean, float* invstd, float* running_mean,
                             float* running_var, const BnTrainSpec& s, void* scratch,
                             cudaStream_t stream, uint8_t* relu_mask) {
  const int C = s.channels;
  if (s.rows <= 0 || C <= 0) return;
  check_act(s.act, "launch_bn_forward_train");
  const int ld_x = ld_or(s.ld_x, C), ld_y = ld_or(s.ld_y, C), ld_z = ld_or(s.ld_z, C);
  float* part = static_cast<float*>(scratch);
  const float eps = float(s.eps), momentum = float(s.momentum), keep = float(1.0 - s.momentum);
  const bool vec = !scalar_bn_forced() && vectorisable(t, C, {ld_x, ld_y, z ? ld_z : C}, {x, y, z});
  check_relu_mask(relu_mask, s, vec, "launch_bn_forward_train");
  if (!y && (relu_mask || z))
    throw std::invalid_argument(
        "launch_bn_forward_train: statistics only (no y) takes no residual and no mask");
  if (vec) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / int(sizeof(T));
      const VecGeom g = vec_geom(C, V);
      const int chunks = vec_chunks(s.rows, C, g);
      const int64_t rows_per = (s.rows + chunks - 1) / chunks;
      const int sweep = bn_sweep();
      bn_stats_vec<T, V><<<dim3(g.tiles, chunks), g.vx * g.vy, 0, stream>>>(
          static_cast<const T*>(x), s.rows, C, g.vx, g.vy, rows_per, part,
          (sweep & kBnSweepStats) != 0);
      CNN_CHECK_LAUNCH();
      launch_bn_stats_finalize(part, C, chunks, s.rows, eps, momentum, keep, mean, invstd,
                               running_mean, running_var, stream);
      if (!y) return;  // statistics only
      CNN_DISPATCH_BN_ACT(s.act, {
        const auto kernel = bn_apply_vec<T, V, A, M>;
        kernel<<<dim3(g.tiles, sweep_row_blocks(kernel, s.rows, g, sweep)), g.vx * g.vy, 0,
                 stream>>>(static_cast<const T*>(x), static_cast<const T*>(z), static_cast<T*>(y),
                           relu_mask, mean, invstd, gamma, beta, s.rows, C, g.vx, g.vy,
                           (sweep & kBnSweepApply) != 0);
      });
      CNN_CHECK_LAUNCH();
    });
    return;
  }
  const Chunks ch = reduce_chunks(s.rows, C, 1);
  const dim3 block(kTileC, kTileR);
  CNN_DISPATCH_DTYPE(t, bn_stats_partial<T><<<dim3(channel_tiles(C), ch.count), block, 0, stream>>>(
                            static_cast<const T*>(x), ld_x, s.rows, C, ch.rows_per, part));
  CNN_CHECK_LAUNCH();
  launch_bn_stats_finalize(part, C, ch.count, s.rows, eps, momentum, keep, mean, invstd,
                           running_mean, running_var, stream);
  if (!y) return;  // statistics only
  CNN_DISPATCH_DTYPE(t, CNN_DISPATCH_BN_ACT(s.act, {
                       bn_apply<T, A, M><<<row_grid(s.rows, C), block, 0, stream>>>(
                           static_cast<const T*>(x), ld_x, static_cast<const T*>(z), ld_z,
                           static_cast<T*>(y), ld_y, mean, invstd, gamma, beta, s.rows, C);
                     }));
  CNN_CHECK_LAUNCH();
}

void launch_bn_backward(DType t, const void* x, const void* y, const void* dy, void* dx,
                        const float* gamma, const float* beta, const float* mean,
                        const float* invstd, float* dgamma, float* dbeta, const BnTrainSpec& s,
                        bool accumulate, void* dz, bool accumulate_dz, void* scratch,
                        cudaStream_t stream, const uint8_t* relu_mask) {
  const int C = s.channels;
  if (s.rows <= 0 || C <= 0) return;
  check_act(s.act, "launch_bn_backward");
  if (!dgamma || !dbeta) throw std::invalid_argument("launch_bn_backward: dgamma and dbeta needed");
  if (s.act == Act::ReLU && !y && !relu_mask && dz)  // from x alone: no residual in the ReLU
    throw std::invalid_argument("launch_bn_backward: ReLU over a residual needs y or its mask");
  if (s.act == Act::SiLU && dz)  // SiLU's derivative is taken at bn(x): no residual inside it
    throw std::invalid_argument("launch_bn_backward: no residual gradient with SiLU");
  const int ld_x = ld_or(s.ld_x, C), ld_y = ld_or(s.ld_y, C), ld_z = ld_or(s.ld_z, C);
  const bool relu = s.act == Act::ReLU;
  float* part = static_cast<float*>(scratch);
  // The coefficients follow the largest partials the scratch was sized for.
  float* coef = part + 3 * size_t(reduce_room(s.rows, C, 1)) * size_t(C);
  const BnGradOut out{dgamma, dbeta, coef, gamma, invstd, C, float(1.0 / double(s.rows))};
  const bool vec = !scalar_bn_forced() && vectorisable(t, C, {ld_x, ld_y, dz ? ld_z : C},
                                                       {x, relu ? y : nullptr, dy, dx, dz});
  check_relu_mask(relu_mask, s, vec, "launch_bn_backward");
  if (vec) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int V = 16 / int(sizeof(T));
      const VecGeom g = vec_geom(C, V);
      const int chunks = vec_chunks(s.rows, C, g);
      const int64_t rows_per = (s.rows + chunks - 1) / chunks;
      const MaskFrom from = relu_mask ? MaskFrom::Bits : y ? MaskFrom::Y : MaskFrom::X;
      const int sweep = bn_sweep();
      CNN_DISPATCH_BN_ACT(s.act, {
        auto run = [&](auto mask_from) {
          constexpr MaskFrom S = decltype(mask_from)::value;
          auto go = [&](auto min_blocks) {
            constexpr int B = decltype(min_blocks)::value;
            bn_grad_sums_vec<T, V, A, M, S, B><<<dim3(g.tiles, chunks), g.vx * g.vy, 0, stream>>>(
                static_cast<const T*>(x), static_cast<const T*>(y), relu_mask,
                static_cast<const T*>(dy), mean, invstd, gamma, beta, s.rows, C, g.vx, g.vy,
                rows_per, part, (sweep & kBnSweepSums) != 0);
            CNN_CHECK_LAUNCH();
            with_fin_channels(C, 1, [&](auto tc) {
              constexpr int TC = decltype(tc)::value;
              channel_sums_finalize<2, TC>
                  <<<fin_tiles(C, TC), dim3(TC, kFinThreads / TC), 0, stream>>>(part, C, chunks,
                                                                                out);
            });
            CNN_CHECK_LAUNCH();
            const auto dx_kernel = bn_backward_dx_vec<T, V, A, M, S, B>;
            dx_kernel<<<dim3(g.tiles, sweep_row_blocks(dx_kernel, s.rows, g, sweep)), g.vx * g.vy,
                        0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(y), relu_mask,
                                     static_cast<const T*>(dy), static_cast<T*>(dx),
                                     static_cast<T*>(dz), mean, invstd, gamma, beta, coef, s.rows,
                                     C, g.vx, g.vy, accumulate, accumulate_dz,
                                     (sweep & kBnSweepDx) != 0);
            CNN_CHECK_LAUNCH();
          };
          if (free_regs_forced()) {
            go(std::integral_constant<int, 1>{});
          } else {
            go(std::integral_constant<int, 3>{});
          }
        };
        // Only ReLU's forms differ by source (the others instantiate MaskFrom::Y alone).
        constexpr bool relu = A == Act::ReLU;
        constexpr MaskFrom kBits = relu ? MaskFrom::Bits : MaskFrom::Y;
        constexpr MaskFrom kX = relu ? MaskFrom::X : MaskFrom::Y;
        if (relu && from == MaskFrom::Bits) {
          run(std::integral_constant<MaskFrom, kBits>{});
        } else if (relu && from == MaskFrom::X) {
          run(std::integral_constant<MaskFrom, kX>{});
        } else {
          run(std::integral_constant<MaskFrom, MaskFrom::Y>{});
        }
      });
    });
    return;
  }
  CNN_DISPATCH_DTYPE(
      t, CNN_DISPATCH_BN_ACT(s.act, {
        const BnGradTerms<T, A, M> terms{static_cast<const T*>(x),
                                         static_cast<const T*>(y),
                                         static_cast<const T*>(dy),
                                         mean,
                                         invstd,
                                         gamma,
                                         beta,
                                         ld_x,
                                         ld_y};
        launch_channel_sums<2>(terms, out, s.rows, C, 1, scratch, stream);
        bn_backward_dx<T, A, M><<<row_grid(s.rows, C), dim3(kTileC, kTileR), 0, stream>>>(
            static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy),
            static_cast<T*>(dx), static_cast<T*>(dz), ld_x, ld_y, ld_z, mean, invstd, gamma, beta,
            coef, s.rows, C, accumulate, accumulate_dz);
        CNN_CHECK_LAUNCH();
      }));
}

}  // namespace cnnbench
