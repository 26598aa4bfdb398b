#include "harness/graph_edges.h"

#include <map>
#include <vector>

#include "harness/check.h"

namespace cnnbench {
namespace {

struct Edges {
  std::vector<cudaGraphNode_t> from, to;
  std::vector<cudaGraphEdgeData> data;
};

Edges edges_of(cudaGraph_t graph) {
  size_t n = 0;
  CNN_CHECK_CUDA(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n));
  Edges e;
  e.from.resize(n), e.to.resize(n), e.data.resize(n);
  if (n) CNN_CHECK_CUDA(cudaGraphGetEdges(graph, e.from.data(), e.to.data(), e.data.data(), &n));
  return e;
}

bool plain(const cudaGraphEdgeData& d) {
  return d.type == cudaGraphDependencyTypeDefault && d.from_port == 0 && d.to_port == 0;
}

}  // namespace

GraphEdges parse_graph_edges(const std::string& s) {
  if (s == "captured") return GraphEdges::Captured;
  if (s == "full") return GraphEdges::Full;
  throw UserError("--graph_edges takes captured or full, not '" + s + "'");
}

const char* graph_edges_name(GraphEdges e) {
  switch (e) {
    case GraphEdges::Captured:
      return "captured";
    case GraphEdges::Full:
      return "full";
  }
  return "?";
}

EdgeCounts count_edges(cudaGraph_t graph) {
  const Edges e = edges_of(graph);
  EdgeCounts c;
  c.total = e.from.size();
  for (const cudaGraphEdgeData& d : e.data) c.programmatic += !plain(d);
  return c;
}

std::string graph_census(cudaGraph_t graph) {
  size_t n = 0;
  CNN_CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) CNN_CHECK_CUDA(cudaGraphGetNodes(graph, nodes.data(), &n));
  std::map<std::string, size_t> types;
  size_t from_host = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    CNN_CHECK_CUDA(cudaGraphNodeGetType(node, &t));
    switch (t) {
      case cudaGraphNodeTypeKernel:
        ++types["kernel"];
        break;
      case cudaGraphNodeTypeMemset:
        ++types["memset"];
        break;
      case cudaGraphNodeTypeMemcpy: {
        ++types["memcpy"];
        cudaMemcpy3DParms m{};
        if (cudaGraphMemcpyNodeGetParams(node, &m) == cudaSuccess) {
          cudaPointerAttributes a{};
          const void* src = m.srcArray ? nullptr : m.srcPtr.ptr;
          if (src && cudaPointerGetAttributes(&a, src) == cudaSuccess &&
              a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
            ++from_host;
        }
        cudaGetLastError();
        break;
      }
      case cudaGraphNodeTypeHost:
        ++types["host"];
        break;
      case cudaGraphNodeTypeEventRecord:
      case cudaGraphNodeTypeWaitEvent:
        ++types["event"];
        break;
      case cudaGraphNodeTypeEmpty:
        ++types["empty"];
        break;
      default:
        ++types["other"];
    }
  }
  const Edges e = edges_of(graph);
  std::map<cudaGraphNode_t, int> in, out;
  for (size_t i = 0; i < e.from.size(); ++i) ++out[e.from[i]], ++in[e.to[i]];
  size_t joins = 0, forks = 0;
  for (const auto& kv : in) joins += kv.second > 1;
  for (const auto& kv : out) forks += kv.second > 1;
  std::string s;
  for (const auto& [name, count] : types) {
    s += (s.empty() ? "" : ", ") + std::to_string(count) + " " + name;
    if (name == "memcpy") s += " (" + std::to_string(from_host) + " from host memory)";
  }
  return s + "; " + std::to_string(joins) + " nodes wait on several, " + std::to_string(forks) +
         " feed several";
}

size_t make_edges_full(cudaGraph_t graph) {
  const Edges e = edges_of(graph);
  size_t replaced = 0;
  for (size_t i = 0; i < e.from.size(); ++i) {
    if (plain(e.data[i])) continue;
    CNN_CHECK_CUDA(cudaGraphRemoveDependencies(graph, &e.from[i], &e.to[i], &e.data[i], 1));
    cudaGraphEdgeData full{};
    CNN_CHECK_CUDA(cudaGraphAddDependencies(graph, &e.from[i], &e.to[i], &full, 1));
    ++replaced;
  }
  return replaced;
}

}  // namespace cnnbench
