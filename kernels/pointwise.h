// Pointwise kernels of our own: the conv epilogue where cuDNN cannot fuse it, and standalone
// BatchNorm (as a per-channel scale and shift), residual add and ReLU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace cnnbench {

// y = relu?( x * scale[c] + bias[c] + z ), NHWC, c = index % channels. scale, bias and z may be
// null (1, 0, 0). y may alias x. scale and bias are of type t like x, y and z.
void launch_epilogue(DType t, void* y, const void* x, const void* scale, const void* bias,
                     const void* z, bool relu, int64_t numel, int channels, cudaStream_t stream);

}  // namespace cnnbench
