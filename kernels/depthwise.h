// Depthwise convolution for inference, a kernel of our own (EfficientNet's MBConv):
//   y[n, oh, ow, c] = act( bias[c] + sum_{r,s} x[n, oh*stride - pad + r, ow*stride - pad_w + s, c]
//                                               * w[c, r, s] )
// x and y NHWC in the storage type; w KRSC with K = C and C/groups = 1, so [C][R][S], and bias
// [C], both in the storage type (what the compile step gives any conv); float accumulation.
// Square kernels of any size, any stride and padding, dilation 1.
//
// The kernel: a block covers a tile of channels (tx groups of `vec` channels each, 16-byte loads)
// and ty strips of output pixels; a strip is `px` adjacent output pixels along W of one row, so
// one thread loads each input column of its window once and uses it for every output of the strip
// it touches. The tile's weights are staged in shared memory as float [R*S][channels] once per
// block. Kernel sizes 3 and 5 with stride 1 or 2 have their loops unrolled at compile time (px 1,
// 2 or 4); any other size, and channels that do not split into 16-byte vectors (or pointers not
// 16-byte aligned), take a generic kernel (runtime loops, one output pixel per thread). Nothing is
// allocated and nothing synchronizes: a launch is capturable in a CUDA graph.
//
// DepthwiseOp puts the kernel beside cuDNN: it owns the ConvOp cuDNN would run and, under
// autotune, times both as CUDA graphs on the layer's own buffers and keeps the faster; under
// heuristics compile builds the ConvOp alone (cuDNN won every fp16 layer at batch 1 on the H200).
// Ours is kept only while a host recompute of sampled outputs agrees.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/kernel_choice.h"
#include "kernels/op.h"
#include "kernels/pointwise.h"
#include "kernels/tensor.h"

namespace cnnbench {

struct DepthwiseSpec {
  Dims x, y;  // batch included; x.c == y.c
  int kernel = 3, stride = 1, pad = 1;
  int pad_w = -1;  // the width's pad; -1: the same as the height's
  Act act = Act::None;
  int pw() const { return pad_w >= 0 ? pad_w : pad; }
};

// The spec of a conv that is depthwise (depthwise_eligible).
DepthwiseSpec depthwise_spec(const ConvSpec& s);
// Whether our kernel computes conv s: depthwise (groups == x.c == y.c), square kernel, dilation
// 1, no residual, a packed output, y's dims those the kernel, stride and pads give. `why` gets
// the first reason it does not.
bool depthwise_eligible(const ConvSpec& s, std::string* why = nullptr);

// How a launch covers the output (host only, so it is tested without a GPU).
struct DepthwiseGeometry {
  int vec = 1;         // channels per load: 16 bytes (8 fp16/bf16, 4 fp32) or 1
  bool fast = false;   // kernel 3 or 5, stride 1 or 2, vector loads: the unrolled kernel
  int px = 1;          // output pixels per thread along W
  int groups = 0;      // channel groups of `vec` channels: C / vec
  int tx = 1, ty = 1;  // block: channel groups x pixel strips (tx * ty <= 256)
  int64_t strips_w = 0, strips = 0;  // strips per output row, and in all: N * Ho * strips_w
  int64_t grid_x = 0;                // blocks across strips
  int grid_y = 0;                    // blocks across channel tiles
  size_t smem = 0;                   // the tile's weights, float [R*S][tx * vec]
  int64_t blocks() const { return grid_x * grid_y; }
};

// The geometry for storage type t; `aligned`: x and y 16-byte aligned. px 0 picks it: the largest
// of 4, 2, 1 that still gives about two blocks per SM, else 1 (the generic kernel takes 1 always).
// Throws std::invalid_argument where no launch fits (a kernel too large for shared memory, a grid
// beyond CUDA's limits).
DepthwiseGeometry depthwise_geometry(DType t, const DepthwiseSpec& s, bool aligned, int px = 0);
// The px values worth timing for this layer (4, 2, 1 for the unrolled kernel; 1 otherwise).
std::vector<int> depthwise_px_choices(DType t, const DepthwiseSpec& s, bool aligned);

// y = act(dwconv(x, w) + bias) with depthwise_geometry(t, s, aligned(x, y), px). bias may be
// null (zero).
void launch_depthwise(DType t, const void* x, const void* w, const void* bias, void* y,
                      const DepthwiseSpec& s, int px, cudaStream_t stream);

// The kernels' own thread code run on the host (for CPU tests), block by block and thread by
// thread over the geometry launch_depthwise would take with x and y 16-byte aligned or not:
// host buffers of type t (x and y aligned where `aligned`).
void depthwise_emulate(DType t, const void* x, const void* w, const void* bias, void* y,
                       const DepthwiseSpec& s, int px, bool aligned);

// The same in double on the host: x NHWC, w [C][R][S], bias [C] (empty: zero).
std::vector<double> depthwise_reference(const std::vector<float>& x, const std::vector<float>& w,
                                        const std::vector<float>& bias, const DepthwiseSpec& s);

// --depthwise: who computes depthwise convs in inference.
//   auto      autotune times cuDNN and ours per layer and keeps the faster; heuristics take cuDNN
//   cudnn     cuDNN alone (the ConvOp, as before the kernel existed)
//   cnnbench  ours alone
using DepthwiseChoice = KernelChoice;
inline DepthwiseChoice parse_depthwise_choice(const std::string& s) {
  return parse_kernel_choice(s, "depthwise");
}
inline const char* depthwise_choice_name(DepthwiseChoice c) {
  return kernel_choice_name(c);
}

// A depthwise conv with two engines: cuDNN's (the ConvOp it owns) and our kernel.
//   auto + autotune   prepares the ConvOp, then times ConvOp::run and our kernel (each px
//                     choice) the same way, each captured as a CUDA graph of 20 runs replayed five
//                     times (the median), and keeps the faster;
//   auto + heuristic  our kernel, px by depthwise_geometry, the ConvOp never built;
//   cnnbench          our kernel (autotune times its px choices);
//   cudnn             the ConvOp alone.
// Ours is checked after prepare() by a host recompute of sampled outputs (verify); where it
// departs, auto falls back to cuDNN (the record lists it under `rejected`) and cnnbench throws.
// The record says which engine runs: "cnnbench depthwise kernel" or the cuDNN tag, tuned_us
// the winner's graph-timed us per run, engine_notes both times ("cudnn eng8 14.2 us, ours
// 3.1 us"). The ConvOp's workspace is reported and bound only when it is the one that runs.
class DepthwiseOp : public ConvWithAlternative {
 public:
  DepthwiseOp(const ConvSpec& spec, const ConvBuffers& buffers,
              DepthwiseChoice choice = DepthwiseChoice::Auto);
  ~DepthwiseOp() override;
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  void run(cudaStream_t stream) override;
  double verify(int samples, uint64_t seed) const override;
  // The ConvOp prepare() will build under `mode` (for prefetch_conv_plans), or null.
  const ConvOp* cudnn_conv(EngineMode mode) const;
  int px() const { return px_; }

 private:
  void run_ours(cudaStream_t stream) const;
  // Falls back to (or takes) cuDNN: prepares the ConvOp unless it is prepared already.
  void prepare_cudnn(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch);
  ConvSpec spec_;
  DepthwiseSpec ds_;
  ConvBuffers buf_;
  DepthwiseChoice choice_;
  int px_ = 1;
};

}  // namespace cnnbench
