// The training step on the host (issue 4): the op list and what each backward op keeps, the
// gradients' accumulation, the memory plan and the training MACs, over the whole zoo.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <map>
#include <set>

#include "networks/registry.h"
#include "networks/resnet.h"
#include "networks/train_plan.h"
#include "networks/zoo.h"

using namespace cnnbench;

namespace {

// The backward ops of node `id`, by part.
std::map<BackwardPart, const TrainOp*> backward_of(const TrainPlan& p, int id) {
  std::map<BackwardPart, const TrainOp*> out;
  for (const TrainOp& op : p.ops)
    if (op.pass == TrainPass::Backward && op.node == id) out[op.part] = &op;
  return out;
}

std::vector<SavedRef> values(std::vector<int> ids) {
  std::vector<SavedRef> out;
  for (int v : ids) out.push_back({v, SavedKind::Value});
  return out;
}

std::vector<Graph> training_zoo() {
  std::vector<Graph> out;
  for (const NetworkInfo& info : network_registry())
    if (info.limits.trains) out.push_back(build_training_network(info.name));
  return out;
}

}  // namespace

TEST(TrainPlan, ResNet50OpsAndWhatEachBackwardKeeps) {
  const Graph g = resnet50();
  const TrainPlan p = plan_training(g);
  int non_alias = 0;
  for (const Node& n : g.nodes()) non_alias += n.kind != OpKind::Input && n.kind != OpKind::Flatten;
  EXPECT_EQ(p.forward_ops, non_alias);  // no folding: every conv, BN, ReLU, add, pool, the fc
  EXPECT_EQ(p.loss_ops, 1);
  ASSERT_EQ(p.heads, std::vector<int>{g.output()});
  EXPECT_EQ(p.head_weight[0], 1.0);
  // Passes in order; the backward runs in reverse node order.
  for (int i = 0; i < int(p.ops.size()); ++i) {
    const TrainPass want = i < p.forward_ops                ? TrainPass::Forward
                           : i < p.forward_ops + p.loss_ops ? TrainPass::Loss
                                                            : TrainPass::Backward;
    EXPECT_EQ(p.ops[i].pass, want) << i;
    if (i > p.forward_ops + p.loss_ops) EXPECT_LE(p.ops[i].node, p.ops[i - 1].node);
    if (i > 0 && i < p.forward_ops) EXPECT_GT(p.ops[i].node, p.ops[i - 1].node);
  }
  int convs = 0, data = 0;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.node(int(id));
    const int x = n.inputs.empty() ? -1 : p.source[n.inputs[0]];
    const auto b = backward_of(p, int(id));
    SCOPED_TRACE(n.name + " " + op_kind_name(n.kind));
    switch (n.kind) {
      case OpKind::Conv:
        ++convs;
        ASSERT_TRUE(b.count(BackwardPart::Filter));
        EXPECT_EQ(b.at(BackwardPart::Filter)->saved, values({x}));  // dW needs x
        EXPECT_TRUE(b.at(BackwardPart::Filter)->param_grads);
        EXPECT_TRUE(b.at(BackwardPart::Filter)->grad_writes.empty());
        if (x == g.input_id()) {
          EXPECT_EQ(b.count(BackwardPart::Data), 0u);  // the image needs no gradient
        } else {
          ++data;
          ASSERT_TRUE(b.count(BackwardPart::Data));
          EXPECT_TRUE(b.at(BackwardPart::Data)->saved.empty());  // dx needs only the weights
          EXPECT_EQ(b.at(BackwardPart::Data)->grad_writes, std::vector<int>{x});
        }
        break;
      case OpKind::BatchNorm:
        EXPECT_EQ(b.at(BackwardPart::Whole)->saved,
                  (std::vector<SavedRef>{{x, SavedKind::Value}, {int(id), SavedKind::BnStats}}));
        EXPECT_TRUE(b.at(BackwardPart::Whole)->param_grads);
        break;
      case OpKind::ReLU:
        EXPECT_EQ(b.at(BackwardPart::Whole)->saved, values({int(id)}));  // its output
        break;
      case OpKind::MaxPool:
        EXPECT_EQ(b.at(BackwardPart::Whole)->saved, values({x, int(id)}));
        break;
      case OpKind::Add:
        EXPECT_TRUE(b.at(BackwardPart::Whole)->saved.empty());
        EXPECT_EQ(b.at(BackwardPart::Whole)->grad_writes.size(), 2u);
        break;
      case OpKind::GlobalAvgPool:
        EXPECT_TRUE(b.at(BackwardPart::Whole)->saved.empty());
        break;
      case OpKind::Linear:
        // The fc reads the pooled value through the flatten.
        EXPECT_EQ(g.node(x).kind, OpKind::GlobalAvgPool);
        EXPECT_EQ(b.at(BackwardPart::Filter)->saved, values({x}));
        EXPECT_TRUE(b.at(BackwardPart::Data)->saved.empty());
        break;
      case OpKind::Flatten:
      case OpKind::Input:
        EXPECT_TRUE(b.empty());
        break;
      default:
        ADD_FAILURE() << "unexpected node";
    }
  }
  EXPECT_EQ(convs, 53);
  EXPECT_EQ(data, 52);
}

// Over the whole zoo: every gradient a backward op reads is complete (every op that writes it,
// or the concat gradient it is a slice of, ran before); a value read by k ops that propagate a
// gradient to it gets k writes, the first a write and the rest accumulations; every saved value
// was written by the forward; every parameter gets its gradient from exactly one op.
TEST(TrainPlan, GradientsAccumulateAndAreCompleteBeforeTheyAreRead) {
  for (const Graph& g : training_zoo()) {
    SCOPED_TRACE(g.name());
    const TrainPlan p = plan_training(g);
    const int count = int(g.nodes().size());
    std::vector<std::vector<int>> write_steps(count);
    std::vector<int> produced(count, -1);
    produced[g.input_id()] = 0;
    for (int s = 0; s < int(p.ops.size()); ++s) {
      const TrainOp& op = p.ops[s];
      if (op.pass == TrainPass::Forward) produced[op.node] = s;
      ASSERT_EQ(op.grad_writes.size(), op.accumulate.size());
      for (size_t k = 0; k < op.grad_writes.size(); ++k) {
        const int v = op.grad_writes[k];
        EXPECT_EQ(op.accumulate[k], !write_steps[v].empty()) << op.label(g);
        write_steps[v].push_back(s);
      }
    }
    // Concat members: their value and gradient sit in the concat's, which is written in place.
    auto members_produced = [&](int v) {
      std::vector<int> steps{produced[v]};
      for (int m = 0; m < count; ++m)
        if (p.slice_of[m] == v) steps.push_back(produced[m]);
      return steps;
    };
    std::vector<int> grad_readers(count, 0);
    for (int s = 0; s < int(p.ops.size()); ++s) {
      const TrainOp& op = p.ops[s];
      for (int v : op.grad_reads) {
        ++grad_readers[v];
        for (int a = v; a >= 0; a = p.slice_of[a]) {
          EXPECT_FALSE(write_steps[a].empty() && p.slice_of[a] < 0) << g.node(a).name;
          for (int w : write_steps[a]) EXPECT_LT(w, s) << op.label(g);
        }
      }
      for (const SavedRef& r : op.saved) {
        if (r.kind != SavedKind::Value) continue;
        bool written = produced[r.node] >= 0 && produced[r.node] < p.forward_ops;
        if (g.node(r.node).kind == OpKind::Concat && produced[r.node] < 0)
          for (int m : members_produced(r.node)) written = written || m >= 0;
        EXPECT_TRUE(written) << op.label(g) << " saves " << g.node(r.node).name;
      }
    }
    // Expected writes: one per reader of the value that propagates a gradient to it.
    std::vector<int> want(count, 0);
    for (int id = 0; id < count; ++id) {
      const Node& n = g.node(id);
      if (!p.active[id] || p.source[id] != id || n.kind == OpKind::Input) continue;
      for (int in : n.inputs) {
        const int v = p.source[in];
        if (p.needs_grad[v] && p.slice_of[v] != id) ++want[v];
      }
    }
    for (int h : p.heads) ++want[p.source[h]];  // the loss writes dlogits
    int accumulations = 0;
    for (int v = 0; v < count; ++v) {
      if (p.source[v] != v) continue;
      EXPECT_EQ(int(write_steps[v].size()), want[v]) << g.node(v).name;
      accumulations += std::max(0, want[v] - 1);
      // Every value with a gradient has its own backward (which reads it) but the concats
      // written in place, whose members read their slices.
      if (p.needs_grad[v] && g.node(v).kind != OpKind::Concat)
        EXPECT_GE(grad_readers[v], 1) << g.node(v).name;
    }
    // ResNet: every block's input feeds its conv1 and its shortcut (the add, or the projection).
    if (g.name().rfind("resnet", 0) == 0)
      EXPECT_EQ(accumulations, g.name() == "resnet50" ? 16 : 50);
    // Parameters: exactly one op writes each node's gradients, and they add up to the graph's.
    std::map<int, int> writers;
    for (const TrainOp& op : p.ops)
      if (op.param_grads) ++writers[op.node];
    for (const auto& kv : writers) EXPECT_EQ(kv.second, 1) << g.node(kv.first).name;
    EXPECT_EQ(p.trainable_params, g.num_parameters());
  }
}

TEST(TrainPlan, InceptionV3TrainsItsAuxLogits) {
  const Graph g = build_training_network("inception_v3");
  EXPECT_EQ(g.name(), "inception_v3_aux");
  const TrainPlan p = plan_training(g);
  ASSERT_EQ(p.heads.size(), 2u);
  EXPECT_EQ(g.node(p.heads[1]).name, "AuxLogits.fc");
  EXPECT_DOUBLE_EQ(p.head_weight[1], kAuxLossWeight);
  EXPECT_DOUBLE_EQ(p.head_weight[1], 0.4);
  EXPECT_EQ(p.loss_ops, 2);
  EXPECT_EQ(p.ops[p.forward_ops + 1].loss_weight, 0.4);
  int aux_convs = 0;
  for (int i = 0; i < p.forward_ops; ++i)
    aux_convs += g.node(p.ops[i].node).name.rfind("AuxLogits.conv", 0) == 0 &&
                 g.node(p.ops[i].node).kind == OpKind::Conv;
  EXPECT_EQ(aux_convs, 2);
  for (bool a : p.active) EXPECT_TRUE(a);
  // With its aux head, torchvision's num_params; training MACs count the head's forward too.
  EXPECT_EQ(p.trainable_params, 27161264);
  EXPECT_GT(training_macs(g, p).forward, inception_v3().macs());
  // The concats are written in place: no op copies a value or a gradient.
  for (const TrainOp& op : p.ops) EXPECT_NE(g.node(op.node).kind, OpKind::Concat) << op.label(g);
  // The inference graph has one head.
  EXPECT_EQ(plan_training(inception_v3()).heads.size(), 1u);
}

TEST(TrainPlan, DropoutLrnAndSqueezeExcitationKeepWhatTheirBackwardNeeds) {
  {
    const Graph g = alexnet();
    const TrainPlan p = plan_training(g);
    int dropouts = 0;
    for (size_t id = 0; id < g.nodes().size(); ++id) {
      if (g.node(int(id)).kind != OpKind::Dropout) continue;
      ++dropouts;
      const auto b = backward_of(p, int(id));
      EXPECT_EQ(b.at(BackwardPart::Whole)->saved,
                (std::vector<SavedRef>{{int(id), SavedKind::DropoutMask}}));
    }
    EXPECT_EQ(dropouts, 2);
    // The identity adaptive pool (6x6 at 224) and the flatten are views: no op.
    for (const TrainOp& op : p.ops) {
      EXPECT_NE(g.node(op.node).kind, OpKind::AdaptiveAvgPool);
      EXPECT_NE(g.node(op.node).kind, OpKind::Flatten);
    }
    // Its masks, one byte per element, live from the dropout's forward to its backward.
    const TrainMemory m = plan_training_memory(g, p, {8, Precision::FP16, Optimizer::SGD, true});
    int masks = 0;
    for (const TrainBuffer& b : m.buffers)
      if (b.kind == TrainBufferKind::DropoutMask) {
        ++masks;
        EXPECT_EQ(b.bytes, size_t(g.node(b.node).out.numel()) * 8);
        EXPECT_LT(b.first, p.forward_ops);
        EXPECT_GT(b.last, p.forward_ops);
        EXPECT_TRUE(b.saved);
      }
    EXPECT_EQ(masks, 2);
  }
  {
    const Graph g = alexnet_lrn();
    const TrainPlan p = plan_training(g);
    for (size_t id = 0; id < g.nodes().size(); ++id)
      if (g.node(int(id)).kind == OpKind::LRN)
        EXPECT_EQ(backward_of(p, int(id)).at(BackwardPart::Whole)->saved,
                  values({p.source[g.node(int(id)).inputs[0]], int(id)}));
  }
  {
    const Graph g = efficientnet(0);
    const TrainPlan p = plan_training(g);
    int scales = 0, depthwise = 0;
    for (size_t id = 0; id < g.nodes().size(); ++id) {
      const Node& n = g.node(int(id));
      const auto b = backward_of(p, int(id));
      if (n.kind == OpKind::Scale) {
        ++scales;
        EXPECT_EQ(b.at(BackwardPart::Whole)->saved, values({n.inputs[0], n.inputs[1]}));
        EXPECT_EQ(b.at(BackwardPart::Whole)->grad_writes,
                  (std::vector<int>{n.inputs[0], n.inputs[1]}));
      } else if (n.kind == OpKind::SiLU) {
        EXPECT_EQ(b.at(BackwardPart::Whole)->saved, values({n.inputs[0]}));
      } else if (n.kind == OpKind::Sigmoid) {
        EXPECT_EQ(b.at(BackwardPart::Whole)->saved, values({int(id)}));
      } else if (n.kind == OpKind::Conv && n.groups > 1) {
        ++depthwise;
        EXPECT_TRUE(b.count(BackwardPart::Data) && b.count(BackwardPart::Filter));
      }
    }
    EXPECT_EQ(scales, 16);  // one squeeze-excitation per MBConv block
    EXPECT_EQ(depthwise, 16);
  }
}

namespace {

// The buffer each op touches must be live at that op, and two buffers live at the same step
// never share a byte.
void expect_sound(const Graph& g, const TrainPlan& p, const TrainMemory& m) {
  std::map<std::pair<int, int>, const TrainBuffer*> by;  // (kind, node)
  for (const TrainBuffer& b : m.buffers) by[{int(b.kind), b.node}] = &b;
  auto live_at = [&](TrainBufferKind k, int node, int step, const std::string& what) {
    const int root = k == TrainBufferKind::Value || k == TrainBufferKind::Gradient
                         ? p.view[p.source[node]].root
                         : node;
    auto it = by.find({int(k), root});
    ASSERT_NE(it, by.end()) << what << ": no buffer for " << g.node(node).name;
    EXPECT_LE(it->second->first, step) << what;
    EXPECT_GE(it->second->last, step) << what;
  };
  for (int s = 0; s < m.steps; ++s) {
    const TrainOp& op = p.ops[s];
    const std::string what = op.label(g);
    if (op.pass == TrainPass::Forward) live_at(TrainBufferKind::Value, op.value_written(), s, what);
    if (op.pass == TrainPass::Forward && op.relu_mask)
      live_at(TrainBufferKind::ReluMask, op.fused_act, s, what);
    for (int v : op.reads) live_at(TrainBufferKind::Value, v, s, what);
    for (const SavedRef& r : op.saved)
      live_at(r.kind == SavedKind::Value         ? TrainBufferKind::Value
              : r.kind == SavedKind::BnStats     ? TrainBufferKind::BnStats
              : r.kind == SavedKind::DropoutMask ? TrainBufferKind::DropoutMask
                                                 : TrainBufferKind::ReluMask,
              r.node, s, what);
    for (int v : op.grad_reads) live_at(TrainBufferKind::Gradient, v, s, what);
    for (int v : op.grad_writes) live_at(TrainBufferKind::Gradient, v, s, what);
  }
  const auto& bs = m.buffers;
  for (size_t i = 0; i < bs.size(); ++i) {
    EXPECT_LE(bs[i].offset + bs[i].bytes, m.arena_bytes);
    for (size_t j = i + 1; j < bs.size(); ++j) {
      if (bs[i].last < bs[j].first || bs[j].last < bs[i].first) continue;
      EXPECT_TRUE(bs[i].offset + bs[i].bytes <= bs[j].offset ||
                  bs[j].offset + bs[j].bytes <= bs[i].offset)
          << g.node(bs[i].node).name << " / " << g.node(bs[j].node).name;
    }
  }
}

}  // namespace

TEST(TrainMemory, ResNet50Batch32Fp16) {
  const Graph g = resnet50();
  const TrainPlan p = plan_training(g);
  const TrainMemory m = plan_training_memory(g, p, {32, Precision::FP16, Optimizer::SGD, true});
  expect_sound(g, p, m);
  // Reuse pays, but never below what must be live at once: what the backward needs, held when
  // the loss runs, and the most bytes live at any one step.
  EXPECT_LT(m.arena_bytes, m.unplanned_bytes);
  EXPECT_GT(m.arena_bytes, m.saved_at_backward_bytes);
  EXPECT_GE(m.arena_bytes, m.live_peak_bytes);
  EXPECT_GE(m.live_peak_bytes, m.saved_at_backward_bytes);
  EXPECT_GE(m.saved_peak_bytes, m.saved_at_backward_bytes);
  // The saved activations at the loss: every conv's input and every ReLU's output (one tensor
  // where both are the same value), every BatchNorm's input and statistics, the max pool's input
  // and output. At least each conv's and each BN's input, 32 images, fp16.
  size_t conv_inputs = 0;
  std::set<int> seen;
  for (const Node& n : g.nodes())
    if ((n.kind == OpKind::Conv || n.kind == OpKind::BatchNorm) && seen.insert(n.inputs[0]).second)
      conv_inputs += size_t(g.node(n.inputs[0]).out.numel()) * 32 * 2;
  EXPECT_GE(m.saved_at_backward_bytes, conv_inputs);
  // Persistent: fp16 working weights and gradients, fp32 master weights, SGD momentum.
  const size_t P = size_t(g.num_parameters());
  EXPECT_EQ(m.trainable_params, g.num_parameters());
  EXPECT_EQ(m.weights_bytes, 2 * P);
  EXPECT_EQ(m.param_grad_bytes, 2 * P);
  EXPECT_EQ(m.master_weights_bytes, 4 * P);
  EXPECT_EQ(m.optimizer_state_bytes, 4 * P);
  // Running mean and var (fp32) of 53 BatchNorms and their int64 counters.
  size_t bn_channels = 0;
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::BatchNorm) bn_channels += size_t(n.out.c);
  EXPECT_EQ(m.running_stats_bytes, bn_channels * 8 + 53 * 8);
  // Twice the batch, about twice the arena (alignment and the per-channel statistics aside).
  const TrainMemory m64 = plan_training_memory(g, p, {64, Precision::FP16, Optimizer::SGD, true});
  EXPECT_NEAR(double(m64.arena_bytes) / m.arena_bytes, 2.0, 0.02);
}

TEST(TrainMemory, OptimizerAndPrecisionChangeOnlyTheirOwnBytes) {
  for (const Graph& g : {resnet50(), efficientnet(0), build_training_network("inception_v3")}) {
    SCOPED_TRACE(g.name());
    const TrainPlan p = plan_training(g);
    const int64_t P = g.num_parameters();
    const TrainMemory sgd = plan_training_memory(g, p, {32, Precision::FP16, Optimizer::SGD, true});
    const TrainMemory adam =
        plan_training_memory(g, p, {32, Precision::FP16, Optimizer::Adam, true});
    const TrainMemory plain =
        plan_training_memory(g, p, {32, Precision::FP16, Optimizer::SGD, false});
    EXPECT_EQ(int64_t(adam.total_bytes() - sgd.total_bytes()), 4 * P);
    EXPECT_EQ(int64_t(adam.optimizer_state_bytes), 8 * P);
    EXPECT_EQ(plain.optimizer_state_bytes, 0u);
    EXPECT_EQ(adam.arena_bytes, sgd.arena_bytes);
    // fp32 and tf32 train in place; bf16 keeps fp32 masters like fp16.
    for (Precision pr : {Precision::FP32, Precision::TF32}) {
      const TrainMemory f = plan_training_memory(g, p, {32, pr, Optimizer::SGD, true});
      EXPECT_EQ(int64_t(f.weights_bytes), 4 * P);
      EXPECT_EQ(f.master_weights_bytes, 0u);
      EXPECT_GT(f.arena_bytes, sgd.arena_bytes);
    }
    const TrainMemory b = plan_training_memory(g, p, {32, Precision::BF16, Optimizer::SGD, true});
    EXPECT_EQ(b.master_weights_bytes, sgd.master_weights_bytes);
    EXPECT_EQ(b.arena_bytes, sgd.arena_bytes);
  }
}

TEST(TrainMemory, EveryNetworkIsSoundAndReuses) {
  for (const Graph& g : training_zoo()) {
    SCOPED_TRACE(g.name());
    const TrainPlan p = plan_training(g);
    const TrainMemory m = plan_training_memory(g, p, {2, Precision::FP16, Optimizer::Adam, true});
    expect_sound(g, p, m);
    EXPECT_LT(m.arena_bytes, m.unplanned_bytes);
    EXPECT_GT(m.arena_bytes, m.saved_at_backward_bytes);
    EXPECT_GE(m.arena_bytes, m.live_peak_bytes);
  }
}

// BatchNorm fused with what alone reads it (TrainModel's plan): ResNet-50's 33 conv-BN-ReLU pairs
// (the stem, each bottleneck's first two) lose their ReLU ops both ways, and its 16 block tails
// (BN -> add -> ReLU) their add and ReLU ops; EfficientNet's conv-BN-SiLU pairs lose their SiLU
// ops. A fused forward writes the activation's value and reads the residual, its backward reads
// the activation's gradient, keeps ReLU's value for the mask (not SiLU's: it recomputes from x)
// and writes the residual's gradient with the add's accumulate flag; nothing reads or writes a
// fused BatchNorm's or add's own value or gradient; every gradient read is written before it,
// every saved value by the forward; the memory plan stays sound and gets smaller.
TEST(TrainPlan, FusedBatchNormWritesTheActivationAndReadsItsGradient) {
  for (const Graph& g : training_zoo()) {
    SCOPED_TRACE(g.name());
    const TrainPlan p0 = plan_training(g, false, false), p = plan_training(g, false, true);
    int fwd = 0, bwd = 0, tails = 0, silu = 0;
    std::vector<bool> fused_away(g.nodes().size(), false);  // the fused BN's, add's, act's nodes
    for (const TrainOp& op : p.ops) {
      if (op.fused_act < 0) continue;
      const Node& a = g.node(op.fused_act);
      EXPECT_EQ(g.node(op.node).kind, OpKind::BatchNorm);
      EXPECT_TRUE(a.kind == OpKind::ReLU || a.kind == OpKind::SiLU);
      if (op.fused_add >= 0) {
        const Node& add = g.node(op.fused_add);
        EXPECT_EQ(a.kind, OpKind::ReLU);
        EXPECT_EQ(add.kind, OpKind::Add);
        EXPECT_EQ(a.inputs.at(0), op.fused_add);
        EXPECT_TRUE(add.inputs.at(0) == op.node || add.inputs.at(1) == op.node);
        const int other = add.inputs.at(0) == op.node ? add.inputs.at(1) : add.inputs.at(0);
        EXPECT_EQ(op.residual, p.source[other]);
        fused_away[op.fused_add] = true;
      } else {
        EXPECT_EQ(a.inputs.at(0), op.node);
        EXPECT_EQ(op.residual, -1);
      }
      fused_away[op.node] = true;
      if (op.pass == TrainPass::Forward) {
        ++fwd;
        tails += op.fused_add >= 0;
        silu += a.kind == OpKind::SiLU;
        EXPECT_EQ(op.value_written(), op.fused_act);
        if (op.residual >= 0)
          EXPECT_NE(std::find(op.reads.begin(), op.reads.end(), op.residual), op.reads.end());
      } else {
        ++bwd;
        EXPECT_EQ(op.grad_reads, std::vector<int>{op.fused_act});
        const bool keeps = std::find(op.saved.begin(), op.saved.end(),
                                     SavedRef{op.fused_act, SavedKind::Value}) != op.saved.end();
        EXPECT_EQ(keeps, a.kind == OpKind::ReLU);
        if (op.residual >= 0 && p.needs_grad[op.residual]) {
          // The residual's gradient, with the flag the add's own op gave it.
          const auto at = std::find(op.grad_writes.begin(), op.grad_writes.end(), op.residual);
          ASSERT_NE(at, op.grad_writes.end());
          for (const TrainOp& o0 : p0.ops)
            if (o0.pass == TrainPass::Backward && o0.node == op.fused_add)
              for (size_t i = 0; i < o0.grad_writes.size(); ++i)
                if (o0.grad_writes[i] == op.residual)
                  EXPECT_EQ(op.accumulate[at - op.grad_writes.begin()], o0.accumulate[i]);
        }
      }
    }
    for (const TrainOp& op : p.ops)  // the ops of fused activations and adds are gone
      if (op.fused_act < 0 && op.node >= 0) {
        EXPECT_FALSE(fused_away[op.node] && g.node(op.node).kind != OpKind::BatchNorm)
            << op.label(g);
      }
    EXPECT_EQ(fwd, bwd);
    EXPECT_EQ(p.forward_ops, p0.forward_ops - fwd - tails);
    EXPECT_EQ(p.ops.size(), p0.ops.size() - 2 * fwd - 2 * tails);
    if (g.name() == "resnet50") {
      EXPECT_EQ(fwd, 33 + 16);
      EXPECT_EQ(tails, 16);
    }
    if (g.name() == "efficientnet_b0") EXPECT_EQ(silu, 33);  // stem, 15 expands, 16 dws, head
    const bool has_bn_relu = g.name().find("bn") != std::string::npos ||
                             g.name().rfind("resnet", 0) == 0 ||
                             g.name().rfind("inception", 0) == 0;
    if (has_bn_relu) EXPECT_GT(fwd, 0);
    // The values and gradients that exist nowhere: a fused BatchNorm's and add's.
    std::vector<bool> gone(g.nodes().size(), false);
    for (const TrainOp& op : p.ops)
      if (op.fused_act >= 0) {
        gone[op.node] = true;
        if (op.fused_add >= 0) gone[op.fused_add] = true;
      }
    std::vector<int> written(g.nodes().size(), -1), grad_written(g.nodes().size(), -1);
    written[g.input_id()] = 0;
    for (int s = 0; s < int(p.ops.size()); ++s) {
      const TrainOp& op = p.ops[s];
      for (int v : op.reads) EXPECT_FALSE(gone[v]) << op.label(g);
      for (int v : op.grad_reads) {
        EXPECT_FALSE(gone[v]) << op.label(g);
        if (p.slice_of[v] < 0) EXPECT_GE(grad_written[v], 0) << op.label(g);
      }
      for (const SavedRef& r : op.saved)
        if (r.kind == SavedKind::Value) {
          EXPECT_FALSE(gone[r.node]) << op.label(g);
          if (g.node(r.node).kind != OpKind::Concat) EXPECT_GE(written[r.node], 0) << op.label(g);
        }
      for (int v : op.grad_writes) {
        EXPECT_FALSE(gone[v]) << op.label(g);
        grad_written[v] = s;
      }
      if (op.pass == TrainPass::Forward) written[op.value_written()] = s;
    }
    const TrainMemoryOptions o{8, Precision::FP16, Optimizer::SGD, true};
    const TrainMemory m0 = plan_training_memory(g, p0, o), m = plan_training_memory(g, p, o);
    expect_sound(g, p, m);
    if (fwd > 0) {
      EXPECT_LT(m.unplanned_bytes, m0.unplanned_bytes);
      // The placement is greedy (largest first), not monotone: allow 1% either way.
      EXPECT_LE(double(m.arena_bytes), 1.01 * double(m0.arena_bytes));
    }
    if (g.name() == "resnet50" || g.name() == "efficientnet_b0")
      std::printf("  %s batch 8 fp16: arena %.1f MiB fused, %.1f MiB not\n", g.name().c_str(),
                  m.arena_bytes / 1048576.0, m0.arena_bytes / 1048576.0);
  }
}

// ReLU masks as bits (plan_training's relu_masks): ResNet-50's 16 block tails keep a bit per
// element of their output instead of the output itself for their backward, on both of the tail's
// ops and nowhere else; each mask is a buffer of 1/16 of the output's bytes (fp16: a byte per 8
// values), live from the tail's forward to its backward; every other op is the plan without masks;
// the memory plan stays sound and does not grow by more than the masks. A tail with channels no
// multiple of 8 keeps the value.
TEST(TrainPlan, ReluMasksReplaceTheTailsSavedOutput) {
  for (const Graph& g : training_zoo()) {
    SCOPED_TRACE(g.name());
    const TrainPlan p0 = plan_training(g, false, true), p = plan_training(g, false, true, true);
    ASSERT_EQ(p.ops.size(), p0.ops.size());
    int masked = 0;
    size_t mask_bytes = 0;
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const TrainOp &op = p.ops[i], &o0 = p0.ops[i];
      EXPECT_EQ(op.node, o0.node);
      EXPECT_EQ(op.reads, o0.reads);
      EXPECT_EQ(op.grad_writes, o0.grad_writes);
      const bool tail = op.fused_add >= 0;
      EXPECT_EQ(op.relu_mask, tail && g.node(op.fused_act).out.c % 8 == 0) << op.label(g);
      if (!op.relu_mask) {
        EXPECT_EQ(op.saved, o0.saved) << op.label(g);
        continue;
      }
      if (op.pass == TrainPass::Forward) {
        ++masked;
        mask_bytes += relu_mask_bytes(g.node(op.fused_act).out.numel() * 8, 2);
        continue;
      }
      // The backward: the saved output replaced by its mask, the rest as before.
      std::vector<SavedRef> want = o0.saved;
      for (SavedRef& r : want)
        if (r == SavedRef{op.fused_act, SavedKind::Value}) r.kind = SavedKind::ReluMask;
      EXPECT_EQ(op.saved, want) << op.label(g);
    }
    if (g.name() == "resnet50") EXPECT_EQ(masked, 16);
    const TrainMemoryOptions o{8, Precision::FP16, Optimizer::SGD, true};
    const TrainMemory m0 = plan_training_memory(g, p0, o), m = plan_training_memory(g, p, o);
    expect_sound(g, p, m);
    int buffers = 0;
    for (const TrainBuffer& b : m.buffers)
      if (b.kind == TrainBufferKind::ReluMask) {
        ++buffers;
        EXPECT_EQ(g.node(b.node).kind, OpKind::ReLU);
        EXPECT_EQ(b.bytes, (size_t(g.node(b.node).out.numel()) * 8 * 2 / 16 + 255) / 256 * 256);
        EXPECT_TRUE(b.saved);
      }
    EXPECT_EQ(buffers, masked);
    // The placement is greedy, not monotone: allow 1% beside the masks' own bytes.
    EXPECT_LE(double(m.arena_bytes), 1.01 * double(m0.arena_bytes) + double(mask_bytes));
    if (masked > 0)
      std::printf(
          "  %s batch 8 fp16: arena %.1f MiB with ReLU masks (%.1f MiB of them), %.1f "
          "MiB without\n",
          g.name().c_str(), m.arena_bytes / 1048576.0, mask_bytes / 1048576.0,
          m0.arena_bytes / 1048576.0);
  }
}

// ResNet-50 at 224, per image, from its layers (N x N output, C_in -> C_out, k x k):
//   conv1 7x7 3->64 at 112x112: 112*112*64*147                      = 118,013,952
//   layer1 (56x56): block 0: conv1 64->64 12,845,056; conv2 3x3 115,605,504; conv3 64->256
//     51,380,224; downsample 64->256 51,380,224 (231,211,008). Blocks 1-2: conv1 256->64
//     51,380,224 + conv2 115,605,504 + conv3 51,380,224 = 218,365,952 each
//                                               231,211,008 + 2 * 218,365,952 = 667,942,912
//   layer2: block 0: conv1 256->128 at 56x56 102,760,448; conv2 3x3/2 at 28x28 115,605,504;
//     conv3 51,380,224; downsample 256->512 /2 102,760,448 (372,506,624); blocks 1-3 218,365,952
//                                               372,506,624 + 3 * 218,365,952 = 1,027,604,480
//   layer3: block 0 372,506,624 (conv1 512->256 at 28x28, conv2 /2 at 14x14), blocks 1-5
//     218,365,952                               372,506,624 + 5 * 218,365,952 = 1,464,336,384
//   layer4: block 0 372,506,624, blocks 1-2      372,506,624 + 2 * 218,365,952 =   809,238,528
//   fc 2048 -> 1000                                                           =     2,048,000
//   forward                                                                   = 4,089,184,256
// Backward-filter repeats every layer's MACs; backward-data every layer's but conv1's (the
// image needs no gradient): training = 3 * 4,089,184,256 - 118,013,952 = 12,149,538,816.
TEST(TrainMacs, ResNet50ByHand) {
  const int64_t conv1 = 112LL * 112 * 64 * 3 * 7 * 7;
  const int64_t block = 3136LL * 64 * 256 + 3136LL * 64 * 576 + 3136LL * 256 * 64;  // layer1.1
  const int64_t first[4] = {3136LL * 64 * 64 + 3136LL * 64 * 576 + 2 * 3136LL * 256 * 64,
                            2 * 3136LL * 128 * 256 + 784LL * 128 * 1152 + 784LL * 512 * 128,
                            2 * 784LL * 256 * 512 + 196LL * 256 * 2304 + 196LL * 1024 * 256,
                            2 * 196LL * 512 * 1024 + 49LL * 512 * 4608 + 49LL * 2048 * 512};
  EXPECT_EQ(conv1, 118013952);
  EXPECT_EQ(block, 218365952);
  EXPECT_EQ(first[0], 231211008);
  for (int s = 1; s < 4; ++s) EXPECT_EQ(first[s], 372506624);
  const int64_t forward = conv1 + first[0] + 2 * block + first[1] + 3 * block + first[2] +
                          5 * block + first[3] + 2 * block + 2048LL * 1000;
  EXPECT_EQ(forward, 4089184256);
  const Graph g = resnet50();
  const TrainMacs t = training_macs(g, plan_training(g));
  EXPECT_EQ(t.forward, forward);
  EXPECT_EQ(t.forward, g.macs());
  EXPECT_EQ(t.backward_filter, forward);
  EXPECT_EQ(t.backward_data, forward - conv1);
  EXPECT_EQ(t.total(), 12149538816);
}

// Over the zoo: the forward is Graph::macs() (with Inception-v3's aux head, which only training
// runs), backward-filter the same, backward-data the same less the layers that read the image.
TEST(TrainMacs, EveryNetworkLeavesOutOnlyTheImageGradient) {
  for (const Graph& g : training_zoo()) {
    SCOPED_TRACE(g.name());
    const TrainMacs t = training_macs(g, plan_training(g));
    int64_t first = 0;
    for (size_t id = 0; id < g.nodes().size(); ++id)
      if (!g.node(int(id)).inputs.empty() && g.node(int(id)).inputs[0] == g.input_id())
        first += g.node_macs(int(id));
    EXPECT_GT(first, 0);
    EXPECT_EQ(t.forward, g.macs());
    EXPECT_EQ(t.backward_filter, g.macs());
    EXPECT_EQ(t.backward_data, g.macs() - first);
  }
}

// Without concat views (how TrainModel trains): no value is a slice of another, every concat has
// a forward op that reads all its inputs and a backward op that writes each input's gradient,
// and every gradient is written before it is read.
TEST(TrainPlan, ConcatsAsCopiesReadAndWriteEveryInput) {
  for (const char* net : {"inception_v3", "inception_bn"}) {
    const Graph g = build_training_network(net);
    SCOPED_TRACE(net);
    const TrainPlan p = plan_training(g, false);
    const auto& nodes = g.nodes();
    int concats = 0;
    for (size_t id = 0; id < nodes.size(); ++id) {
      EXPECT_EQ(p.slice_of[id], -1) << nodes[id].name;
      if (!p.active[id] || nodes[id].kind != OpKind::Concat) continue;
      ++concats;
      int forward = 0, backward = 0;
      for (const TrainOp& op : p.ops) {
        if (op.node != int(id)) continue;
        if (op.pass == TrainPass::Forward) {
          ++forward;
          EXPECT_EQ(op.reads.size(), nodes[id].inputs.size());
        } else if (op.pass == TrainPass::Backward) {
          ++backward;
          size_t need = 0;
          for (int in : nodes[id].inputs) need += p.needs_grad[p.source[in]];
          EXPECT_EQ(op.grad_writes.size(), need);
        }
      }
      EXPECT_EQ(forward, 1) << nodes[id].name;
      EXPECT_EQ(backward, 1) << nodes[id].name;
    }
    EXPECT_GT(concats, 5);
    std::vector<int> written(nodes.size(), -1);
    for (int s = 0; s < int(p.ops.size()); ++s) {
      const TrainOp& op = p.ops[s];
      for (int v : op.grad_reads) EXPECT_GE(written[v], 0) << op.label(g);
      for (int v : op.grad_writes)
        if (written[v] < 0) written[v] = s;
    }
  }
}
