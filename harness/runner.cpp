#include "harness/runner.h"

#include <cuda_profiler_api.h>

#include "harness/nvtx.h"

#include <algorithm>
#include <cmath>
#include <thread>

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

void Op::poison_output(cudaStream_t stream) const {
  if (!out_) return;
  if (out_pitch_)
    CNN_CHECK_CUDA(cudaMemset2DAsync(out_, out_pitch_, 0xFF, out_row_bytes_, out_rows_, stream));
  else
    CNN_CHECK_CUDA(cudaMemsetAsync(out_, 0xFF, out_bytes_, stream));
}

GpuContext::GpuContext() {
  // A blocking stream: were a library to put work on the legacy default stream, it would still
  // be ordered with ours, and a capture would fail loudly rather than miss it.
  CNN_CHECK_CUDA(cudaStreamCreate(&stream));
  CNN_CHECK_CUDNN(cudnnCreate(&cudnn));
  CNN_CHECK_CUDNN(cudnnSetStream(cudnn, stream));
  CNN_CHECK_CUBLAS(cublasLtCreate(&lt));
}

int nondeterministic_layers(const std::vector<LayerRecord>& layers) {
  int n = 0;
  for (const LayerRecord& r : layers) {
    // engine_notes: comma-separated note names (EngineInfo::notes).
    const std::string notes = "," + r.engine_notes + ",";
    n += notes.find(std::string(",") + kNondeterministic + ",") != std::string::npos;
  }
  return n;
}

int default_build_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(std::min(n, 16u));
}

GpuContext::~GpuContext() {
  plans.clear();
  prefetched.clear();
  for (cudnnHandle_t h : helper_cudnn) cudnnDestroy(h);
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

void Runner::instantiate() {
  if (exec_) cudaGraphExecDestroy(exec_), exec_ = nullptr;
  CNN_CHECK_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
  CNN_CHECK_CUDA(cudaGraphUpload(exec_, ctx_.stream));
}

double Runner::replay_error(const std::vector<float>& eager) {
  const Arena& arena = model_.arena();
  double worst = 0;
  for (int i = 0; i < 3; ++i) {
    if (arena.workspace())
      CNN_CHECK_CUDA(
          cudaMemsetAsync(arena.workspace(), 0x7F, arena.workspace_bytes(), ctx_.stream));
    CNN_CHECK_CUDA(cudaGraphLaunch(exec_, ctx_.stream));
    const double e = relative_l2(model_.output(), eager);
    if (std::isnan(e) || e > worst) worst = e;  // once NaN, it stays NaN
  }
  return worst;
}

void Runner::capture() {
  if (exec_) return;
  // One eager forward first: libraries that initialize lazily on first use do so outside the
  // capture, and its output is what the graph must reproduce.
  model_.forward(ctx_.stream);
  const std::vector<float> eager = model_.output();
  CNN_CHECK_CUDA(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
  try {
    model_.forward(ctx_.stream);
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(ctx_.stream, &broken);
    if (broken) cudaGraphDestroy(broken);
    cudaGetLastError();  // what ending a broken capture left: the error thrown is the one
    throw;
  }
  CNN_CHECK_CUDA(cudaStreamEndCapture(ctx_.stream, &graph_));
  CNN_CHECK_CUDA(cudaGraphGetNodes(graph_, nullptr, &graph_nodes_));
  edges_ = count_edges(graph_);
  if (ctx_.graph_edges == GraphEdges::Full) edges_made_full_ = make_edges_full(graph_);
  instantiate();
  // Replayed on a dirty workspace, the graph must give the eager output.
  graph_vs_eager_ = replay_error(eager);
  if (!(graph_vs_eager_ <= 1e-3)) {
    // Which side moved: a replay on an untouched workspace, and a second eager forward.
    CNN_CHECK_CUDA(cudaGraphLaunch(exec_, ctx_.stream));
    const double clean = relative_l2(model_.output(), eager);
    model_.forward(ctx_.stream);
    const double eager_again = relative_l2(model_.output(), eager);
    throw GraphMismatch("CUDA graph", 0,
                        "the graph replay differs from the eager forward (relative L2 " +
                            std::to_string(graph_vs_eager_) + " on a dirty workspace, " +
                            std::to_string(clean) + " on an untouched one; eager again " +
                            std::to_string(eager_again) + "; " +
                            std::to_string(edges_.programmatic) + " programmatic edges of " +
                            std::to_string(edges_.total) + ", " + std::to_string(edges_made_full_) +
                            " made full; nodes: " + graph_census(graph_) + ")",
                        "Runner::capture", __FILE__, __LINE__);
  }
}

std::string Runner::census() const {
  return graph_ ? graph_census(graph_) : "not captured";
}

void Runner::launch(bool use_graph) {
  ++launches_;
  if (use_graph) {
    if (!exec_) capture();
    CNN_CHECK_CUDA(cudaGraphLaunch(exec_, ctx_.stream));
  } else {
    model_.forward(ctx_.stream);
  }
}

int Runner::profile(bool use_graph, int count) {
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  CNN_CHECK_CUDA(cudaProfilerStart());
  int done = 0;
  for (; done < count; ++done) {
    nvtx_push("profile");
    launch(use_graph);
    nvtx_pop();
  }
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  CNN_CHECK_CUDA(cudaProfilerStop());
  return done;
}

double Runner::time_ms(bool use_graph, int count) {
  nvtx_push(use_graph ? "iteration (graph replays)" : "iteration (eager)");
  CNN_CHECK_CUDA(cudaEventRecord(start_, ctx_.stream));
  for (int i = 0; i < count; ++i) launch(use_graph);
  CNN_CHECK_CUDA(cudaEventRecord(stop_, ctx_.stream));
  CNN_CHECK_CUDA(cudaEventSynchronize(stop_));
  nvtx_pop();
  float ms = 0;
  CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  return double(ms);
}

void Runner::sync() {
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
}

}  // namespace cnnbench
