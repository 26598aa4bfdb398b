// The training step's cost model (networks/train_cost.h) on a hand-worked block: conv, BatchNorm
// with its ReLU fused, max pool, global pool, linear, in fp16 at batch 4.
#include <gtest/gtest.h>

#include <map>

#include "networks/graph.h"
#include "networks/registry.h"
#include "networks/train_cost.h"
#include "networks/train_plan.h"

using namespace cnnbench;

TEST(TrainCost, ABlockByHand) {
  Graph g("block");
  int x = g.input(8, 16, 16);
  x = g.conv(x, "conv", 32, 3, 1, 1);  // 16x16x32 out, 8 in, 3x3: 589,824 MACs an image
  x = g.batchnorm(x, "bn");
  x = g.relu(x);
  x = g.maxpool(x, 3, 2, 1);  // 8x8x32
  x = g.global_avgpool(x);
  x = g.linear(g.flatten(x), "fc", 10);
  g.set_output(x);
  const TrainPlan p = plan_training(g, true, true);
  const int N = 4, e = 2;
  const double act = double(N) * 16 * 16 * 32 * e;  // the conv's output, bytes
  const double img = double(N) * 16 * 16 * 8 * e;
  const double wconv = 32.0 * 8 * 3 * 3 * e;
  std::map<std::string, TrainOpCost> by;
  for (const TrainOp& op : p.ops) {
    const TrainOpCost c = train_op_cost(g, op, N, e);
    by[c.kind + " " + g.node(op.node).name] = c;
  }
  const TrainOpCost& f = by.at("fwd conv conv");
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * N * 16 * 16 * 32 * 8 * 9);
  EXPECT_DOUBLE_EQ(f.bytes, img + wconv + act);
  // The image needs no gradient: the conv's backward is its filter part only.
  EXPECT_EQ(by.count("bwd-data conv conv"), 0u);
  EXPECT_DOUBLE_EQ(by.at("bwd-filter conv conv").bytes, img + act + wconv);
  EXPECT_DOUBLE_EQ(by.at("bwd-filter conv conv").flops, f.flops);
  // BatchNorm with its ReLU: x twice and y once forward; backward dy and x twice, the mask
  // recomputed from x (no residual), dx once.
  EXPECT_DOUBLE_EQ(by.at("fwd batchnorm+relu bn").bytes, 3 * act);
  EXPECT_DOUBLE_EQ(by.at("bwd batchnorm+relu bn").bytes, 5 * act);
  EXPECT_DOUBLE_EQ(by.at("bwd batchnorm+relu bn").flops, 0);
  // Max pool backward: x, dy, dx.
  const double pooled = double(N) * 8 * 8 * 32 * e;
  EXPECT_DOUBLE_EQ(by.at("bwd maxpool ").bytes, act + pooled + act);
  EXPECT_DOUBLE_EQ(by.at("fwd linear fc").flops, 2.0 * N * 32 * 10);
  EXPECT_EQ(by.count("loss fc"), 1u);
}

// Over a whole network the model's FLOPs are the step's multiply-accumulates (training_macs)
// doubled, and its table sums its rows: ResNet-50 at batch 8.
TEST(TrainCost, ResNet50FlopsAreTheStepsMacs) {
  const Graph g = build_training_network("resnet50", 0, 1000);
  const TrainPlan p = plan_training(g, false, true);
  double flops = 0, bytes = 0;
  for (const TrainOp& op : p.ops) {
    const TrainOpCost c = train_op_cost(g, op, 8, 2);
    flops += c.flops, bytes += c.bytes;
    EXPECT_GE(c.bytes, 0) << c.kind;
  }
  EXPECT_DOUBLE_EQ(flops, 2.0 * 8 * double(training_macs(g, p).total()));
  double floor_us = 0;
  const std::string t = train_cost_table(g, p, 8, 2, 900, 4300, &floor_us);
  // The floor is at least the FLOPs at the compute ceiling and the bytes at the copy ceiling.
  EXPECT_GE(floor_us, flops / 900e12 * 1e6);
  EXPECT_GE(floor_us, bytes / 4300e9 * 1e6);
  EXPECT_LE(floor_us, (flops / 900e12 + bytes / 4300e9) * 1e6 * (1 + 1e-12));
  EXPECT_NE(t.find("bwd-data conv"), std::string::npos) << t;
}

// ReLU masks (TrainOp::relu_mask) in the model: each of ResNet-50's 16 block tails moves y / 16
// more forward (the bits written) and 2 y - 2 y / 16 less backward (the bits read twice instead
// of its output), y its output's bytes; nothing else changes.
TEST(TrainCost, ReluMasksTradeTheTailsOutputReadsForBits) {
  const Graph g = build_training_network("resnet50", 0, 1000);
  const TrainPlan p0 = plan_training(g, false, true), p = plan_training(g, false, true, true);
  ASSERT_EQ(p.ops.size(), p0.ops.size());
  const int N = 8, e = 2;
  int tails = 0;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const TrainOpCost c0 = train_op_cost(g, p0.ops[i], N, e), c = train_op_cost(g, p.ops[i], N, e);
    EXPECT_EQ(c.kind, c0.kind);
    EXPECT_DOUBLE_EQ(c.flops, c0.flops);
    if (!p.ops[i].relu_mask) {
      EXPECT_DOUBLE_EQ(c.bytes, c0.bytes) << c.kind;
      continue;
    }
    const double y = double(N) * double(g.node(p.ops[i].fused_act).out.numel()) * e;
    if (p.ops[i].pass == TrainPass::Forward) {
      ++tails;
      EXPECT_DOUBLE_EQ(c.bytes - c0.bytes, y / 16) << c.kind;
    } else {
      EXPECT_DOUBLE_EQ(c0.bytes - c.bytes, 2 * y - 2 * y / 16) << c.kind;
    }
  }
  EXPECT_EQ(tails, 16);
}
