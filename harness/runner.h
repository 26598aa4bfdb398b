// Running a compiled model: the whole forward captured once in a CUDA graph and replayed, or
// launched op by op (eager), timed with CUDA events around back-to-back forwards.
#pragma once

#include <cuda_runtime.h>

#include "networks/compile.h"

namespace cnnbench {

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
  void launch(bool use_graph);  // enqueue one forward
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
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace cnnbench
