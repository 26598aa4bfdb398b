// The backward of a convolution for training (issue 4), through the cuDNN graph API, one
// operation per graph:
//   data:   dx = alpha * conv_transpose(dy, w) + beta * dx    (CONVOLUTION_BACKWARD_DATA)
//   filter: dw = alpha * sum over the batch of x (*) dy + beta * dw   (CONVOLUTION_BACKWARD_FILTER)
// beta = 1 (ConvBackwardSpec::accumulate) adds into what the buffer holds: a tensor that feeds
// several consumers sums its gradients this way. Layouts as the forward's (kernels/conv.h,
// kernels/train_refs.h): x, dx, dy NHWC in the storage type of the precision, w KRSC
// ([K][R][S][C / groups]) in the storage type; every precision computes in float.
//
// The weight gradient dw is KRSC too. fp32 and tf32 store it in fp32. fp16 and bf16 store it in
// the storage type, as PyTorch's autocast does (heuristics take the first engine that builds
// that, else one writing fp32), or, under autotune, in whichever of the two an engine computes
// faster. In call 14, with fp32 tried first and kept whenever it built, fp16 ResNet-50 trained
// slower than tf32. dw_type() says which it took; the caller sizes dw for fp32 and reads it by
// dw_type().
//
// A filter gradient in fp16 or bf16 whose input has a channel count no engine takes (an RGB
// image: 3) runs padded: run() copies x into the workspace with zero channels up to a multiple of
// 8, an inner op computes the padded gradient there (its zero channels' gradient is zero), and
// the first C channels of each filter row go to dw. record().engine says so ("... on x padded
// 3->8").
//
// Engines come from heuristics mode A, then the fallback list, filtered by the precision as the
// forward's (engine_fits_precision: fp32 takes no tensor-core/TF32 engine, tf32 none that
// down-converts its inputs) and by ctx.excluded; under autotune the fastest of the first top_k
// that build is kept, and only a plan whose CUDA-graph replay matches a direct run. The plan is
// built once; run() executes it on the bound buffers and workspace, on `stream` (the handle is
// pointed at `stream` for the call when it is bound to another). record().engine is the engine's
// tag ("eng12{k2=1}+rtc").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cudnn_backend.h"
#include "kernels/op.h"

namespace cnnbench {

enum class ConvGrad { Data, Filter };

struct ConvBackwardSpec {
  std::string name;
  Dims x, y;  // the forward's input and output, batch included
  // As ConvSpec: kernel and pad are the height's, kernel_w and pad_w the width's.
  int kernel = 1, kernel_w = 0, stride = 1, pad = 0, pad_w = -1, dilation = 1, groups = 1;
  Precision precision = Precision::FP32;
  bool accumulate = false;  // beta = 1: add into dx (or dw) instead of overwriting it
  // Filter, fp16/bf16, C % 8 != 0: take the padded path (below) even where an engine takes x as
  // it is (tests).
  bool force_padded = false;
  // Filter, fp16/bf16: dw in fp32 wherever an engine writes it, the storage type only where none
  // does (not timed against each other), so every process of a data-parallel run lays its
  // gradients out alike (harness/data_parallel.h); off: both timed under autotune.
  bool fp32_dw = false;
  int kw() const { return kernel_w > 0 ? kernel_w : kernel; }
  int pw() const { return pad_w >= 0 ? pad_w : pad; }
  std::string signature(ConvGrad g) const;
  // The backward of a forward conv (its geometry and precision; accumulate off).
  static ConvBackwardSpec of(const ConvSpec& forward);
};

// Buffers of one backward op. Data: dy, w in; dx out. Filter: x, dy in; dw out (dw_type()).
struct ConvBackwardBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dw = nullptr;
};

struct ConvBackwardGraph;  // the operation graph and the descriptors it refers to

class ConvBackwardOp : public Op {
 public:
  ConvBackwardOp(const ConvBackwardSpec& spec, ConvGrad grad, const ConvBackwardBuffers& buffers);
  ~ConvBackwardOp() override;
  // Builds the plan on ctx.cudnn; a workspace up to scratch.bytes. Like the forward (ConvOp), a
  // plan must give the same output replayed from a CUDA graph as run directly, else the next
  // candidate is taken (record().rejected lists those refused). Both checks and autotune's timing
  // run the op on its buffers and scratch; the output is put back as it was before prepare()
  // returns. Throws LibraryError where no engine builds the graph.
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  size_t workspace_bytes() const override { return workspace_; }
  void bind_workspace(void* workspace, size_t bytes) override;
  void run(cudaStream_t stream) override;
  ConvGrad grad() const { return grad_; }
  DType dw_type() const { return dw_type_; }  // Filter: the type dw is stored in (after prepare)
  const EngineInfo& engine() const { return engine_; }

 private:
  bool execute(const BackendDesc& plan, const BackendDesc& vp, cudaStream_t stream);
  // Runs a plan directly, then captured in a CUDA graph and replayed on a dirty workspace and a
  // poisoned output (accumulating: both from zeros): true when both give the same output (its
  // first and last million elements, as ConvOp::graph_safe compares y).
  bool graph_safe(GpuContext& ctx, const BackendDesc& plan, const TuneScratch& scratch);
  BackendDesc variant_pack(void* workspace) const;
  // The padded filter gradient (see above): true when it applies to this op.
  bool paddable() const;
  void prepare_padded(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch);
  // Byte offsets in the workspace of the padded x and the padded dw; the inner op's workspace
  // starts at pad_ws_offset_.
  size_t pad_dw_offset_ = 0, pad_ws_offset_ = 0;
  std::unique_ptr<ConvBackwardOp> padded_;
  void* workspace_ptr_ = nullptr;
  ConvBackwardSpec spec_;
  ConvGrad grad_;
  ConvBackwardBuffers buf_;
  DType dw_type_ = DType::F32;
  cudnnHandle_t handle_ = nullptr;
  std::unique_ptr<ConvBackwardGraph> graph_;
  BackendDesc config_, plan_, variant_pack_;
  EngineInfo engine_;
  size_t workspace_ = 0;
};

}  // namespace cnnbench
