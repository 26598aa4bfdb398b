#include "kernels/timing.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "harness/check.h"

namespace cnnbench {

void capture_graph(const std::function<void(cudaStream_t)>& enqueue, cudaStream_t stream,
                   cudaGraph_t* graph, cudaGraphExec_t* exec) {
  CNN_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue(stream);
  } catch (...) {
    cudaGraph_t dropped = nullptr;
    cudaStreamEndCapture(stream, &dropped);
    if (dropped) cudaGraphDestroy(dropped);
    cudaGetLastError();  // what ending a broken capture left: the error thrown is the one
    throw;
  }
  CNN_CHECK_CUDA(cudaStreamEndCapture(stream, graph));
  CNN_CHECK_CUDA(cudaGraphInstantiate(exec, *graph, 0));
}

std::string us_text(double us) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f us", us);
  return b;
}

double graph_us(const std::function<void(cudaStream_t)>& run, cudaStream_t stream, int runs) {
  constexpr int kReplays = 5;
  struct Owned {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Owned() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } o;
  CNN_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int r = 0; r < runs; ++r) run(stream);
  } catch (...) {
    cudaStreamEndCapture(stream, &o.graph);  // ends the capture; o frees what it left
    cudaGetLastError();
    throw;
  }
  CNN_CHECK_CUDA(cudaStreamEndCapture(stream, &o.graph));
  CNN_CHECK_CUDA(cudaGraphInstantiate(&o.exec, o.graph, 0));
  CNN_CHECK_CUDA(cudaEventCreate(&o.start));
  CNN_CHECK_CUDA(cudaEventCreate(&o.stop));
  CNN_CHECK_CUDA(cudaGraphLaunch(o.exec, stream));
  std::vector<float> ms(kReplays);
  for (float& m : ms) {
    CNN_CHECK_CUDA(cudaEventRecord(o.start, stream));
    CNN_CHECK_CUDA(cudaGraphLaunch(o.exec, stream));
    CNN_CHECK_CUDA(cudaEventRecord(o.stop, stream));
    CNN_CHECK_CUDA(cudaEventSynchronize(o.stop));
    CNN_CHECK_CUDA(cudaEventElapsedTime(&m, o.start, o.stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[kReplays / 2] * 1000.0 / runs;
}

}  // namespace cnnbench
