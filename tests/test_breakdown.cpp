// The per-layer breakdown's arithmetic (harness/breakdown.h) on hand-worked layers.
#include <gtest/gtest.h>

#include "harness/breakdown.h"

using namespace cnnbench;

TEST(Breakdown, RooflineOfAComputeAndAMemoryBoundLayer) {
  const Ceilings k{800, 4000};  // TFLOP/s, GB/s: the ridge at 200 flop per byte
  // 8 GFLOP over 10 MB in 20 us: 400 TFLOP/s, intensity 800 (compute bound); the roofline's
  // 10 us is half the time taken.
  const LayerBound a = roofline({"conv", "conv+bias+relu", "eng1", 20, 8e9, 1e7}, k);
  EXPECT_DOUBLE_EQ(a.tflops, 400);
  EXPECT_DOUBLE_EQ(a.gbps, 500);
  EXPECT_DOUBLE_EQ(a.intensity, 800);
  EXPECT_DOUBLE_EQ(a.ridge, 200);
  EXPECT_EQ(a.bound, "compute");
  EXPECT_DOUBLE_EQ(a.of_roofline, 0.5);
  // 1 MFLOP over 4 MB in 2 us: 2,000 GB/s, memory bound; the roofline's 1 us is half of it.
  const LayerBound b = roofline({"pool", "maxpool", "ours", 2, 1e6, 4e6}, k);
  EXPECT_EQ(b.bound, "memory");
  EXPECT_DOUBLE_EQ(b.gbps, 2000);
  EXPECT_DOUBLE_EQ(b.of_roofline, 0.5);
  // No FLOPs at all (a copy): memory bound, whatever the ridge.
  EXPECT_EQ(roofline({"cat", "concat", "", 1, 0, 1e6}, k).bound, "memory");
  // Without ceilings nothing divides by zero.
  EXPECT_DOUBLE_EQ(roofline({"x", "y", "", 0, 1, 1}, Ceilings{}).of_roofline, 0);
}

TEST(Breakdown, SumTableAndJson) {
  Breakdown b;
  b.ceilings = {800, 4000};
  b.layers = {{"conv", "conv+bias+relu", "eng1", 20, 8e9, 1e7},
              {"pool", "maxpool", "", 2, 1e6, 4e6}};
  b.graph_us = 20;
  EXPECT_DOUBLE_EQ(b.layer_sum_us(), 22);
  const std::string t = breakdown_table(b);
  EXPECT_NE(t.find("sum of layers 22.0 us, whole graph 20.0 us (layers alone / graph: 1.10)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("compute"), std::string::npos);
  const nlohmann::json j = breakdown_json(b);
  EXPECT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][1]["bound"], "memory");
  EXPECT_DOUBLE_EQ(j["layer_sum_us"].get<double>(), 22);
}

// The training roofline's sum and its merge by op kind (cnnbench_train_step --breakdown).
TEST(Breakdown, FloorAndMergeByOp) {
  Breakdown b;
  b.ceilings = {800, 4000};
  b.layers = {{"layer1.0.conv1", "fwd Conv", "", 20, 8e9, 1e7},       // 10 us at the GEMM ceiling
              {"layer1.0.bn1", "fwd BatchNorm+ReLU", "", 9, 0, 2e7},  // 5 us at the copy ceiling
              {"layer1.0.conv2", "fwd Conv", "", 30, 8e9, 4e7},       // 10 us (compute)
              {"optimizer", "optimizer", "", 7, 0, 0}};               // no cost modelled
  EXPECT_DOUBLE_EQ(roofline_floor_us(b), 25);
  const Breakdown k = by_op(b);
  ASSERT_EQ(k.layers.size(), 3u);
  EXPECT_EQ(k.layers[0].name, "fwd Conv (2)");
  EXPECT_DOUBLE_EQ(k.layers[0].us, 50);
  EXPECT_DOUBLE_EQ(k.layers[0].flops, 16e9);
  EXPECT_DOUBLE_EQ(k.layers[0].bytes, 5e7);
  EXPECT_EQ(k.layers[2].name, "optimizer (1)");
  EXPECT_DOUBLE_EQ(k.layer_sum_us(), b.layer_sum_us());
  EXPECT_DOUBLE_EQ(roofline_floor_us(k), 25);  // both convs compute bound: merging keeps the floor
}
