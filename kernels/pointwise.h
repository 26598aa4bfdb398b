// Pointwise kernels of our own: the conv epilogue where cuDNN cannot fuse it, standalone
// BatchNorm (as a per-channel scale and shift), residual add and activations, and the channel
// copy that a concat falls back to where its producer cannot write into a slice.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace cnnbench {

enum class Act { None, ReLU, SiLU, Sigmoid };
const char* act_name(Act a);  // "", "relu", "silu", "sigmoid"
// The activation in double on the host, for references.
double act_ref(Act a, double v);

// NHWC rows of `channels` values; each tensor has its own channel stride (ld >= channels): a
// slice of a concat buffer starts at its channel offset and strides by the whole buffer's C.
struct RowLayout {
  int64_t rows = 0;  // N * H * W
  int channels = 0;
  int ld_y = 0, ld_x = 0, ld_z = 0;  // 0: packed (== channels)
  bool z_after_act = false;          // y = act(x * scale + bias) + z
};

// y = act( x * scale[c] + bias[c] + z ) (or act( x * scale[c] + bias[c] ) + z with
// l.z_after_act). scale, bias and z may be null (1, 0, 0). y may alias x when both have the same
// layout. scale and bias are of type t like x, y and z.
void launch_epilogue(DType t, void* y, const void* x, const void* scale, const void* bias,
                     const void* z, Act act, const RowLayout& l, cudaStream_t stream);

// dst[row, c] = src[row, c] for c < channels and 0 up to `padded` (packed rows both): a narrow
// input (an image's 3 channels) widened to the channel count tensor-core engines want.
void launch_pad_channels(DType t, void* dst, int padded, const void* src, int channels,
                         int64_t rows, cudaStream_t stream);

// dst[row, c] = src[row, c] for c < channels, each with its own channel stride.
void launch_copy_channels(DType t, void* dst, int ld_dst, const void* src, int ld_src, int64_t rows,
                          int channels, cudaStream_t stream);

}  // namespace cnnbench
