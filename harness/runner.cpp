#include "harness/runner.h"

#include <nvtx3/nvToolsExt.h>

#include "harness/check.h"

namespace cnnbench {

EngineMode parse_engine_mode(const std::string& s) {
  if (s == "heuristic") return EngineMode::Heuristic;
  if (s == "autotune") return EngineMode::Autotune;
  throw UserError("unknown engine choice '" + s + "': valid choices are heuristic, autotune");
}

const char* engine_mode_name(EngineMode m) {
  return m == EngineMode::Autotune ? "autotune" : "heuristic";
}

GpuContext::GpuContext() {
  CNN_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CNN_CHECK_CUDNN(cudnnCreate(&cudnn));
  CNN_CHECK_CUDNN(cudnnSetStream(cudnn, stream));
  CNN_CHECK_CUBLAS(cublasLtCreate(&lt));
}

GpuContext::~GpuContext() {
  plans.clear();
  if (lt) cublasLtDestroy(lt);
  if (cudnn) cudnnDestroy(cudnn);
  if (stream) cudaStreamDestroy(stream);
}

Runner::Runner(Model& model, GpuContext& ctx) : model_(model), ctx_(ctx) {
  CNN_CHECK_CUDA(cudaEventCreate(&start_));
  CNN_CHECK_CUDA(cudaEventCreate(&stop_));
}

Runner::~Runner() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

void Runner::capture() {
  if (exec_) return;
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  CNN_CHECK_CUDA(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
  try {
    model_.forward(ctx_.stream);
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(ctx_.stream, &broken);
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  CNN_CHECK_CUDA(cudaStreamEndCapture(ctx_.stream, &graph_));
  CNN_CHECK_CUDA(cudaGraphGetNodes(graph_, nullptr, &graph_nodes_));
  CNN_CHECK_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
  CNN_CHECK_CUDA(cudaGraphUpload(exec_, ctx_.stream));
}

void Runner::launch(bool use_graph) {
  if (use_graph) {
    if (!exec_) capture();
    CNN_CHECK_CUDA(cudaGraphLaunch(exec_, ctx_.stream));
  } else {
    model_.forward(ctx_.stream);
  }
}

double Runner::time_ms(bool use_graph, int count) {
  nvtxRangePushA(use_graph ? "iteration (graph replays)" : "iteration (eager)");
  CNN_CHECK_CUDA(cudaEventRecord(start_, ctx_.stream));
  for (int i = 0; i < count; ++i) launch(use_graph);
  CNN_CHECK_CUDA(cudaEventRecord(stop_, ctx_.stream));
  CNN_CHECK_CUDA(cudaEventSynchronize(stop_));
  nvtxRangePop();
  float ms = 0;
  CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  return double(ms);
}

void Runner::sync() {
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
}

}  // namespace cnnbench
