// The dependency edges of a captured CUDA graph. A kernel launched with programmatic stream
// serialization (programmatic dependent launch) is captured behind a programmatic edge: it may
// start before its predecessor finishes and must itself wait before reading what that
// predecessor writes. Turning such edges into full ones makes every node wait for its
// predecessors to complete, at the price of the overlap.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace cnnbench {

enum class GraphEdges {
  Captured,  // as captured
  Full,      // every edge a full-completion dependency
};

GraphEdges parse_graph_edges(const std::string& s);  // throws UserError
const char* graph_edges_name(GraphEdges e);

struct EdgeCounts {
  size_t total = 0;
  size_t programmatic = 0;  // any edge that is not a plain full-completion dependency
};

EdgeCounts count_edges(cudaGraph_t graph);

// The graph's nodes by type ("58 kernel, 2 memset, 1 memcpy (1 from host memory)"), and how many
// nodes wait on more than one node or feed more than one: a stream-ordered capture is a chain,
// so any such node is a fork or a join that a library made on a stream of its own.
std::string graph_census(cudaGraph_t graph);

// Replaces every programmatic (or launch-completion) edge by a full-completion one; returns how
// many it replaced.
size_t make_edges_full(cudaGraph_t graph);

}  // namespace cnnbench
