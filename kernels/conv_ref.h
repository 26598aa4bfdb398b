// A host reference for one output of a 2-D convolution, in double: what the layer checks
// (ConvOp::verify) and the FP8 probe (kernels/fp8_conv.h) recompute sampled outputs with.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace cnnbench {

// The geometry of a convolution: x and y with the batch, kernel and padding per axis, stride,
// dilation and groups (x.c / groups input channels per output channel).
struct ConvGeometry {
  Dims x, y;
  int kernel_h = 1, kernel_w = 1, stride = 1, pad_h = 0, pad_w = 0, dilation = 1, groups = 1;
};

// sum over the window of x[n, ih, iw, g C + c] * w[k, r, s, c] for output (n, k, oh, ow), in
// double, where x is NHWC (x.c channels per pixel) and w is KRSC (C = x.c / groups per row).
// Padding reads zeros. No bias, no activation.
double conv_window(const ConvGeometry& g, const float* x, const float* w, int n, int k, int oh,
                   int ow);

// The next of a layer check's sampled outputs of y (NHWC, batch included): an LCG step of
// `state`, then the element's index, its pixel row (n * H + oh) * W + ow and its coordinates.
struct SampledOutput {
  int64_t idx = 0, row = 0;
  int n = 0, oh = 0, ow = 0, k = 0;
};
SampledOutput next_sampled_output(uint64_t& state, const Dims& y);

}  // namespace cnnbench
