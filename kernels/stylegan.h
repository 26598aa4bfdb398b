// StyleGAN's synthesis kernels (issue 6): NHWC tensors in the storage type; the host references
// they are checked against are in kernels/stylegan_ref.h.
#pragma once

#include <cuda_runtime.h>

#include "kernels/stylegan_ref.h"
#include "kernels/tensor.h"

namespace cnnbench {

// y = upfirdn2d(x) for dims in (n, c, h, w) -> (n, c, s.out_h(h), s.out_w(w)); f on the device
// as float [fh][fw]. `y_ld`: y's channel stride (a slice of a wider buffer), c where 0.
void launch_upfirdn2d(const void* x, const Dims& in, DType t, const float* f, const FirSpec& s,
                      void* y, int y_ld, cudaStream_t st);
// In place: x = bias_act(x + noise), bias [c] float, noise [h][w] float or null.
void launch_bias_act(void* x, const Dims& d, DType t, const float* bias, const float* noise,
                     const BiasActSpec& s, cudaStream_t st);
// x[n][.][.][c] *= scale[n][c] (float), in place: the modulation (styles) and demodulation (d).
void launch_channel_scale(void* x, const Dims& d, DType t, const float* scale, cudaStream_t st);
// d[n][k] from styles [n][c] and wsq[k][c] = sum_{r,s} W^2 (float, precomputed once).
void launch_demod(const float* styles, const float* wsq, int n, int c, int k, float* d,
                  cudaStream_t st);

}  // namespace cnnbench
