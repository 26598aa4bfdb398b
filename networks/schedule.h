// Which graph nodes run together as one op, where each value lives, and in which order: the
// fusion half of the compile step, host only so that it is tested without a GPU.
#pragma once

#include <vector>

#include "networks/graph.h"

namespace cnnbench {

// A conv absorbs the BatchNorm, residual add and activation (ReLU, SiLU or sigmoid) that follow
// it (each the sole consumer of the node before), or an add after the activation (YOLOR's
// bottlenecks: x + act(conv(...)), where nothing activates the sum); a linear, BatchNorm or add
// absorbs a following activation; squeeze-excitation (global pool -> 1x1 conv -> SiLU -> 1x1 conv
// -> sigmoid -> scale of the pool's input) is one op; pooling and LRN stand alone. Flatten, Dropout
// (the identity at inference), an adaptive pool to the size it already has, and a concat all of
// whose inputs are written into its slices are no op at all.
struct OpGroup {
  OpKind kind = OpKind::Input;
  int head = -1;                    // the conv / linear / pool / standalone node
  int bn = -1;                      // the folded BatchNorm
  int residual = -1;                // the node added in the epilogue
  bool residual_after_act = false;  // added after the activation: y = act(conv) + residual
  OpKind act = OpKind::Input;       // ReLU, SiLU or Sigmoid; Input: none
  int se_fc1 = -1, se_fc2 = -1;     // squeeze-excitation's two 1x1 convs (kind Scale)
  int anchor = -1;                  // the node whose value the group produces
  std::vector<int> in;              // nodes read
  // Concat (kind Concat): the inputs that are copied into their slice, because their producer
  // cannot write there itself.
  std::vector<int> copies;
};

// Where a node's value lives: a channel slice [offset, offset + C) of the buffer that `root`
// owns, whose rows are `ld` channels wide. A value that owns its buffer has root == itself,
// offset 0 and ld == its C.
struct ValueView {
  int root = -1;
  int offset = 0;
  int ld = 0;
};

struct Schedule {
  std::vector<OpGroup> groups;
  std::vector<int> order;       // indices into groups, in execution order
  std::vector<ValueView> view;  // per node; root -1 for nodes that hold no value (pruned)
  std::vector<bool> live;       // nodes the output depends on
};

// Groups are emitted where their anchor stands: every node a group reads is produced by a group
// emitted before it. A residual's producer is never emitted right before the conv that adds it,
// but as early as its own inputs allow (a bottleneck's projection runs before the block's first
// conv). Nodes the output does not depend on (Inception-v3's AuxLogits at inference) are left out.
Schedule schedule_ops(const Graph& g);

// The value a node stands for once aliases are seen through (Flatten, Dropout, an identity
// adaptive pool).
int alias_source(const Graph& g, int id);

// When each buffer is live, in emission steps: a root's buffer from the first write of any value
// placed in it to the last read of any (the input from step 0 and the output to `steps`, as both
// persist across replays). -1 for nodes that own no buffer.
struct Lifetimes {
  std::vector<int> first, last;
  int steps = 0;
};
Lifetimes buffer_lifetimes(const Graph& g, const Schedule& s);

}  // namespace cnnbench
