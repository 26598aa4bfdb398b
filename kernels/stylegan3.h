// StyleGAN3's kernels (issue 6): NHWC tensors in the storage type, float accumulation. The host
// references they are checked against are in kernels/stylegan3_ref.h.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "kernels/stylegan3_ref.h"
#include "kernels/stylegan_ref.h"
#include "kernels/tensor.h"

namespace cnnbench {

// One separable pass of filtered_lrelu: upfirdn along one axis (W or H) of an NHWC tensor. The
// line is zero-inserted by `up`, padded by pad0 / pad1 (negative: cropped), convolved with the
// taps (a true convolution: f flipped; null f: the single tap 1), then every `down`-th sample
// kept and multiplied by `gain`. Around it: before, x * pre_scale[n][c] (the demodulation) +
// bias[c] (either null); after, lrelu(slope) * act_gain and the clamp (where act), then *
// out_scale.
struct Fir1dPass {
  bool along_h = false;
  int up = 1, down = 1, pad0 = 0, pad1 = 0, taps = 1;
  float gain = 1.f;
  bool act = false;
  float slope = 0.2f, act_gain = 1.41421356f, clamp = 0.f;  // clamp <= 0: none
  float out_scale = 1.f;
  int out_len(int len) const { return (len * up + pad0 + pad1 - taps) / down + 1; }
  Dims out_dims(const Dims& in) const {
    Dims o = in;
    (along_h ? o.h : o.w) = out_len(along_h ? in.h : in.w);
    return o;
  }
};
// The transpose of pass p over an axis of `len` samples: the gradient of its input from its
// output's (up and down swapped, taps flipped: the caller passes the reversed filter; the padding
// mirrored; gain times out_scale). No bias, scale or activation. Throws std::logic_error where
// the lengths do not come back to `len`.
inline Fir1dPass fir1d_transposed(const Fir1dPass& p, int len) {
  if (p.act) throw std::logic_error("fir1d_transposed: the pass has an activation");
  Fir1dPass q;
  q.along_h = p.along_h;
  q.up = p.down, q.down = p.up, q.taps = p.taps;
  q.gain = p.gain * p.out_scale;
  const int out = p.out_len(len);
  q.pad0 = p.taps - 1 - p.pad0;
  q.pad1 = (len - 1) * p.up + p.taps - out * p.down - q.pad0;
  if (q.out_len(out) != len) throw std::logic_error("fir1d_transposed: no transpose");
  return q;
}
// y (out_dims(in)) from x (in), both NHWC in type t.
void launch_fir1d(const void* x, const Dims& in, DType t, const float* f, const float* pre_scale,
                  const float* bias, const Fir1dPass& p, void* y, cudaStream_t st);

// filtered_lrelu (FilteredLreluSpec, filters of up_taps and down_taps, 1-D) as separable passes:
// up-sampling along W then H (the lrelu, gain and clamp after the second), down-sampling along W
// then H. A trivial stage (factor 1, one tap, no padding) is left out; where the up-sampling is,
// one elementwise pass carries the bias and the activation. The last pass applies out_scale.
std::vector<Fir1dPass> filtered_lrelu_passes(const FilteredLreluSpec& s, int up_taps,
                                             int down_taps);
// The passes in order, from x (in) to y: pass i reads taps[i] (fu or fd or null) and writes
// tmp[i] but the last, which writes y; the first applies pre_scale (or null) and bias (or null).
void launch_filtered_lrelu(const void* x, const Dims& in, DType t,
                           const std::vector<Fir1dPass>& passes,
                           const std::vector<const float*>& taps, const float* pre_scale,
                           const float* bias, const std::vector<void*>& tmp, void* y,
                           cudaStream_t st);

// upfirdn2d without down-sampling (s.down 1) by a separable filter, the outer product of the
// 1-D taps f (float, s.fw of them; StyleGAN2's [1, 3, 3, 1] / 8), as two fir1d passes: along W
// (the x padding, gain sqrt(s.gain)) into tmp (separable_up_tmp(in, s)), then along H into y.
std::vector<Fir1dPass> separable_up_passes(const FirSpec& s);
Dims separable_up_tmp(const Dims& in, const FirSpec& s);
void launch_upfirdn2d_separable(const void* x, const Dims& in, DType t, const float* f,
                                const FirSpec& s, void* tmp, void* y, cudaStream_t st);

// SynthesisInput's per-image frequencies: from the affine's t [n][4] (float), the buffers
// transform [3][3], freqs [c][2] and phases [c], into fp [n][c][4] = (fx, fy, phase, amplitude).
void launch_fourier_prepare(const float* t, const float* transform, const float* freqs,
                            const float* phases, int n, int c, float sampling_rate, float bandwidth,
                            float* fp, cudaStream_t st);
// The features y [n][size][size][c] = sin(2 pi (x fx + y fy + phase)) * amplitude on
// affine_grid's sample points (align_corners false), half-extent 0.5 size / sampling_rate.
void launch_fourier_features(const float* fp, int n, int c, int size, float sampling_rate, DType t,
                             void* y, cudaStream_t st);
// The same in float32 times `scale` (a constant factor folded in: the training step's 1 / sqrt(C)
// of the channel mixing); with scale 1 bit for bit launch_fourier_features' float32 output. Its
// backward is kernels/fourier_backward.h's.
void launch_fourier_features_f32(const float* fp, int n, int c, int size, float sampling_rate,
                                 float scale, float* y, cudaStream_t st);
// StyleGAN-XL's class conditioning for n inputs x [n][z_dim + classes] (type t): the class the
// argmax of the one-hot part (the first of equal maxima, as torch.argmax), its embed row
// [embed_dim] (float [1000][embed_dim]), embed_proj (proj_w [z_dim][embed_dim] * weight_gain,
// proj_b * bias_gain, lrelu 0.2 x sqrt 2), then y [n][2 z_dim] = (normalize_2nd_moment(z),
// normalize_2nd_moment(the projection)). z_dim at most 1024.
void launch_class_embed(const void* x, DType t, int n, int z_dim, int classes, const float* embed,
                        int embed_dim, const float* proj_w, const float* proj_b, float weight_gain,
                        float bias_gain, void* y, cudaStream_t st);
// s *= rsqrt(mean(s^2)) over all `count` values (modulated_conv2d's style pre-normalisation over
// the whole batch), one block.
void launch_rms_normalize(float* s, int count, cudaStream_t st);

}  // namespace cnnbench
