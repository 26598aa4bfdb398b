// Squeeze-and-excitation (EfficientNet's MBConv), as one op of our own kernels:
//   s[n, c] = sigmoid( W2 · silu( W1 · mean_hw(x[n, :, :, c]) + b1 ) + b2 )[c]
//   y[n, h, w, c] = x[n, h, w, c] * s[n, c]
// W1 is [squeeze, C], W2 is [C, squeeze] (torchvision's fc1 / fc2 1x1 convs), float32 on the
// device, like b1 [squeeze] and b2 [C]. x and y are NHWC in the storage type; y may alias x.
// Two or three kernels: the pooling pass, many blocks per image each summing a pixel range into
// its own slot (no float atomics, so results repeat bit for bit), whose last block per image adds
// the slots in order and, where fc1 is small, runs fc1; fc1 over many blocks where it is large;
// and the scale, each block computing its channel slice's gates (fc2) before scaling its pixels.
// Scratch is float and holds the partial sums, the pooled and hidden values and the per-image
// counters; the kernels leave the counters at zero, so CUDA-graph replays need no reset.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace cnnbench {

struct SeSpec {
  Dims x;  // batch included; y has the same dims
  int squeeze = 1;
};

// Bytes of scratch launch_se needs (zero-initialised once by the caller before the first run).
size_t se_scratch_bytes(const SeSpec& s);
void launch_se(DType t, const void* x, void* y, const float* w1, const float* b1, const float* w2,
               const float* b2, const SeSpec& s, void* scratch, cudaStream_t stream);
// The kernels launch_se runs for s, as the layer table shows them ("pool+fc1 | fc2+scale").
std::string se_kernels(const SeSpec& s);
// The same in double on the host, NHWC, for references.
std::vector<double> se_reference(const std::vector<float>& x, const std::vector<float>& w1,
                                 const std::vector<float>& b1, const std::vector<float>& w2,
                                 const std::vector<float>& b2, const SeSpec& s);

}  // namespace cnnbench
