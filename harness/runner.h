// Running a compiled model: the whole forward captured once in a CUDA graph and replayed, or
// launched op by op (eager), timed with CUDA events around back-to-back forwards.
#pragma once

#include <cuda_runtime.h>

#include "harness/check.h"
#include "networks/compile.h"

namespace cnnbench {

// The graph replay did not reproduce the eager forward.
struct GraphMismatch : LibraryError {
  using LibraryError::LibraryError;
};

class Runner {
 public:
  Runner(Model& model, GpuContext& ctx);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  void capture();  // records one forward into a CUDA graph (once)
  bool captured() const { return exec_ != nullptr; }
  size_t graph_nodes() const { return graph_nodes_; }
  // Relative L2 distance between the first replay and the eager forward before capture.
  double graph_vs_eager() const { return graph_vs_eager_; }
  // The captured graph's edges, and how many programmatic ones were made full (all of them, or 0).
  EdgeCounts edges() const { return edges_; }
  size_t edges_made_full() const { return edges_made_full_; }
  std::string census() const;   // graph_census of the captured graph
  void launch(bool use_graph);  // enqueue one forward
  cudaStream_t stream() const { return ctx_.stream; }
  // --profile: exactly `count` forwards between cudaProfilerStart and cudaProfilerStop (for
  // `ncu --profile-from-start off`, `nsys --capture-range=cudaProfilerApi`), each in an NVTX
  // range "profile"; waits for them and returns how many ran.
  int profile(bool use_graph, int count);
  int64_t launches() const { return launches_; }  // forwards enqueued so far
  // Enqueues `count` forwards between two events and waits: their total device time in ms.
  double time_ms(bool use_graph, int count);
  void sync();

 private:
  Model& model_;
  GpuContext& ctx_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t graph_nodes_ = 0;
  double graph_vs_eager_ = 0;
  EdgeCounts edges_;
  size_t edges_made_full_ = 0;
  void instantiate();
  // The worst relative L2 of three replays, each on a dirty workspace, against `eager`.
  double replay_error(const std::vector<float>& eager);
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  int64_t launches_ = 0;
};

}  // namespace cnnbench
