// The work and memory traffic of each op of a training step (issue 9's training roofline): what
// this suite's kernels compute and move for the op, whole batch, so that the step's breakdown
// (cnnbench_train_step --breakdown) can put each op's measured time under the machine's ceilings
// (harness/breakdown.h). A model, not a measurement: bytes count each tensor a kernel reads or
// writes once per pass it makes over it; caches are ignored. Host-only, tested on a CPU.
#pragma once

#include <string>

#include "networks/graph.h"
#include "networks/train_plan.h"

namespace cnnbench {

struct TrainOpCost {
  double flops = 0;  // 2 x multiply-accumulates (convs and linears), whole batch
  double bytes = 0;  // read + written, whole batch
  std::string
      kind;  // the pass and op_kind_name: "fwd conv", "bwd-data conv", "bwd batchnorm+relu+add"
};

// `elem`: bytes of an activation (2 for fp16 and bf16, 4 for fp32 and tf32); parameters and their
// gradients count in the same type (the step keeps fp32 masters, touched by the optimizer only).
// Forward:
//   Conv, Linear: x, w and y once; flops 2 x MACs.
//   BatchNorm (with its fused activation and residual add): x twice (statistics, then apply), y
//     once, the residual once, and a ReLU mask's bits once (TrainOp::relu_mask: y / 16 bytes).
//   everything else (pooling, activations, adds, scale, concat, dropout): each input and the output
//     once (a dropout's byte mask too); Flatten nothing (a view).
// Backward (conv and linear in two parts, as the plan runs them):
//   data: dy, w and dx once (dx twice where it accumulates); filter: x, dy and dW once.
//   BatchNorm: dy and x twice each (sums, then apply), the saved activation twice where ReLU's
//     mask needs the residual (a mask without one is recomputed from x; with TrainOp::relu_mask
//     its bits are read twice instead), dx once, the residual's gradient once.
//   max pooling: x, dy and dx; average pooling: dy and dx; ReLU: dy, its saved y and dx; Add: dy
//     and each input's gradient; everything else: dy, each saved input and its gradient.
// Loss: the logits and their gradient.
TrainOpCost train_op_cost(const Graph& g, const TrainOp& op, int batch, int elem);

// The whole plan's model by kind, under ceilings of `tflops` and `gbps` (no GPU needed): per
// kind its op count, GFLOP, GB and the time at its roofline; then the step's floor (every op at
// its roofline) and the images a second that floor allows. `floor_us` receives the floor.
std::string train_cost_table(const Graph& g, const TrainPlan& p, int batch, int elem, double tflops,
                             double gbps, double* floor_us = nullptr);

}  // namespace cnnbench
