// StyleGAN's synthesis kernels (issue 6): NHWC tensors in the storage type; the host references
// they are checked against are in kernels/stylegan_ref.h.
#pragma once

#include <cuda_runtime.h>

#include "kernels/stylegan_ref.h"
#include "kernels/tensor.h"

namespace cnnbench {

// y = upfirdn2d(x) for dims in (n, c, h, w) -> (n, c, s.out_h(h), s.out_w(w)); f on the device
// as float [fh][fw]. `y_ld`: y's channel stride (a slice of a wider buffer), c where 0. The 2-D
// form: no op uses it since StyleGAN2's up-sampling went separable (launch_upfirdn2d_separable);
// kept, with its GPU test, for a non-separable filter (StyleGAN3-R's radial down filter).
void launch_upfirdn2d(const void* x, const Dims& in, DType t, const float* f, const FirSpec& s,
                      void* y, int y_ld, cudaStream_t st);
// y = bias_act(x + noise), bias [c] float or null, noise [h][w] float or null; y may be x.
void launch_bias_act(const void* x, void* y, const Dims& d, DType t, const float* bias,
                     const float* noise, const BiasActSpec& s, cudaStream_t st);
// y[n][.][.][c] = x[n][.][.][c] * scale[n][c] (float); y may be x: the modulation (styles) and
// the demodulation (d).
void launch_channel_scale(const void* x, void* y, const Dims& d, DType t, const float* scale,
                          cudaStream_t st);
// normalize_2nd_moment over the c channels of each of n vectors (h = w = 1): y = x *
// rsqrt(mean(x^2) + 1e-8).
void launch_normalize_2nd_moment(const void* x, void* y, int n, int c, DType t, cudaStream_t st);
// A modulated conv's styles: styles[n][c] = (w[n] . A[c] * weight_gain + b[c] * bias_gain) *
// style_gain, w [n][wdim] in type t, A [c][wdim] and b [c] float, styles float.
void launch_affine(const void* w, DType t, int n, int wdim, const float* a, const float* b,
                   float weight_gain, float bias_gain, float style_gain, int c, float* styles,
                   cudaStream_t st);
// d[n][k] from styles [n][c] and wsq[k][c] = sum_{r,s} W^2 (float, precomputed once).
void launch_demod(const float* styles, const float* wsq, int n, int c, int k, float* d,
                  cudaStream_t st);

}  // namespace cnnbench
