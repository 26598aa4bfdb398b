// Squeeze-and-excitation (EfficientNet's MBConv), as one op of our own kernels:
//   s[n, c] = sigmoid( W2 · silu( W1 · mean_hw(x[n, :, :, c]) + b1 ) + b2 )[c]
//   y[n, h, w, c] = x[n, h, w, c] * s[n, c]
// W1 is [squeeze, C], W2 is [C, squeeze] (torchvision's fc1 / fc2 1x1 convs), float32 on the
// device, like b1 [squeeze] and b2 [C]. x and y are NHWC in the storage type; y may alias x.
// Two variants of our own kernels, both deterministic (no float atomics: partial sums are added
// in a fixed order) and both capturable:
//   one-block  two kernels: a pooling pass of at most 64 blocks per image whose last block runs
//              both 1x1 convs, then the scale. Few launches, for small layers;
//   split      two or three: a many-block pooling pass (16-byte loads) whose last block adds the
//              slots and, where fc1 is small, runs fc1; fc1 over many blocks where it is large;
//              and the scale, each block computing its channel slice's gates (fc2) first. For
//              large layers and large batches.
// Scratch is float and holds the partial sums, the pooled / hidden / gate values and the
// per-image counters (shared by both variants); the kernels leave the counters at zero, so
// CUDA-graph replays need no reset.
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

enum class SeVariant { OneBlock, Split };
const char* se_variant_name(SeVariant v);  // "one-block", "split"

// Bytes of scratch launch_se needs for either variant (zero-initialised once by the caller
// before the first run).
size_t se_scratch_bytes(const SeSpec& s);
void launch_se(DType t, const void* x, void* y, const float* w1, const float* b1, const float* w2,
               const float* b2, const SeSpec& s, SeVariant v, void* scratch, cudaStream_t stream);
// At batch 1 a gate can be folded into the 1x1 conv that alone reads the scaled tensor:
// conv(x * gate, W) = conv(x, W * gate) per input channel. launch_se_gate runs the split
// variant's pooling and excitation and writes the gates, [N][C] float, to `gate` (scaling
// nothing); launch_se_fold writes w_out[k][c] = w[k][c] * gate[c] for the conv's [K][C] weights
// (KRSC with R = S = 1) in type t.
void launch_se_gate(DType t, const void* x, const float* w1, const float* b1, const float* w2,
                    const float* b2, const SeSpec& s, void* scratch, float* gate,
                    cudaStream_t stream);
void launch_se_fold(DType t, const void* w, const float* gate, void* w_out, int K, int C,
                    cudaStream_t stream);

// The kernels variant v runs for s, as the layer table shows them ("pool+fc1 | fc2+scale").
std::string se_kernels(const SeSpec& s, SeVariant v);
// The variant chosen without timing: split for large images (a million elements) or a large fc1.
SeVariant se_heuristic(const SeSpec& s);
// Times both variants on these buffers (y is overwritten; x too where y aliases it), each as a
// CUDA graph of 20 runs replayed five times, and returns the faster; us[] gets the one-block and
// split times per run in microseconds. Not callable while `stream` is being captured; a null
// `stream` (the legacy default stream, which cannot be captured) times on a stream of its own.
SeVariant tune_se(DType t, const void* x, void* y, const float* w1, const float* b1,
                  const float* w2, const float* b2, const SeSpec& s, void* scratch,
                  cudaStream_t stream, double us[2]);
// The same in double on the host, NHWC, for references.
std::vector<double> se_reference(const std::vector<float>& x, const std::vector<float>& w1,
                                 const std::vector<float>& b1, const std::vector<float>& w2,
                                 const std::vector<float>& b2, const SeSpec& s);

}  // namespace cnnbench
