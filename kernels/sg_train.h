// Kernels of the StyleGAN3-T training step (issue 6; networks/stylegan_train.h): float32, NHWC
// activations ([rows][c] with rows = n * hw), no atomics (each result is written by one thread
// or reduced in one block, so a step gives the same numbers every time). Parameter gradients
// accumulate (+=): the caller zeroes them where a phase starts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cnnbench {

// StyleGAN's FullyConnectedLayer (and a modulated conv's affine): y [n][out] = (x [n][in] .
// a[o] * wg + b[o] * bg) * sg, b optional. One warp per output.
void launch_fc_forward(const float* x, int n, int in, const float* a, const float* b, int out,
                       float wg, float bg, float sg, float* y, cudaStream_t st);
// Its backward for dy [n][out]: dx [n][in] (= or += where accumulate_dx; null: not wanted),
// da [out][in] += and db [out] += (da null: neither; db null: no bias).
void launch_fc_backward(const float* x, const float* dy, int n, int in, const float* a, int out,
                        float wg, float bg, float sg, float* dx, bool accumulate_dx, float* da,
                        float* db, cudaStream_t st);

// bias_act as NVlabs' Conv2dLayer / FullyConnectedLayer / filtered_lrelu's middle use it, on
// x [rows][c] (rows = n * hw):
//   primal (mask_v null): v = x * pre_gain * scale[n][c] + bias[c] * bias_gain;
//                         a = clamp(lrelu(v, slope) * gain, +-clamp) (+ z)
//   dual (mask_v given):  a = act'(mask_v) * x * pre_gain * scale[n][c] (+ z), the directional
//                         derivative along x at the primal pre-activation mask_v (same shape).
// scale, bias, z, v_out optional; clamp <= 0: none. act'(v) = gain * (v > 0 ? 1 : slope), 0
// where the clamp bites (|lrelu(v) * gain| > clamp), torch's clamp gradient.
struct BiasAct {
  float pre_gain = 1.f, bias_gain = 1.f, slope = 0.2f, gain = 1.41421356f, clamp = 0.f;
};
void launch_bias_act_fwd(const float* x, const float* scale, const float* bias, const float* z,
                         const float* mask_v, int64_t rows, int c, int hw, const BiasAct& s,
                         float* v_out, float* a, cudaStream_t st);
// dv = da * act'(v[row % mask_rows]) (mask_rows = rows: the row's own; smaller: a stacked
// primal/dual batch whose second half reuses the first half's mask); dx = dv * pre_gain *
// scale[n][c] (dx may be null, dv may be null; either may alias da).
void launch_bias_act_bwd(const float* da, const float* v, int64_t mask_rows, int64_t rows, int c,
                         int hw, const float* scale, const BiasAct& s, float* dv, float* dx,
                         bool accumulate_dx, cudaStream_t st);

// out[ch] += gain * sum over rows of g[row][ch] (a bias gradient).
// out[n][ch] += sum over the image's hw rows of g * x (the gradient of a per-(image, channel)
// scale).
// Both reduce in two fixed-order stages (chunks of rows, then the chunks) through `scratch`, of
// kReduceScratch floats.
constexpr size_t kReduceScratch = size_t(8) << 20;
void launch_column_sum(const float* g, int64_t rows, int c, float gain, float* out, float* scratch,
                       cudaStream_t st);
void launch_channel_dot(const float* g, const float* x, int n, int hw, int c, float* out,
                        float* scratch, cudaStream_t st);

// ---- The modulated conv's coefficients (SynthesisLayer, NVlabs' modulated_conv2d) -----------
// w [o][r] (KRSC rows, r = k * k * c) -> wp = w * rsqrt(mean over r of w^2); one block per o.
void launch_row_rms_normalize(const float* w, int o, int r, float* wp, cudaStream_t st);
// dw [o][r] += rs * dwp - rs^3 / r * w * sum(dwp * w), rs = rsqrt(mean w^2), per row.
void launch_row_rms_normalize_bwd(const float* w, const float* dwp, int o, int r, float* dw,
                                  cudaStream_t st);
// sn = s * rsqrt(mean over all `count` of s^2) (the styles over the whole batch); one block.
void launch_all_rms_normalize(const float* s, int count, float* sn, cudaStream_t st);
// ds (=) = rho * dsn - rho^3 / count * s * sum(dsn * s).
void launch_all_rms_normalize_bwd(const float* s, const float* dsn, int count, float* ds,
                                  cudaStream_t st);
// wsq [o][c] = sum over the k * k taps of wp^2 (KRSC).
void launch_wsq(const float* wp, int o, int kk, int c, float* wsq, cudaStream_t st);
// xs [n][c] = s [n][c] * rsqrt(*ema) (the input gain from magnitude_ema, read on the device).
void launch_scale_by_rsqrt(const float* s, int count, const float* ema, float* xs, cudaStream_t st);
// The demodulation's backward, dcoef [n][o] = rsqrt(sum_c sn^2 wsq + 1e-8):
//   dsn [n][c] = dxs * rsqrt(*ema) - sn * sum_o ddcoef * dcoef^3 * wsq[o][c]   (=)
//   dwsq [o][c] = -0.5 * sum_n ddcoef * dcoef^3 * sn^2                          (=)
void launch_demod_bwd(const float* sn, const float* wsq, const float* dcoef, const float* ddcoef,
                      const float* dxs, const float* ema, int n, int c, int o, float* dsn,
                      float* dwsq, cudaStream_t st);
// dwp [o][kk][c] += 2 * wp * dwsq[o][c].
void launch_wsq_bwd(const float* wp, const float* dwsq, int o, int kk, int c, float* dwp,
                    cudaStream_t st);

// ---- Buffers' moving averages and the loss ----------------------------------------------------
// *ema = lerp(mean(x^2), *ema, beta) over `count` values (SynthesisLayer's magnitude_ema);
// `partials` holds 256 floats.
void launch_magnitude_ema(const float* x, int64_t count, float beta, float* partials, float* ema,
                          cudaStream_t st);
// avg [c] = lerp(mean over n of x [n][c], avg, beta) (the mapping's w_avg).
void launch_mean_ema(const float* x, int n, int c, float beta, float* avg, cudaStream_t st);
// The non-saturating logistic loss on logits [n]: *loss (=) = mean softplus(sign * l), dl [n]
// (=) = gain / n * sign * sigmoid(sign * l). One block.
void launch_softplus_loss(const float* logits, int n, float sign, float gain, float* loss,
                          float* dl, cudaStream_t st);
// ema = p + beta * (ema - p) over n (G_ema), beta read on the host.
void launch_lerp_into(const float* p, float beta, int64_t n, float* ema, cudaStream_t st);
// out[j] = counter_normal(seed, offset + j) (kernels/randn.cuh), j < n.
void launch_randn(float* out, int64_t n, uint64_t seed, uint64_t offset, cudaStream_t st);
// y = x * s over n values (= or += where accumulate).
void launch_scale(const float* x, float s, int64_t n, float* y, bool accumulate, cudaStream_t st);
// dst [n][hw][c] from src NCHW-ordered rows for a flattened fc input: the fc weights stay in
// NVlabs' [out][c * hw] order and the activations NHWC, so D's flatten is a permutation.
void launch_nhwc_to_nchw(const float* src, int n, int hw, int c, float* dst, cudaStream_t st);
void launch_nchw_to_nhwc(const float* src, int n, int hw, int c, float* dst, bool accumulate,
                         cudaStream_t st);

}  // namespace cnnbench
