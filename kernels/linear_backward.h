// The backward of the classifier's linear layer y = x * W^T + b (kernels/matmul.h) for training
// (issue 4), with cuBLASLt. Row-major, as linear_backward_ref (kernels/train_refs.h):
//   x [batch][in], w [out][in], dy [batch][out], all in the storage type of the precision (the
//   weights the forward read, not the fp32 master: cuBLASLt takes no mix of A and B types);
//   dx [batch][in] = dy * w, in the storage type; += instead of = with accumulate_dx;
//   dw [out][in] = dy^T * x, fp32 (fp32 accumulation and output in every precision);
//   db [out] = the sum of dy over the batch, fp32, fused into the dw matmul by the BGRADB epilogue
//   where cuBLASLt has an algorithm for it, else launch_bias_backward (train_kernels.h) after it.
// dx, db may be null (no input gradient wanted, no bias). fp32 computes with CUBLAS_COMPUTE_32F
// (no TF32), tf32 with CUBLAS_COMPUTE_32F_FAST_TF32, fp16/bf16 in float.
#pragma once

#include "kernels/op.h"

namespace cnnbench {

struct LinearBackwardSpec {
  std::string name;
  int batch = 1, in_features = 0, out_features = 0;
  Precision precision = Precision::FP32;
  bool accumulate_dx = false;
};

struct LinearBackwardBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;   // optional
  float* dw = nullptr;  // required
  float* db = nullptr;  // optional
};

class LinearBackwardOp : public Op {
 public:
  LinearBackwardOp(const LinearBackwardSpec& spec, const LinearBackwardBuffers& buffers);
  ~LinearBackwardOp() override;
  LinearBackwardOp(const LinearBackwardOp&) = delete;
  LinearBackwardOp& operator=(const LinearBackwardOp&) = delete;
  // Heuristics (autotune: the fastest of the first top_k) for both matmuls, a workspace up to
  // scratch.bytes (at most 32 MiB) shared by them, plus the bias reduction's scratch when it is
  // not fused. Each matmul picked is run at least once on the bound buffers (an algorithm
  // heuristics offer may still refuse the BGRADB epilogue), so dx, dw and db must be set again
  // after prepare() where their content matters (accumulate_dx).
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  size_t workspace_bytes() const override;
  void bind_workspace(void* workspace, size_t bytes) override;
  void run(cudaStream_t stream) override;
  bool bias_fused() const { return bgrad_fused_; }  // db from the BGRADB epilogue

 private:
  struct Gemm {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;
    void destroy();
  };
  void gemm(const Gemm& g, const void* a, const void* b, void* c, float beta,
            cudaStream_t stream) const;
  // Chooses g.algo among what heuristics offer; false when they offer none.
  bool choose(GpuContext& ctx, Gemm& g, const void* a, const void* b, void* c, float beta,
              EngineMode mode, int top_k, const TuneScratch& scratch, std::string* tag);
  bool build_dw(GpuContext& ctx, bool bgrad, EngineMode mode, int top_k, const TuneScratch& scratch,
                std::string* tag);
  LinearBackwardSpec spec_;
  LinearBackwardBuffers buf_;
  cublasLtHandle_t lt_ = nullptr;
  Gemm dx_, dw_;
  bool bgrad_fused_ = false;
  size_t matmul_ws_ = 0;     // shared by both matmuls, at the start of the workspace
  size_t bias_scratch_ = 0;  // launch_bias_backward's, after it (unfused only)
  void* workspace_ = nullptr;
};

}  // namespace cnnbench
