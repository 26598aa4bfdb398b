// Pooling kernels of our own, NHWC, any of our storage types, float arithmetic.
#pragma once

#include <cuda_runtime.h>

#include "kernels/tensor.h"

namespace cnnbench {

struct PoolSpec {
  Dims x, y;  // batch included
  int kernel = 1, stride = 1, pad = 0;
  bool count_include_pad = true;  // average pooling, as PyTorch's default
};

// Max pooling; padded positions never win (PyTorch semantics).
void launch_maxpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream);
void launch_avgpool(DType t, const void* x, void* y, const PoolSpec& s, cudaStream_t stream);
// Mean over H and W: y is N x C.
void launch_global_avgpool(DType t, const void* x, void* y, const Dims& x_dims,
                           cudaStream_t stream);

}  // namespace cnnbench
