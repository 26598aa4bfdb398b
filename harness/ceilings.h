// The machine's ceilings, measured by the suite itself (issues 7 and 8): a large cuBLASLt GEMM
// (TFLOP/s; --gemm_ceiling and the per-layer breakdown) and a device-to-device copy (GB/s, bytes
// read plus written).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/op.h"

namespace cnnbench {

class LinearOp;

// y[M, N] = x[M, K] W[N, K]^T + b with M = N = K = size through the classifier's op (cuBLASLt,
// autotuned), on values drawn uniformly in [-1, 1] (all-zero inputs draw less power and would
// flatter the clock), `runs` of it captured in one CUDA graph.
class GemmCeiling {
 public:
  explicit GemmCeiling(Precision p, int size = 8192, int runs = 10);
  ~GemmCeiling();
  GemmCeiling(const GemmCeiling&) = delete;
  GemmCeiling& operator=(const GemmCeiling&) = delete;
  double run_ms();  // one replay of the graph, per GEMM (device time)
  double tflops(double ms_per_gemm) const;
  std::string engine() const;

 private:
  void release();  // the graph, the op and the buffers (also when the constructor fails)
  int size_, runs_;
  GpuContext ctx_;
  void *x_ = nullptr, *w_ = nullptr, *b_ = nullptr, *y_ = nullptr, *ws_ = nullptr;
  std::unique_ptr<LinearOp> op_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The median of `reps` device-to-device copies of `bytes`: (read + written) bytes per second / 1e9.
double measure_copy_gbps(size_t bytes = size_t(1) << 30, int reps = 7);
// The median TFLOP/s of `reps` replays of a GemmCeiling.
double measure_gemm_tflops(Precision p, int reps = 7);

}  // namespace cnnbench
