#include "networks/train_cost.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "harness/breakdown.h"

namespace cnnbench {

TrainOpCost train_op_cost(const Graph& g, const TrainOp& op, int batch, int elem) {
  const Node& n = g.node(op.node);
  const double e = elem, N = batch;
  auto size = [&](int id) { return N * double(g.node(id).out.numel()) * e; };  // bytes
  const double y = size(op.node);
  const double x = n.inputs.empty() ? 0.0 : size(n.inputs[0]);
  double w = 0;
  for (int p : n.params) w += double(g.params()[size_t(p)].numel()) * e;
  if (n.kind == OpKind::BatchNorm) w = 0;  // gamma and beta: per channel, negligible
  const double flops = 2.0 * N * double(g.node_macs(op.node));
  double inputs = 0;  // every input once (a squeeze-excitation's gate, a concat's branches)
  for (int in : n.inputs) inputs += size(in);
  TrainOpCost c;
  std::string kind = op_kind_name(n.kind);
  if (op.fused_act >= 0) kind += std::string("+") + op_kind_name(g.node(op.fused_act).kind);
  if (op.fused_add >= 0) kind += std::string("+") + op_kind_name(OpKind::Add);
  const bool residual = op.residual >= 0;
  const bool relu_mask_needs_y =
      op.fused_act >= 0 && g.node(op.fused_act).kind == OpKind::ReLU && residual && !op.relu_mask;
  const double mask =  // the ReLU's bits, as the memory plan sizes them
      op.relu_mask
          ? double(relu_mask_bytes(int64_t(batch) * g.node(op.fused_act).out.numel(), size_t(elem)))
          : 0.0;
  auto accumulates = [&]() {
    for (bool a : op.accumulate)
      if (a) return true;
    return false;
  };
  switch (op.pass) {
    case TrainPass::Loss:
      c.kind = "loss";
      c.bytes = 2 * size(op.node);
      return c;
    case TrainPass::Forward:
      c.kind = "fwd " + kind;
      switch (n.kind) {
        case OpKind::Conv:
        case OpKind::Linear:
          c.flops = flops, c.bytes = x + w + y;
          break;
        case OpKind::BatchNorm:
          c.bytes = 2 * x + y + (residual ? y : 0.0) + mask;
          break;
        case OpKind::Add:
          c.bytes = double(n.inputs.size()) * y + y;
          break;
        case OpKind::Dropout:
          c.bytes = x + y + y / e;
          break;
        case OpKind::Flatten:
          break;  // a view
        default:  // pooling, activations, scale, concat (copied in training), LRN...
          c.bytes = inputs + y;
          break;
      }
      return c;
    case TrainPass::Backward:
      break;
  }
  const double dx_extra = accumulates() ? x : 0.0;  // an accumulating dx is read first
  switch (n.kind) {
    case OpKind::Conv:
    case OpKind::Linear:
      if (op.part == BackwardPart::Filter) {
        c.kind = "bwd-filter " + kind;
        c.flops = flops, c.bytes = x + y + w;
      } else if (op.part == BackwardPart::Data) {
        c.kind = "bwd-data " + kind;
        c.flops = flops, c.bytes = y + w + x + dx_extra;
      } else {
        c.kind = "bwd " + kind;
        c.flops = 2 * flops, c.bytes = 2 * y + 2 * w + 2 * x + dx_extra;
      }
      return c;
    case OpKind::BatchNorm:
      c.kind = "bwd " + kind;
      c.bytes = 2 * y + 2 * x + (relu_mask_needs_y ? 2 * y : 0.0) + 2 * mask + x + dx_extra +
                (residual ? y : 0.0);
      return c;
    case OpKind::MaxPool:
      c.kind = "bwd " + kind;
      c.bytes = x + y + x + dx_extra;
      return c;
    case OpKind::AvgPool:
    case OpKind::GlobalAvgPool:
    case OpKind::Dropout:
      c.kind = "bwd " + kind;
      c.bytes = y + x + dx_extra + (n.kind == OpKind::Dropout ? y / e : 0.0);
      return c;
    case OpKind::ReLU:
      c.kind = "bwd " + kind;
      c.bytes = 2 * y + x + dx_extra;  // dy and the saved y (the mask), dx
      return c;
    case OpKind::Add:
      c.kind = "bwd " + kind;
      c.bytes = y + double(n.inputs.size()) * y;
      return c;
    case OpKind::Flatten:
      c.kind = "bwd " + kind;
      return c;
    default:  // dy, the saved inputs, and each input's gradient (SiLU, scale, concat, LRN...)
      c.kind = "bwd " + kind;
      c.bytes = y + 2 * inputs + dx_extra;
      return c;
  }
}

std::string train_cost_table(const Graph& g, const TrainPlan& p, int batch, int elem, double tflops,
                             double gbps, double* floor_us) {
  struct Row {
    std::string kind;
    int ops = 0;
    double flops = 0, bytes = 0, us = 0;
  };
  std::vector<Row> rows;
  double total_us = 0, total_flops = 0, total_bytes = 0;
  for (const TrainOp& op : p.ops) {
    const TrainOpCost c = train_op_cost(g, op, batch, elem);
    const double us = roofline_us({"", c.kind, "", 0, c.flops, c.bytes}, Ceilings{tflops, gbps});
    auto it =
        std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.kind == c.kind; });
    if (it == rows.end()) it = rows.insert(rows.end(), Row{c.kind});
    ++it->ops, it->flops += c.flops, it->bytes += c.bytes, it->us += us;
    total_us += us, total_flops += c.flops, total_bytes += c.bytes;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.us > b.us; });
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "%s, batch %d, %d-byte activations, at %.0f TFLOP/s and %.0f GB/s:\n",
                g.name().c_str(), batch, elem, tflops, gbps);
  out += line;
  std::snprintf(line, sizeof line, "  %-30s %5s %10s %9s %10s\n", "kind", "ops", "GFLOP", "GB",
                "floor us");
  out += line;
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "  %-30.30s %5d %10.1f %9.2f %10.1f\n", r.kind.c_str(), r.ops,
                  r.flops * 1e-9, r.bytes * 1e-9, r.us);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "  every op at its roofline: %.1f us a step, %.0f img/s (%.1f TFLOP, %.1f GB)\n",
                total_us, batch * 1e6 / total_us, total_flops * 1e-12, total_bytes * 1e-9);
  out += line;
  if (floor_us) *floor_us = total_us;
  return out;
}

}  // namespace cnnbench
