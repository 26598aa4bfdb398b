// The image's convolution (a network's stem: 3 input channels) for inference, a kernel of our own
// on the tensor cores (issue 9: ResNet-50's 7x7/2 stem took 1.24 of its 7.72 ms at batch 256 in
// call 53 of 2026-12-05, about 5x its roofline bound, even with the input padded to 8 channels
// for cuDNN's tensor-core engines):
//   y[n, oh, ow, k] = act( bias[k] + sum_{r,s,c} x[n, oh*stride - pad + r, ow*stride - pad_w + s,
//   c]
//                                                * w[k, r, s, c] )
// x NHWC with its own C (1 to 8: the image, not padded), w KRSC whose rows may be wider than C
// (w_ld: the compile step's padded weights, zeros beyond C, are read as they are), bias [K], y
// NHWC with row stride ld_y; fp16 or bf16 storage, float accumulation.
//
// An implicit GEMM: M = the output pixels (N * Ho * Wo), N = the K outputs (at most 64), and the
// reduction is the R * S * C taps of one pixel's window, padded with zeros to a multiple of 16
// (ResNet's 147 to 160). A block keeps all K outputs' weights in shared memory ([K][taps], once
// per block) and loops over tiles of 128 pixels: its 256 threads gather each pixel's window into
// shared memory (im2col of one tile, zeros outside the image), 8 warps multiply it by the weights
// with WMMA (16x16x16, float accumulators, a 32x32 piece per warp), and the epilogue adds the bias,
// applies the activation and stores 8 channels (16 bytes) a thread. Nothing is allocated and
// nothing synchronizes with the host: a launch is capturable in a CUDA graph. The pad op cuDNN's
// path needs (3 -> 8 channels) is not needed: the kernel reads the image as it is.
//
// stem_emulate runs the gather, the weight staging and the epilogue threads' own code on the host,
// with the multiplication done in float there, so the indexing is tested without a GPU; the WMMA
// fragments are the GPU tests' (GpuOps.StemKernel*).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/kernel_choice.h"
#include "kernels/op.h"
#include "kernels/pointwise.h"
#include "kernels/tensor.h"

namespace cnnbench {

struct StemSpec {
  Dims x, y;  // batch included; x.c the real input channels
  int kernel = 7, kernel_w = 0, stride = 2, pad = 3, pad_w = -1;
  int w_ld = 0;  // the weights' channel stride (0: x.c)
  int ld_y = 0;  // y's row stride (0: y.c)
  Act act = Act::None;
  int kw() const { return kernel_w > 0 ? kernel_w : kernel; }
  int pw() const { return pad_w >= 0 ? pad_w : pad; }
  int wld() const { return w_ld > 0 ? w_ld : x.c; }
  int ldy() const { return ld_y > 0 ? ld_y : y.c; }
};

// How a launch covers the output (host only).
struct StemGeometry {
  int taps = 0;        // R * S * C
  int taps_pad = 0;    // rounded up to 16
  int ldk = 0;         // shared rows' stride in elements: taps_pad + 8
  int64_t pixels = 0;  // M = N * Ho * Wo
  int64_t tiles = 0;   // of 128 pixels
  size_t smem = 0;     // weights [64][ldk] + max(window tile [128][ldk], float [128][68])
};

// The kernel's constants: pixels a tile, outputs a block (K padded with zero weights), threads.
inline constexpr int kStemTile = 128, kStemOutputs = 64, kStemThreads = 256;

// Throws std::invalid_argument where the kernel cannot run s: C over 8, K over 64 or not a
// multiple of 8, ld_y not a multiple of 8, y not what the kernel, stride and pads give, more than
// 512 taps (shared memory), a w_ld under C.
StemGeometry stem_geometry(const StemSpec& s);

// The spec of a conv the compile step gave (x with its padded channels) when the image itself has
// `real_c` channels; whether our kernel computes it (fp16 or bf16, groups 1, dilation 1, no
// residual, stem_geometry accepts it), `why` the first reason it does not.
StemSpec stem_spec(const ConvSpec& s, int real_c);
bool stem_eligible(const ConvSpec& s, int real_c, std::string* why = nullptr);
// Whether the image, the weights, the bias and y are 16-byte aligned, as launch_stem needs.
bool stem_aligned(const void* image, const ConvBuffers& b);

// Two kernels compute the same conv:
//   tile  the kernel above (an im2col tile of 128 pixels in shared memory, WMMA);
//   rows  a block takes up to 128 output pixels of one output row and copies the R input rows
//         their windows cover into shared memory as they are (coalesced, zeros outside the
//         image). A pixel's taps of window row r are S * C consecutive elements there, so the
//         tensor cores' A fragments (mma.sync m16n8k8) are read straight from the rows, with each
//         window row's S * C taps padded to a multiple of 8 (ResNet's 21 to 24: 168 taps a
//         pixel, not 160) and masked to zero past S * C. No window tile is written. 4 warps of
//         32 pixels by all K outputs; the epilogue from the accumulators to y. Right on an H100
//         but 2x slower than the tile kernel (call 68) when it filled all R rows and then
//         computed, every tile; now its blocks walk down the rows with the next tile's new rows
//         loaded while one computes (the ring of kernels/stem_rows.cuh), and ResNet's stem is
//         compiled in (StemRowsGeometry::resnet). Raced against the tile kernel by default since
//         call 127 (H100, ResNet-50 fp16 at 256: 644.6 against 891.3 us; at 32 it lost, 148.4
//         against 132.4); CNNBENCH_STEM_ROWS=0 leaves it out of the race.
enum class StemVariant { Tile, Rows };
const char* stem_variant_name(StemVariant v);  // "tile", "rows"

// The rows kernel's layout (host only); throws std::invalid_argument where stem_geometry does or
// the shared memory would pass 227 KiB.
struct StemRowsGeometry {
  int taps_row = 0;     // S * C
  int kr = 0;           // rounded up to 8
  int ldw = 0;          // shared weight rows' stride: at least R * kr, ldw / 2 = 4 (mod 32)
  int row_width = 0;    // elements of an input row in shared memory
  int ring_rows = 0;    // the ring's slots (kernels/stem_rows.cuh): R + stride, or R
  int64_t tiles = 0;    // N * Ho * ceil(Wo / 128)
  size_t smem = 0;      // weights [K][ldw] + the ring [ring_rows][row_width]
  bool resnet = false;  // ResNet's stem (7x7/2, 3 channels, 64 outputs): its tiles' code has the
                        // shape compiled in (kernels/stem.cu, rows_tile_resnet)
};
StemRowsGeometry stem_rows_geometry(const StemSpec& s);

// y = act(conv(x, w) + bias) on `grid` blocks (0: as many as the tiles, at most as many as fit
// on the SMs of the current device). t: F16 or BF16; x, w, bias, y 16-byte aligned.
void launch_stem(DType t, const void* x, const void* w, const void* bias, void* y,
                 const StemSpec& s, int grid, cudaStream_t stream,
                 StemVariant variant = StemVariant::Tile);

// The kernel's thread code on the host (host buffers of type t), tile by tile, the multiplication
// in float (tile: in the kernel's order of taps; rows: from the lanes' fragments).
void stem_emulate(DType t, const void* x, const void* w, const void* bias, void* y,
                  const StemSpec& s, StemVariant variant = StemVariant::Tile);

// --stem: who computes the image's convolution (where the compile step pads it) in inference.
//   auto      autotune times the padded cuDNN conv (pad op included) and ours, keeps the faster;
//             heuristics take cuDNN
//   cudnn     the pad op and cuDNN's conv, as before our kernel
//   cnnbench  ours
using StemChoice = KernelChoice;
inline StemChoice parse_stem_choice(const std::string& s) {
  return parse_kernel_choice(s, "stem");
}
inline const char* stem_choice_name(StemChoice c) {
  return kernel_choice_name(c);
}

// The image's conv with two engines: the pad op plus cuDNN's conv on the padded input (the
// ConvOp it owns, `spec` and `buffers` as the compile step gives them: x the padded buffer, w the
// padded weights), or our kernel on the image itself (`image`, `real_c` channels). Under
// autotune both are timed as CUDA graphs of 20 runs and the faster kept (ours: the faster of the
// tile and rows kernels; without autotune, the tile kernel); ours only while a host
// recompute of sampled outputs agrees (the record lists it under `rejected` otherwise, and
// cnnbench throws). The record: "cnnbench stem kernel" or the cuDNN tag, tuned_us the winner's,
// engine_notes both times. `pads` false: the padded copy is written by a step before this op
// (the training step, whose weight gradient reads it too), so cuDNN's path does not pad again.
class StemConvOp : public ConvWithAlternative {
 public:
  StemConvOp(const ConvSpec& spec, const ConvBuffers& buffers, const void* image, int real_c,
             StemChoice choice, bool pads = true);
  ~StemConvOp() override;
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  void run(cudaStream_t stream) override;
  double verify(int samples, uint64_t seed) const override;
  // The ConvOp prepare() will build under `mode` (for prefetch_conv_plans), or null.
  const ConvOp* cudnn_conv(EngineMode mode) const;

 private:
  void pad(cudaStream_t stream) const;  // the padded copy of the image (where pads_)
  void run_cudnn(cudaStream_t stream);
  void run_ours(cudaStream_t stream) const;
  ConvSpec spec_;  // the padded conv's
  StemSpec ss_;
  ConvBuffers buf_;
  const void* image_;
  int real_c_;
  StemChoice choice_;
  bool pads_;
  StemVariant variant_ = StemVariant::Tile;  // which of our kernels run_ours launches
};

}  // namespace cnnbench
