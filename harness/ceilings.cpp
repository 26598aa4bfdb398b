#include "harness/ceilings.h"

#include <algorithm>
#include <vector>

#include "harness/check.h"
#include "kernels/matmul.h"
#include "kernels/storage.h"

namespace cnnbench {

GemmCeiling::GemmCeiling(Precision p, int size, int runs) : size_(size), runs_(runs) {
  try {
    const DType t = storage_type(p);
    const size_t n = size_t(size) * size;
    std::vector<float> host(n);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (float& v : host) {  // xorshift: fast, and enough for a timing's operands
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      v = float(double(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    const std::vector<uint8_t> bytes = to_storage(host, t);
    CNN_CHECK_CUDA(cudaMalloc(&x_, bytes.size()));
    CNN_CHECK_CUDA(cudaMalloc(&w_, bytes.size()));
    CNN_CHECK_CUDA(cudaMalloc(&y_, bytes.size()));
    CNN_CHECK_CUDA(cudaMalloc(&b_, size_t(size) * dtype_size(t)));
    CNN_CHECK_CUDA(cudaMemcpy(x_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    CNN_CHECK_CUDA(cudaMemcpy(w_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    CNN_CHECK_CUDA(cudaMemset(b_, 0, size_t(size) * dtype_size(t)));
    LinearSpec spec;
    spec.name = "gemm";
    spec.batch = spec.in_features = spec.out_features = size;
    spec.precision = p;
    op_ = std::make_unique<LinearOp>(spec, x_, w_, b_, y_);
    TuneScratch scratch;
    scratch.bytes = size_t(64) << 20;
    CNN_CHECK_CUDA(cudaMalloc(&ws_, scratch.bytes));
    scratch.ptr = ws_;
    op_->prepare(ctx_, EngineMode::Autotune, 8, scratch);
    op_->bind_workspace(ws_, scratch.bytes);
    CNN_CHECK_CUDA(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < runs; ++i) op_->run(ctx_.stream);
    CNN_CHECK_CUDA(cudaStreamEndCapture(ctx_.stream, &graph_));
    CNN_CHECK_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
    CNN_CHECK_CUDA(cudaEventCreate(&start_));
    CNN_CHECK_CUDA(cudaEventCreate(&stop_));
    for (int i = 0; i < 3; ++i) CNN_CHECK_CUDA(cudaGraphLaunch(exec_, ctx_.stream));  // warm-up
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  } catch (...) {
    release();
    throw;
  }
}

GemmCeiling::~GemmCeiling() {
  release();
}

void GemmCeiling::release() {
  if (exec_) cudaGraphExecDestroy(exec_), exec_ = nullptr;
  if (graph_) cudaGraphDestroy(graph_), graph_ = nullptr;
  op_.reset();
  for (void** p : {&x_, &w_, &b_, &y_, &ws_})
    if (*p) cudaFree(*p), *p = nullptr;
  if (start_) cudaEventDestroy(start_), start_ = nullptr;
  if (stop_) cudaEventDestroy(stop_), stop_ = nullptr;
}

double GemmCeiling::run_ms() {
  CNN_CHECK_CUDA(cudaEventRecord(start_, ctx_.stream));
  CNN_CHECK_CUDA(cudaGraphLaunch(exec_, ctx_.stream));
  CNN_CHECK_CUDA(cudaEventRecord(stop_, ctx_.stream));
  CNN_CHECK_CUDA(cudaEventSynchronize(stop_));
  float ms = 0;
  CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  return double(ms) / runs_;
}

double GemmCeiling::tflops(double ms_per_gemm) const {
  return 2.0 * double(size_) * size_ * size_ / (ms_per_gemm * 1e-3) * 1e-12;
}

std::string GemmCeiling::engine() const {
  return op_ ? op_->record().engine : "";
}

double measure_gemm_tflops(Precision p, int reps) {
  GemmCeiling g(p);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(g.tflops(g.run_ms()));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double measure_copy_gbps(size_t bytes, int reps) {
  void *a = nullptr, *b = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  std::vector<double> gbps;
  try {
    CNN_CHECK_CUDA(cudaMalloc(&a, bytes));
    CNN_CHECK_CUDA(cudaMalloc(&b, bytes));
    CNN_CHECK_CUDA(cudaMemset(a, 1, bytes));
    CNN_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CNN_CHECK_CUDA(cudaEventCreate(&e0));
    CNN_CHECK_CUDA(cudaEventCreate(&e1));
    CNN_CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));  // warm-up
    for (int i = 0; i < reps; ++i) {
      CNN_CHECK_CUDA(cudaEventRecord(e0, s));
      CNN_CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
      CNN_CHECK_CUDA(cudaEventRecord(e1, s));
      CNN_CHECK_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      gbps.push_back(2.0 * double(bytes) / (ms * 1e-3) * 1e-9);
    }
  } catch (...) {
    for (void* p : {a, b})
      if (p) cudaFree(p);
    if (s) cudaStreamDestroy(s);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    throw;
  }
  for (void* p : {a, b}) cudaFree(p);
  cudaStreamDestroy(s);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

}  // namespace cnnbench
