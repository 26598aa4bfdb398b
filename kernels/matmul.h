// The classifier: y[N, out] = x[N, in] * W^T + b through one cuBLASLt matmul with a fused bias
// epilogue. W is row-major [out, in] as PyTorch stores it.
#pragma once

#include "kernels/op.h"

namespace cnnbench {

// The CUDA data type cuBLASLt takes for a storage type.
cudaDataType_t cuda_data_type(DType t);

struct LinearSpec {
  std::string name;
  int batch = 1, in_features = 0, out_features = 0;
  Precision precision = Precision::FP32;
  bool relu = false;
};

// The classifier's key in the plan cache (--plan_cache): its shape, precision, epilogue, the
// workspace its algorithms may take and the cuBLASLt version (an algorithm is only good for the
// library that gave it): "linear fp16 32x2048->1000 bias ws33554432 cublasLt 130100".
std::string linear_plan_key(const LinearSpec& s, bool bias, size_t max_workspace,
                            size_t cublaslt_version);

class LinearOp : public Op {
 public:
  LinearOp(const LinearSpec& spec, const void* x, const void* w, const void* bias, void* y);
  ~LinearOp() override;
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  size_t workspace_bytes() const override { return workspace_; }
  void bind_workspace(void* workspace, size_t bytes) override;
  void run(cudaStream_t stream) override;
  double verify(int samples, uint64_t seed) const override;

 private:
  LinearSpec spec_;
  const void *x_, *w_, *bias_;
  void* y_;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
  void* workspace_ptr_ = nullptr;
};

}  // namespace cnnbench
