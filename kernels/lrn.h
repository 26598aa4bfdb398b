// Local response normalization across channels (AlexNet as MXNet and Caffe build it), NHWC:
//   y[c] = x[c] / (k + alpha / size * sum_{c' in window(c)} x[c']^2) ^ beta
// with window(c) = [c - (size-1)/2, c + size/2] clipped to [0, C). This is MXNet's LRN and
// cuDNN's cudnnLRNCrossChannelForward convention (alpha divided by size).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "kernels/tensor.h"

namespace cnnbench {

struct LrnSpec {
  Dims x;  // batch included; y has the same dims
  int size = 5;
  double alpha = 1e-4, beta = 0.75, k = 2.0;
  int ld_x = 0, ld_y = 0;  // channel strides; 0: packed
};

void launch_lrn(DType t, const void* x, void* y, const LrnSpec& s, cudaStream_t stream);
// The same in double on the host, NHWC packed, for references.
std::vector<double> lrn_reference(const std::vector<float>& x, const LrnSpec& s);

}  // namespace cnnbench
