// Nearest-neighbour upsampling by an integer factor (Darknet's and PyTorch's nn.Upsample(mode=
// "nearest")), NHWC, any storage type (issue 6: YOLOR's FPN). Output pixel (h, w) is input pixel
// (h / factor, w / factor); values are copied, not converted.
#pragma once

#include <cuda_runtime.h>

#include "kernels/tensor.h"

namespace cnnbench {

// x: dims `x` (batch included); y: [N][H * factor][W * factor][C]. ld_x, ld_y: channel strides
// (0: packed), so y may be a slice of a concat's buffer, as a route's input is.
void launch_upsample_nearest(DType t, const void* x, const Dims& x_dims, int factor, int ld_x,
                             void* y, int ld_y, cudaStream_t stream);

}  // namespace cnnbench
