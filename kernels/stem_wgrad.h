// The image convolution's weight gradient (a network's stem in training: 3 input channels), a
// kernel of our own on the tensor cores:
//   dw[k, r, s, c] (= or +=) sum over n, oh, ow of dy[n, oh, ow, k]
//                                 * x[n, oh * stride - pad + r, ow * stride - pad_w + s, c]
// x NHWC with its own C (1 to 8: the image as it is, not padded), dy NHWC [N][Ho][Wo][K] packed,
// dw KRSC in fp32; fp16 or bf16 storage, float accumulation.
//
// Why: ResNet-50's training step at 256 spent 884 us in cuDNN's weight gradient of its stem (on
// the input padded to 8 channels) and 259 us padding it (call 100, an H100), where dy (411 MB) and
// the image (77 MB) take about 165 us to read at the copy rate.
//
// A GEMM of K rows by R * KR columns (KR: a window row's S * C taps rounded up to 8) reduced over
// the output pixels. A tile is up to kStemWgradPix output pixels of one output row; a block takes a
// contiguous run of tiles, down the rows of one column segment of an image, so that most tiles
// share R - stride of their input rows with the one before. Shared memory holds a ring of R +
// stride input rows as they are (a pixel's taps of window row r are S * C consecutive elements
// there, stride * C after the previous pixel's) and two of dy's tile buffers ([pixel][K], 16-byte
// chunks swizzled). While tile k computes, tile k + 1's dy is in flight (cp.async) and its stride
// new input rows wait in registers; k's products never wait on a load issued after them (call
// 107: the first form, which filled and then computed, ran 1.76x slower than cuDNN, 1,552 us
// against 884, on latency). mma.sync m16n8k8 takes A = dy^T (ldmatrix.trans from the dy buffer)
// and B = the taps (two 16-bit loads a register). 4 warps split the column tiles (warp w: tiles
// w, w + 4, ...), each holding all K rows' float accumulators across every tile the block takes.
// Blocks (a fixed count, kStemWgradBlocks, whatever the GPU, so the sums are the same on every
// card) write their partial sums; a second kernel adds them in a fixed order into dw.
// Deterministic; nothing allocated; capturable in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_choice.h"
#include "kernels/tensor.h"

namespace cnnbench {

// kStemWgradBlocks: 3 blocks an SM (168 registers a thread) on the H100's and H200's 132 SMs, one
// wave; fixed, whatever the card, so the sums (and dw's bits) are the same on every card.
inline constexpr int kStemWgradPix = 112, kStemWgradThreads = 128, kStemWgradBlocks = 396;

struct StemWgradSpec {
  Dims x, y;  // batch included; x.c the image's channels, y.c the outputs K
  int kernel = 7, kernel_w = 0, stride = 2, pad = 3, pad_w = -1;
  bool accumulate = false;  // dw += (else dw =)
  // 0: kStemWgradBlocks. Tests set fewer, so that each block takes many tiles (the ring's reuse of
  // rows from one tile to the next, and its refills at an image's or a segment's end).
  int max_blocks = 0;
  int kw() const { return kernel_w > 0 ? kernel_w : kernel; }
  int pw() const { return pad_w >= 0 ? pad_w : pad; }
};

// How a launch covers the reduction (host only).
struct StemWgradGeometry {
  int taps_row = 0;   // S * C
  int kr = 0;         // rounded up to 8
  int cols = 0;       // R * kr: the GEMM's columns (tap slots), a multiple of 8
  int row_width = 0;  // elements of an input row in shared memory (even)
  int ring_rows = 0;  // R + stride where the next tile's rows are loaded ahead, else R
  bool rows_ahead = false;
  int64_t tiles = 0;   // N * Ho * ceil(Wo / kStemWgradPix)
  int blocks = 0;      // min(tiles, max_blocks or kStemWgradBlocks)
  size_t smem = 0;     // the ring [ring_rows][row_width] + dy [2][kStemWgradPix][K], 16-bit
  size_t scratch = 0;  // the partial sums: blocks x K x cols floats
};

// Throws std::invalid_argument where the kernel cannot serve s: C over 8, K not 16, 32 or 64, more
// than 24 column tiles (R * kr / 8), y not what the kernel, stride and pads give.
StemWgradGeometry stem_wgrad_geometry(const StemWgradSpec& s);
// Whether the kernel serves s for storage type t (F16 or BF16), `why` the first reason not.
bool stem_wgrad_eligible(DType t, const StemWgradSpec& s, const char** why = nullptr);

// dw from x and dy. scratch: stem_wgrad_geometry(s).scratch bytes, 16-byte aligned; x 4-byte and
// dy 16-byte aligned. t: F16 or BF16.
void launch_stem_wgrad(DType t, const void* x, const void* dy, float* dw, const StemWgradSpec& s,
                       void* scratch, cudaStream_t stream);

// Who computes the training step's padded stem weight gradient (TrainOptions::stem_wgrad):
// cnnbench (ours), cudnn (on the padded copy), or auto (under autotune the faster of the two,
// kernels/stem_wgrad_op.h; ours under heuristics). stem_wgrad_choice maps CNNBENCH_STEM_WGRAD's
// values 0, 1, 2 to cudnn, cnnbench, auto; stem_wgrad_choice_from_env reads it once (default 1:
// ours, the default since call 127; 2 until the race has run on a GPU).
KernelChoice stem_wgrad_choice(int env_value);
KernelChoice stem_wgrad_choice_from_env();

// The kernels' thread code on the host (host buffers of type t; dw fp32): the fills, the
// fragments each lane loads and the partial sums' layout are the kernels' own code; the m16n8k8
// products are done in float from the lanes' fragments as the PTX ISA lays them out.
void stem_wgrad_emulate(DType t, const void* x, const void* dy, float* dw, const StemWgradSpec& s);

}  // namespace cnnbench
