// Convolution for inference through the cuDNN graph API, fused with its epilogue:
//   y = relu?( conv(x, w) + bias + z? )
// BatchNorm is folded into w and bias beforehand. Where no engine builds the fused graph, the op
// runs the convolution alone and our pointwise kernel applies the epilogue; the record says so.
#pragma once

#include <string>

#include "kernels/cudnn_backend.h"
#include "kernels/op.h"

namespace cnnbench {

struct ConvSpec {
  std::string name;
  Dims x, y;  // batch included
  int kernel = 1, stride = 1, pad = 0, dilation = 1, groups = 1;
  Precision precision = Precision::FP32;
  bool residual = false;  // adds z, shaped like y
  bool relu = false;
  std::string signature() const;
  std::string op_name() const;  // "conv+bias+add+relu"
};

// Buffers of one conv: x, w (KRSC), bias [K], z (or null), y.
struct ConvBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
};

// Whether an engine's numerics fit a precision: fp32 refuses tensor-core (TF32) engines, tf32
// refuses those that down-convert inputs to half, and no precision takes reduced-precision
// accumulation.
bool engine_fits_precision(const EngineInfo& e, Precision p);

class ConvOp : public Op {
 public:
  ConvOp(const ConvSpec& spec, const ConvBuffers& buffers);
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  size_t workspace_bytes() const override;
  void bind_workspace(void* workspace, size_t bytes) override;
  void run(cudaStream_t stream) override;
  double verify(int samples, uint64_t seed) const override;
  bool fused() const;

 private:
  void epilogue(cudaStream_t stream);
  bool execute(const BackendDesc& plan, const BackendDesc& vp, bool fused, cudaStream_t stream);
  // Runs a plan directly, then captured in a CUDA graph and replayed on a dirty workspace and a
  // poisoned output: true when both give the same output.
  bool graph_safe(GpuContext& ctx, const BackendDesc& plan, bool fused, const TuneScratch& scratch);
  ConvSpec spec_;
  ConvBuffers buf_;
  cudnnHandle_t handle_ = nullptr;
  std::shared_ptr<PlanCacheEntry> plan_;
  BackendDesc own_plan_;  // this layer's own plan of the shared engine (share_plans off)
  const BackendDesc& plan() const;
  BackendDesc variant_pack_;
};

}  // namespace cnnbench
