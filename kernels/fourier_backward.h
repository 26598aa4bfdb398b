// The backward of StyleGAN3's SynthesisInput Fourier features on the device, for a training
// step, as the host references in kernels/fourier_backward_ref.h define it: fourier_prepare
// (t [n][4] -> fp [n][c][4], launch_fourier_prepare in kernels/stylegan3.h) and the features
// (fp -> y [n][size][size][c], times `scale`). float32 tensors in device memory, float
// accumulation, reductions in a fixed order (no atomics), so a run repeats bit for bit. Every
// launcher only enqueues on `stream`.
#pragma once

#include <cuda_runtime.h>

#include "kernels/fourier_backward_ref.h"
#include "kernels/stylegan3.h"  // launch_fourier_features_f32, the forward

namespace cnnbench {

// dfp [n][c][4], the gradient of sum(dy * y) with respect to fp, y as
// launch_fourier_features_f32 writes it with this `scale`; dy [n][size][size][c]. One block per
// (image, tile of 32 channels) loops over the positions.
void launch_fourier_features_backward(const float* fp, const float* dy, int n, int c, int size,
                                      float sampling_rate, float scale, float* dfp,
                                      cudaStream_t stream);
// dt [n][4], the gradient through fourier_prepare of sum(dfp * fp) with respect to t (the
// amplitude's clamp passing its gradient where 0 <= the unclamped value <= 1, as torch's clamp).
// One block per image over the channels.
void launch_fourier_prepare_backward(const float* t, const float* transform, const float* freqs,
                                     const float* phases, const float* dfp, int n, int c,
                                     float sampling_rate, float bandwidth, float* dt,
                                     cudaStream_t stream);

}  // namespace cnnbench
