#include "kernels/sg_train.h"

#include <algorithm>
#include <stdexcept>

#include "harness/check.h"
#include "kernels/channel_kernels.cuh"
#include "kernels/randn.cuh"

namespace cnnbench {
namespace {

using ck::blocks_for;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over a block of 256 threads (blockDim.x * blockDim.y == 256); every thread gets it.
__device__ float block_sum(float v) {
  __shared__ float part[8];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  v = warp_sum(v);
  __syncthreads();  // part[] may still be read by a previous call
  if ((tid & 31) == 0) part[tid >> 5] = v;
  __syncthreads();
  float s = 0.f;
  for (int i = 0; i < 8; ++i) s += part[i];
  return s;
}

__global__ void fc_forward_kernel(const float* x, int n, int in, const float* a, const float* b,
                                  int out, float wg, float bg, float sg, float* y) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (warp >= n * out) return;
  const int ni = warp / out, o = warp % out;
  const float* xr = x + size_t(ni) * in;
  const float* ar = a + size_t(o) * in;
  float acc = 0.f;
  for (int j = lane; j < in; j += 32) acc += xr[j] * ar[j];
  acc = warp_sum(acc);
  if (lane == 0) y[warp] = (acc * wg + (b ? b[o] * bg : 0.f)) * sg;
}

__global__ void fc_dx_kernel(const float* dy, int n, int in, const float* a, int out, float k,
                             float* dx, bool acc) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= int64_t(n) * in) return;
  const int ni = int(j / in), i = int(j % in);
  float s = 0.f;
  for (int o = 0; o < out; ++o) s += dy[size_t(ni) * out + o] * a[size_t(o) * in + i];
  dx[j] = (acc ? dx[j] : 0.f) + s * k;
}

__global__ void fc_da_kernel(const float* x, const float* dy, int n, int in, int out, float k,
                             float kb, float* da, float* db) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= int64_t(out) * in) return;
  const int o = int(j / in), i = int(j % in);
  float s = 0.f, sb = 0.f;
  for (int ni = 0; ni < n; ++ni) {
    const float g = dy[size_t(ni) * out + o];
    s += g * x[size_t(ni) * in + i];
    sb += g;
  }
  da[j] += s * k;
  if (db && i == 0) db[o] += sb * kb;
}

__device__ __forceinline__ float act_fwd(float v, const BiasAct& s) {
  float a = (v > 0.f ? v : v * s.slope) * s.gain;
  if (s.clamp > 0.f) a = fminf(fmaxf(a, -s.clamp), s.clamp);
  return a;
}
__device__ __forceinline__ float act_grad(float v, const BiasAct& s) {
  const float a = (v > 0.f ? v : v * s.slope) * s.gain;
  if (s.clamp > 0.f && (a > s.clamp || a < -s.clamp)) return 0.f;
  return s.gain * (v > 0.f ? 1.f : s.slope);
}

__global__ void bias_act_fwd_kernel(const float* x, const float* scale, const float* bias,
                                    const float* z, const float* mask_v, int64_t rows, int c,
                                    int hw, BiasAct s, float* v_out, float* a) {
  const int64_t total = rows * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int ch = int(j % c);
    float v = x[j] * s.pre_gain;
    if (scale) v *= scale[(j / c / hw) * c + ch];
    float r;
    if (mask_v) {
      r = act_grad(mask_v[j], s) * v;
    } else {
      if (bias) v += bias[ch] * s.bias_gain;
      if (v_out) v_out[j] = v;
      r = act_fwd(v, s);
    }
    if (z) r += z[j];
    a[j] = r;
  }
}

__global__ void bias_act_bwd_kernel(const float* da, const float* v, int64_t mask_rows,
                                    int64_t rows, int c, int hw, const float* scale, BiasAct s,
                                    float* dv, float* dx, bool acc) {
  const int64_t total = rows * c, mask_total = mask_rows * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const float g = da[j] * act_grad(v[j % mask_total], s);
    if (dv) dv[j] = g;
    if (dx) {
      float d = g * s.pre_gain;
      if (scale) d *= scale[(j / c / hw) * c + int(j % c)];
      dx[j] = (acc ? dx[j] : 0.f) + d;
    }
  }
}

// Stage 1 of a segmented column reduction: grid (channel tiles, chunks, segments), blockDim
// (32, 8). Block (t, k, s) sums rows [k chunk, (k + 1) chunk) of segment s (seg_rows rows from
// s seg_rows) of g (times x where given) into part[(s chunks + k) c + ch].
__global__ void reduce_rows_kernel(const float* g, const float* x, int64_t seg_rows, int64_t chunk,
                                   int c, float* part) {
  const int ch = blockIdx.x * 32 + threadIdx.x;
  const int64_t seg = blockIdx.z, k = blockIdx.y;
  const int64_t r0 = k * chunk, r1 = min(seg_rows, r0 + chunk);
  float s = 0.f;
  if (ch < c) {
    const size_t base = size_t(seg * seg_rows) * c + ch;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const size_t j = base + size_t(r) * c;
      s += x ? g[j] * x[j] : g[j];
    }
  }
  __shared__ float sh[8][33];
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    float t = 0.f;
    for (int i = 0; i < 8; ++i) t += sh[i][threadIdx.x];
    part[(seg * gridDim.y + k) * c + ch] = t;
  }
}

// Stage 2: out[s][ch] += gain * the sum over the chunks, in order.
__global__ void reduce_chunks_kernel(const float* part, int segments, int chunks, int c, float gain,
                                     float* out) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= int64_t(segments) * c) return;
  const int64_t seg = j / c, ch = j % c;
  float t = 0.f;
  for (int k = 0; k < chunks; ++k) t += part[(seg * chunks + k) * c + ch];
  out[j] += t * gain;
}

void reduce_rows(const float* g, const float* x, int segments, int64_t seg_rows, int c, float gain,
                 float* out, float* scratch, cudaStream_t st) {
  if (segments <= 0 || seg_rows <= 0 || c <= 0) return;
  // About 256 rows a block, at most what the scratch holds.
  int64_t chunks = std::max<int64_t>(1, (seg_rows + 255) / 256);
  chunks = std::min<int64_t>(chunks, int64_t(kReduceScratch) / (int64_t(segments) * c));
  chunks = std::min<int64_t>(chunks, 65535);
  if (chunks < 1) throw std::invalid_argument("reduce_rows: too many channels for the scratch");
  const int64_t chunk = (seg_rows + chunks - 1) / chunks;
  chunks = (seg_rows + chunk - 1) / chunk;
  reduce_rows_kernel<<<dim3(unsigned((c + 31) / 32), unsigned(chunks), unsigned(segments)),
                       dim3(32, 8), 0, st>>>(g, x, seg_rows, chunk, c, scratch);
  CNN_CHECK_CUDA(cudaGetLastError());
  reduce_chunks_kernel<<<unsigned((int64_t(segments) * c + 255) / 256), 256, 0, st>>>(
      scratch, segments, int(chunks), c, gain, out);
  CNN_CHECK_CUDA(cudaGetLastError());
}

__global__ void row_rms_kernel(const float* w, int r, float* wp) {
  const float* row = w + size_t(blockIdx.x) * r;
  float s = 0.f;
  for (int i = threadIdx.x; i < r; i += blockDim.x) s += row[i] * row[i];
  const float rs = rsqrtf(block_sum(s) / r);
  for (int i = threadIdx.x; i < r; i += blockDim.x) wp[size_t(blockIdx.x) * r + i] = row[i] * rs;
}

__global__ void row_rms_bwd_kernel(const float* w, const float* dwp, int r, float* dw) {
  const size_t base = size_t(blockIdx.x) * r;
  float s = 0.f, d = 0.f;
  for (int i = threadIdx.x; i < r; i += blockDim.x) {
    s += w[base + i] * w[base + i];
    d += dwp[base + i] * w[base + i];
  }
  const float ms = block_sum(s) / r, dot = block_sum(d);
  const float rs = rsqrtf(ms), k = rs * rs * rs / r * dot;
  for (int i = threadIdx.x; i < r; i += blockDim.x)
    dw[base + i] += rs * dwp[base + i] - k * w[base + i];
}

__global__ void all_rms_kernel(const float* s, int count, float* sn) {
  float q = 0.f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) q += s[i] * s[i];
  const float rho = rsqrtf(block_sum(q) / count);
  for (int i = threadIdx.x; i < count; i += blockDim.x) sn[i] = s[i] * rho;
}

__global__ void all_rms_bwd_kernel(const float* s, const float* dsn, int count, float* ds) {
  float q = 0.f, d = 0.f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) q += s[i] * s[i], d += dsn[i] * s[i];
  const float rho = rsqrtf(block_sum(q) / count), dot = block_sum(d);
  const float k = rho * rho * rho / count * dot;
  for (int i = threadIdx.x; i < count; i += blockDim.x) ds[i] = rho * dsn[i] - k * s[i];
}

__global__ void wsq_kernel(const float* wp, int o, int kk, int c, float* wsq) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= int64_t(o) * c) return;
  const int oi = int(j / c), ci = int(j % c);
  float s = 0.f;
  for (int t = 0; t < kk; ++t) {
    const float v = wp[(size_t(oi) * kk + t) * c + ci];
    s += v * v;
  }
  wsq[j] = s;
}

__global__ void scale_by_rsqrt_kernel(const float* s, int count, const float* ema, float* xs) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < count) xs[j] = s[j] * rsqrtf(*ema);
}

__global__ void demod_dsn_kernel(const float* sn, const float* wsq, const float* dcoef,
                                 const float* ddcoef, const float* dxs, const float* ema, int n,
                                 int c, int o, float* dsn) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= int64_t(n) * c) return;
  const int ni = int(j / c), ci = int(j % c);
  float s = 0.f;
  for (int oi = 0; oi < o; ++oi) {
    const float d = dcoef[size_t(ni) * o + oi];
    s += ddcoef[size_t(ni) * o + oi] * d * d * d * wsq[size_t(oi) * c + ci];
  }
  dsn[j] = dxs[j] * rsqrtf(*ema) - sn[j] * s;
}

__global__ void demod_dwsq_kernel(const float* sn, const float* dcoef, const float* ddcoef, int n,
                                  int c, int o, float* dwsq) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= int64_t(o) * c) return;
  const int oi = int(j / c), ci = int(j % c);
  float s = 0.f;
  for (int ni = 0; ni < n; ++ni) {
    const float d = dcoef[size_t(ni) * o + oi], v = sn[size_t(ni) * c + ci];
    s += ddcoef[size_t(ni) * o + oi] * d * d * d * v * v;
  }
  dwsq[j] = -0.5f * s;
}

__global__ void wsq_bwd_kernel(const float* wp, const float* dwsq, int o, int kk, int c,
                               float* dwp) {
  const int64_t total = int64_t(o) * kk * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t oi = j / (int64_t(kk) * c);
    dwp[j] += 2.f * wp[j] * dwsq[oi * c + j % c];
  }
}

__global__ void sumsq_partials_kernel(const float* x, int64_t count, float* partials) {
  float s = 0.f;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < count;
       j += int64_t(gridDim.x) * blockDim.x)
    s += x[j] * x[j];
  s = block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void magnitude_ema_kernel(const float* partials, int parts, int64_t count, float beta,
                                     float* ema) {
  float s = 0.f;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) s += partials[i];
  s = block_sum(s);
  if (threadIdx.x == 0) {
    const float m = float(double(s) / double(count));
    *ema = m + beta * (*ema - m);
  }
}

__global__ void mean_ema_kernel(const float* x, int n, int c, float beta, float* avg) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= c) return;
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += x[size_t(i) * c + j];
  const float m = s / n;
  avg[j] = m + beta * (avg[j] - m);
}

__global__ void softplus_loss_kernel(const float* l, int n, float sign, float gain, float* loss,
                                     float* dl) {
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float x = sign * l[i];
    // softplus(x) = max(x, 0) + log1p(exp(-|x|)); sigmoid(x) by the same split.
    s += fmaxf(x, 0.f) + log1pf(expf(-fabsf(x)));
    const float e = expf(-fabsf(x)), sig = x >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
    dl[i] = gain / n * sign * sig;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) *loss = s / n;
}

__global__ void lerp_into_kernel(const float* p, float beta, int64_t n, float* ema) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x)
    ema[j] = p[j] + beta * (ema[j] - p[j]);
}

__global__ void randn_kernel(float* out, int64_t n, uint64_t seed, uint64_t offset) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x)
    out[j] = counter_normal(seed, offset + uint64_t(j));
}

__global__ void scale_kernel(const float* x, float s, int64_t n, float* y, bool acc) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x)
    y[j] = (acc ? y[j] : 0.f) + x[j] * s;
}

// j walks dst in NCHW order.
__global__ void nhwc_to_nchw_kernel(const float* src, int n, int hw, int c, float* dst) {
  const int64_t total = int64_t(n) * hw * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ni = j / (int64_t(hw) * c);
    const int r = int(j % (int64_t(hw) * c));
    const int ch = r / hw, p = r % hw;
    dst[j] = src[(ni * hw + p) * c + ch];
  }
}

// j walks dst in NHWC order.
__global__ void nchw_to_nhwc_kernel(const float* src, int n, int hw, int c, float* dst, bool acc) {
  const int64_t total = int64_t(n) * hw * c;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ni = j / (int64_t(hw) * c);
    const int r = int(j % (int64_t(hw) * c));
    const int p = r / c, ch = r % c;
    const float v = src[(ni * c + ch) * hw + p];
    dst[j] = (acc ? dst[j] : 0.f) + v;
  }
}

}  // namespace

void launch_fc_forward(const float* x, int n, int in, const float* a, const float* b, int out,
                       float wg, float bg, float sg, float* y, cudaStream_t st) {
  const int64_t threads = int64_t(n) * out * 32;
  fc_forward_kernel<<<unsigned((threads + 255) / 256), 256, 0, st>>>(x, n, in, a, b, out, wg, bg,
                                                                     sg, y);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_fc_backward(const float* x, const float* dy, int n, int in, const float* a, int out,
                        float wg, float bg, float sg, float* dx, bool accumulate_dx, float* da,
                        float* db, cudaStream_t st) {
  if (dx) {
    fc_dx_kernel<<<unsigned((int64_t(n) * in + 255) / 256), 256, 0, st>>>(
        dy, n, in, a, out, wg * sg, dx, accumulate_dx);
    CNN_CHECK_CUDA(cudaGetLastError());
  }
  if (!da) return;
  fc_da_kernel<<<unsigned((int64_t(out) * in + 255) / 256), 256, 0, st>>>(x, dy, n, in, out,
                                                                          wg * sg, bg * sg, da, db);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_bias_act_fwd(const float* x, const float* scale, const float* bias, const float* z,
                         const float* mask_v, int64_t rows, int c, int hw, const BiasAct& s,
                         float* v_out, float* a, cudaStream_t st) {
  const int64_t total = rows * c;
  if (total == 0) return;
  bias_act_fwd_kernel<<<blocks_for(total), ck::kThreads, 0, st>>>(x, scale, bias, z, mask_v, rows,
                                                                  c, hw, s, v_out, a);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_bias_act_bwd(const float* da, const float* v, int64_t mask_rows, int64_t rows, int c,
                         int hw, const float* scale, const BiasAct& s, float* dv, float* dx,
                         bool accumulate_dx, cudaStream_t st) {
  const int64_t total = rows * c;
  if (total == 0) return;
  bias_act_bwd_kernel<<<blocks_for(total), ck::kThreads, 0, st>>>(da, v, mask_rows, rows, c, hw,
                                                                  scale, s, dv, dx, accumulate_dx);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_column_sum(const float* g, int64_t rows, int c, float gain, float* out, float* scratch,
                       cudaStream_t st) {
  reduce_rows(g, nullptr, 1, rows, c, gain, out, scratch, st);
}

void launch_channel_dot(const float* g, const float* x, int n, int hw, int c, float* out,
                        float* scratch, cudaStream_t st) {
  reduce_rows(g, x, n, hw, c, 1.f, out, scratch, st);
}

void launch_row_rms_normalize(const float* w, int o, int r, float* wp, cudaStream_t st) {
  row_rms_kernel<<<unsigned(o), 256, 0, st>>>(w, r, wp);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_row_rms_normalize_bwd(const float* w, const float* dwp, int o, int r, float* dw,
                                  cudaStream_t st) {
  row_rms_bwd_kernel<<<unsigned(o), 256, 0, st>>>(w, dwp, r, dw);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_all_rms_normalize(const float* s, int count, float* sn, cudaStream_t st) {
  all_rms_kernel<<<1, 256, 0, st>>>(s, count, sn);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_all_rms_normalize_bwd(const float* s, const float* dsn, int count, float* ds,
                                  cudaStream_t st) {
  all_rms_bwd_kernel<<<1, 256, 0, st>>>(s, dsn, count, ds);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_wsq(const float* wp, int o, int kk, int c, float* wsq, cudaStream_t st) {
  wsq_kernel<<<unsigned((int64_t(o) * c + 255) / 256), 256, 0, st>>>(wp, o, kk, c, wsq);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_scale_by_rsqrt(const float* s, int count, const float* ema, float* xs,
                           cudaStream_t st) {
  scale_by_rsqrt_kernel<<<unsigned((count + 255) / 256), 256, 0, st>>>(s, count, ema, xs);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_demod_bwd(const float* sn, const float* wsq, const float* dcoef, const float* ddcoef,
                      const float* dxs, const float* ema, int n, int c, int o, float* dsn,
                      float* dwsq, cudaStream_t st) {
  demod_dsn_kernel<<<unsigned((int64_t(n) * c + 255) / 256), 256, 0, st>>>(sn, wsq, dcoef, ddcoef,
                                                                           dxs, ema, n, c, o, dsn);
  CNN_CHECK_CUDA(cudaGetLastError());
  demod_dwsq_kernel<<<unsigned((int64_t(o) * c + 255) / 256), 256, 0, st>>>(sn, dcoef, ddcoef, n, c,
                                                                            o, dwsq);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_wsq_bwd(const float* wp, const float* dwsq, int o, int kk, int c, float* dwp,
                    cudaStream_t st) {
  wsq_bwd_kernel<<<blocks_for(int64_t(o) * kk * c), ck::kThreads, 0, st>>>(wp, dwsq, o, kk, c, dwp);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_magnitude_ema(const float* x, int64_t count, float beta, float* partials, float* ema,
                          cudaStream_t st) {
  const int parts = int(std::min<int64_t>(256, (count + 255) / 256));
  sumsq_partials_kernel<<<unsigned(parts), 256, 0, st>>>(x, count, partials);
  CNN_CHECK_CUDA(cudaGetLastError());
  magnitude_ema_kernel<<<1, 256, 0, st>>>(partials, parts, count, beta, ema);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_mean_ema(const float* x, int n, int c, float beta, float* avg, cudaStream_t st) {
  mean_ema_kernel<<<unsigned((c + 255) / 256), 256, 0, st>>>(x, n, c, beta, avg);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_softplus_loss(const float* logits, int n, float sign, float gain, float* loss,
                          float* dl, cudaStream_t st) {
  softplus_loss_kernel<<<1, 256, 0, st>>>(logits, n, sign, gain, loss, dl);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_lerp_into(const float* p, float beta, int64_t n, float* ema, cudaStream_t st) {
  lerp_into_kernel<<<blocks_for(n), ck::kThreads, 0, st>>>(p, beta, n, ema);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_randn(float* out, int64_t n, uint64_t seed, uint64_t offset, cudaStream_t st) {
  randn_kernel<<<blocks_for(n), ck::kThreads, 0, st>>>(out, n, seed, offset);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_scale(const float* x, float s, int64_t n, float* y, bool accumulate, cudaStream_t st) {
  scale_kernel<<<blocks_for(n), ck::kThreads, 0, st>>>(x, s, n, y, accumulate);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_nhwc_to_nchw(const float* src, int n, int hw, int c, float* dst, cudaStream_t st) {
  nhwc_to_nchw_kernel<<<blocks_for(int64_t(n) * hw * c), ck::kThreads, 0, st>>>(src, n, hw, c, dst);
  CNN_CHECK_CUDA(cudaGetLastError());
}

void launch_nchw_to_nhwc(const float* src, int n, int hw, int c, float* dst, bool accumulate,
                         cudaStream_t st) {
  nchw_to_nhwc_kernel<<<blocks_for(int64_t(n) * hw * c), ck::kThreads, 0, st>>>(src, n, hw, c, dst,
                                                                                accumulate);
  CNN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace cnnbench
