// Which graph nodes run together as one op, and in which order: the fusion half of the compile
// step, host only so that it is tested without a GPU.
#pragma once

#include <vector>

#include "networks/graph.h"

namespace cnnbench {

// A conv absorbs the BatchNorm, residual add and ReLU that follow it (each the sole consumer of
// the node before); a linear, BatchNorm or add absorbs a following ReLU; pooling stands alone;
// Flatten is no op at all (an alias of its input).
struct OpGroup {
  OpKind kind = OpKind::Input;
  int head = -1;      // the conv / linear / pool / standalone node
  int bn = -1;        // the folded BatchNorm
  int residual = -1;  // the node added in the epilogue
  bool relu = false;
  int anchor = -1;      // the node whose value the group produces
  std::vector<int> in;  // nodes read
};

struct Schedule {
  std::vector<OpGroup> groups;
  std::vector<int> order;  // indices into groups, in execution order
};

// Groups are emitted where their anchor stands: every node a group reads is produced by a group
// emitted before it (a bottleneck's projection runs before the conv that adds it).
Schedule schedule_ops(const Graph& g);

}  // namespace cnnbench
