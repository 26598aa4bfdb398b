#include "kernels/linear_backward.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "harness/check.h"
#include "kernels/matmul.h"
#include "kernels/train_kernels.h"

namespace cnnbench {

namespace {

constexpr size_t kMaxWorkspace = size_t(32) << 20;

size_t round_up(size_t b) {
  return (b + 255) / 256 * 256;
}

std::string algo_tag(const cublasLtMatmulAlgo_t& algo) {
  int id = 0, tile = 0;
  size_t written = 0;
  CNN_CHECK_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                        sizeof(id), &written));
  CNN_CHECK_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                        sizeof(tile), &written));
  return "cublasLt algo " + std::to_string(id) + " tile " + std::to_string(tile);
}

}  // namespace

void LinearBackwardOp::Gemm::destroy() {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (desc) cublasLtMatmulDescDestroy(desc);
  a = b = c = nullptr;
  desc = nullptr;
}

LinearBackwardOp::LinearBackwardOp(const LinearBackwardSpec& spec,
                                   const LinearBackwardBuffers& buffers)
    : spec_(spec), buf_(buffers) {
  if (!buffers.x || !buffers.w || !buffers.dy || !buffers.dw)
    throw std::logic_error("linear backward: x, w, dy and dw are required in " + spec.name);
  if (buffers.dx == nullptr && spec.accumulate_dx)
    throw std::logic_error("linear backward: accumulate_dx without dx in " + spec.name);
  record_.name = spec.name;
  record_.op = std::string("linear_bwd") + (buffers.dx ? " dx" : "") + " dw" +
               (buffers.db ? " db" : "") + (spec.accumulate_dx ? " (accumulate dx)" : "");
  record_.shape = "in " + std::to_string(spec.batch) + "x" + std::to_string(spec.in_features) +
                  " -> out " + std::to_string(spec.batch) + "x" + std::to_string(spec.out_features);
  out_ = buffers.dw;
  out_bytes_ = size_t(spec.out_features) * spec.in_features * sizeof(float);
}

LinearBackwardOp::~LinearBackwardOp() {
  dx_.destroy();
  dw_.destroy();
}

void LinearBackwardOp::gemm(const Gemm& g, const void* a, const void* b, void* c, float beta,
                            cudaStream_t stream) const {
  const float alpha = 1.0f;
  CNN_CHECK_CUBLAS(cublasLtMatmul(lt_, g.desc, &alpha, a, g.a, b, g.b, &beta, c, g.c, c, g.c,
                                  &g.algo, workspace_, g.workspace, stream));
}

bool LinearBackwardOp::choose(GpuContext& ctx, Gemm& g, const void* a, const void* b, void* c,
                              float beta, EngineMode mode, int top_k, const TuneScratch& scratch,
                              std::string* tag) {
  cublasLtMatmulPreference_t pref = nullptr;
  CNN_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  const size_t max_ws = matmul_ws_;
  const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws));
  if (set != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(pref);
  CNN_CHECK_CUBLAS(set);
  // A few more than top_k: an algorithm heuristics offer may still refuse to run (an epilogue
  // it does not implement for this shape); the first that runs is kept.
  const int wanted = std::max(mode == EngineMode::Autotune ? top_k : 1, 1) + 3;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(wanted));
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, g.desc, g.a, g.b, g.c, g.c, pref,
                                                           wanted, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) return false;
  CNN_CHECK_CUBLAS(st);
  const int timed_max = mode == EngineMode::Autotune ? std::max(top_k, 1) : 1;
  cudaEvent_t start, stop;
  CNN_CHECK_CUDA(cudaEventCreate(&start));
  CNN_CHECK_CUDA(cudaEventCreate(&stop));
  const float alpha = 1.0f;
  float best_ms = -1;
  int best = -1, timed = 0;
  for (int i = 0; i < found && timed < timed_max; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    std::vector<float> times;
    const int reps = mode == EngineMode::Autotune ? 7 : 1;
    for (int rep = 0; rep < reps; ++rep) {
      CNN_CHECK_CUDA(cudaEventRecord(start, ctx.stream));
      const cublasStatus_t s =
          cublasLtMatmul(lt_, g.desc, &alpha, a, g.a, b, g.b, &beta, c, g.c, c, g.c,
                         &results[i].algo, scratch.ptr, results[i].workspaceSize, ctx.stream);
      CNN_CHECK_CUDA(cudaEventRecord(stop, ctx.stream));
      CNN_CHECK_CUDA(cudaEventSynchronize(stop));
      if (s != CUBLAS_STATUS_SUCCESS) break;
      float ms = 0;
      CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (reps == 1 || rep >= 2) times.push_back(ms);  // autotune: two warm-ups
    }
    if (times.size() < size_t(reps == 1 ? 1 : 5)) continue;
    ++timed;
    std::sort(times.begin(), times.end());
    const float ms = times[times.size() / 2];
    if (best < 0 || ms < best_ms) best_ms = ms, best = i;
  }
  CNN_CHECK_CUDA(cudaEventDestroy(start));
  CNN_CHECK_CUDA(cudaEventDestroy(stop));
  if (best < 0) return false;
  g.algo = results[best].algo;
  g.workspace = results[best].workspaceSize;
  if (mode == EngineMode::Autotune) record_.tuned_us += best_ms * 1000.0;
  record_.candidates += found;
  *tag = algo_tag(g.algo);
  return true;
}

bool LinearBackwardOp::build_dw(GpuContext& ctx, bool bgrad, EngineMode mode, int top_k,
                                const TuneScratch& scratch, std::string* tag) {
  dw_.destroy();
  const DType t = storage_type(spec_.precision);
  const cudaDataType_t dt = cuda_data_type(t);
  const cublasComputeType_t compute =
      spec_.precision == Precision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const uint64_t in = spec_.in_features, out = spec_.out_features, n = spec_.batch;
  // Column-major: dW^T [in x out] = X^T [in x N] * (dY^T)^T, dY^T [out x N] being dy's buffer;
  // BGRADB sums op(B) = dY [N x out] over k = N into db [out].
  CNN_CHECK_CUBLAS(cublasLtMatmulDescCreate(&dw_.desc, compute, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_T;
  CNN_CHECK_CUBLAS(
      cublasLtMatmulDescSetAttribute(dw_.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CNN_CHECK_CUBLAS(
      cublasLtMatmulDescSetAttribute(dw_.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bgrad) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BGRADB;
    CNN_CHECK_CUBLAS(
        cublasLtMatmulDescSetAttribute(dw_.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const void* db = buf_.db;
    CNN_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(dw_.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &db, sizeof(db)));
    // The bias gradient takes D's type (fp32) by default: CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
    // is left unset.
  }
  CNN_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&dw_.a, dt, in, n, in));
  CNN_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&dw_.b, dt, out, n, out));
  CNN_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&dw_.c, CUDA_R_32F, in, out, in));
  return choose(ctx, dw_, buf_.x, buf_.dy, buf_.dw, 0.0f, mode, top_k, scratch, tag);
}

void LinearBackwardOp::prepare(GpuContext& ctx, EngineMode mode, int top_k,
                               const TuneScratch& scratch) {
  const auto t0 = std::chrono::steady_clock::now();
  lt_ = ctx.lt;
  record_.tuned_us = 0;
  record_.candidates = 0;
  const DType t = storage_type(spec_.precision);
  const cudaDataType_t dt = cuda_data_type(t);
  const cublasComputeType_t compute =
      spec_.precision == Precision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const uint64_t in = spec_.in_features, out = spec_.out_features, n = spec_.batch;
  // The bias reduction's scratch is kept free at the end of the scratch in case BGRADB fails.
  const size_t bias_bytes =
      buf_.db ? round_up(channel_reduce_scratch_bytes(int64_t(n), int(out))) : 0;
  if (scratch.bytes < bias_bytes)
    throw std::logic_error("linear backward: tuning scratch too small for " + spec_.name);
  matmul_ws_ = std::min(kMaxWorkspace, (scratch.bytes - bias_bytes) / 256 * 256);
  workspace_ = scratch.ptr;
  std::string tags;

  if (buf_.dx) {
    // Column-major: dX^T [in x N] = W^T [in x out] * dY^T [out x N]; w's buffer is W^T.
    dx_.destroy();
    CNN_CHECK_CUBLAS(cublasLtMatmulDescCreate(&dx_.desc, compute, CUDA_R_32F));
    const cublasOperation_t op = CUBLAS_OP_N;
    CNN_CHECK_CUBLAS(
        cublasLtMatmulDescSetAttribute(dx_.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof(op)));
    CNN_CHECK_CUBLAS(
        cublasLtMatmulDescSetAttribute(dx_.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op, sizeof(op)));
    CNN_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&dx_.a, dt, in, out, in));
    CNN_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&dx_.b, dt, out, n, out));
    CNN_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&dx_.c, dt, in, n, in));
    std::string tag;
    if (!choose(ctx, dx_, buf_.w, buf_.dy, buf_.dx, spec_.accumulate_dx ? 1.0f : 0.0f, mode, top_k,
                scratch, &tag))
      throw LibraryError("cuBLAS", CUBLAS_STATUS_NOT_SUPPORTED,
                         "no algorithm for dx of " + spec_.name, "cublasLtMatmulAlgoGetHeuristic",
                         __FILE__, __LINE__);
    tags = "dx " + tag;
  }

  std::string tag;
  bgrad_fused_ = buf_.db && build_dw(ctx, true, mode, top_k, scratch, &tag);
  if (!bgrad_fused_ && !build_dw(ctx, false, mode, top_k, scratch, &tag))
    throw LibraryError("cuBLAS", CUBLAS_STATUS_NOT_SUPPORTED,
                       "no algorithm for dw of " + spec_.name, "cublasLtMatmulAlgoGetHeuristic",
                       __FILE__, __LINE__);
  tags += std::string(tags.empty() ? "" : " | ") + "dw " + tag +
          (bgrad_fused_ ? "+bgradb" : (buf_.db ? " | db cnnbench kernel" : ""));
  matmul_ws_ = round_up(std::max(dx_.workspace, dw_.workspace));
  bias_scratch_ = buf_.db && !bgrad_fused_ ? bias_bytes : 0;
  record_.engine = tags;
  record_.fused = bgrad_fused_ || !buf_.db;
  record_.workspace_bytes = workspace_bytes();
  record_.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

size_t LinearBackwardOp::workspace_bytes() const {
  return matmul_ws_ + bias_scratch_;
}

void LinearBackwardOp::bind_workspace(void* workspace, size_t bytes) {
  if (bytes < workspace_bytes()) throw std::logic_error("linear backward: workspace too small");
  workspace_ = workspace;
}

void LinearBackwardOp::run(cudaStream_t stream) {
  if (!dw_.desc) throw std::logic_error("linear backward: run before prepare");
  if (buf_.dx) gemm(dx_, buf_.w, buf_.dy, buf_.dx, spec_.accumulate_dx ? 1.0f : 0.0f, stream);
  gemm(dw_, buf_.x, buf_.dy, buf_.dw, 0.0f, stream);
  if (buf_.db && !bgrad_fused_)
    launch_bias_backward(storage_type(spec_.precision), buf_.dy, 0, buf_.db, spec_.batch,
                         spec_.out_features, static_cast<char*>(workspace_) + matmul_ws_, stream);
}

}  // namespace cnnbench
