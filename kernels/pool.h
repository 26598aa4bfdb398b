// Pooling kernels of our own, NHWC, any of our storage types, float arithmetic.
#pragma once

#include <cuda_runtime.h>

#include "kernels/tensor.h"

namespace cnnbench {

struct PoolSpec {
  Dims x, y;  // batch included
  int kernel = 1, stride = 1, pad = 0;
  bool count_include_pad = true;  // average pooling, as PyTorch's default
  int ld_x = 0, ld_y = 0;         // channel strides; 0: packed (a slice of a concat otherwise)
};

// Max pooling; padded positions never win (PyTorch semantics).
void launch_maxpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream);
void launch_avgpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream);
// Mean over H and W: y is N x C. Uses s.x, s.ld_x and s.ld_y.
void launch_global_avgpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream);
// PyTorch's AdaptiveAvgPool2d to s.y's H x W: output cell (i, j) averages input rows
// [floor(i*H/oh), ceil((i+1)*H/oh)) and columns likewise. kernel/stride/pad are unused.
void launch_adaptive_avgpool(DType t, const void* x, void* y, const PoolSpec& s,
                             cudaStream_t stream);

}  // namespace cnnbench
