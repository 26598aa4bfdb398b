// The minibatch standard deviation (NVlabs' MinibatchStdLayer, num_channels 1) on the device, for
// a StyleGAN training step: the forward, its backward and the dual forms of an R1 double-backward,
// exactly as the host references in kernels/mbstd_ref.h define them (the grouping, the formulas).
// float32 NHWC tensors in device memory, float accumulation; one block per group, the sums in a
// fixed order (no atomics), so a run repeats bit for bit. x [n][h][w][c], y [n][h][w][c + 1];
// n a multiple of `group` (std::invalid_argument otherwise). Every launcher only enqueues on
// `stream`.
#pragma once

#include <cuda_runtime.h>

#include "kernels/mbstd_ref.h"

namespace cnnbench {

void launch_mbstd_forward(const float* x, int n, int h, int w, int c, int group, float* y,
                          cudaStream_t stream);
void launch_mbstd_backward(const float* x, const float* dy, int n, int h, int w, int c, int group,
                           float* dx, cudaStream_t stream);
// n is the primal batch: x2 and dx2 hold 2n samples of [h][w][c], y2 and dy2 2n of [h][w][c + 1].
void launch_mbstd_forward_dual(const float* x2, int n, int h, int w, int c, int group, float* y2,
                               cudaStream_t stream);
void launch_mbstd_backward_dual(const float* x2, const float* dy2, int n, int h, int w, int c,
                                int group, float* dx2, cudaStream_t stream);

}  // namespace cnnbench
