// Device time of a piece of work as the benchmark would replay it: `runs` launches captured into
// one CUDA graph, the graph launched once to warm up and then five times, the median replay over
// `runs`, in microseconds. Shared by the choices made by timing (the SE variants, our depthwise
// kernel against cuDNN's) and the per-layer breakdown. Not callable while `stream` is being
// captured.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

namespace cnnbench {

double graph_us(const std::function<void(cudaStream_t)>& run, cudaStream_t stream, int runs = 20);

// "14.2 us": a time as the layer table's notes give it.
std::string us_text(double us);

// What `enqueue` puts on `stream`, captured into *graph and instantiated into *exec. Where enqueue
// throws, the capture is ended, what it left freed and CUDA's sticky capture error cleared, and
// the exception goes on (*graph and *exec stay null).
void capture_graph(const std::function<void(cudaStream_t)>& enqueue, cudaStream_t stream,
                   cudaGraph_t* graph, cudaGraphExec_t* exec);

}  // namespace cnnbench
