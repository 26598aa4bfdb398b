// YOLO post-processing references (kernels/detect.h) on hand-made inputs: the decode's formulas at
// known logits, and non-maximum suppression's thresholds, class awareness, multi-label candidates,
// order and cap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/safetensors.h"
#include "interpreter.h"
#include "kernels/detect.h"
#include "networks/registry.h"

using namespace cnnbench;

namespace {

// One decoded row: x, y, w, h, objectness, then the class probabilities.
std::vector<float> row(float x, float y, float w, float h, float obj, std::vector<float> cls) {
  std::vector<float> r{x, y, w, h, obj};
  r.insert(r.end(), cls.begin(), cls.end());
  return r;
}

std::vector<float> rows(const std::vector<std::vector<float>>& rs) {
  std::vector<float> out;
  for (const auto& r : rs) out.insert(out.end(), r.begin(), r.end());
  return out;
}

}  // namespace

TEST(Detect, YolorHeadsAreTheCfgs) {
  const std::vector<YoloHead> h = yolor_heads();
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].stride, 8);
  EXPECT_EQ(h[2].stride, 32);
  EXPECT_EQ(h[1].anchors[2][1], 146);
  EXPECT_EQ(h[2].anchors[2][0], 459);
}

// Logit 0 is sigmoid 0.5: the centre is the cell's centre, (grid + 0.5) * stride, and the box is
// the anchor. Logit ln 3 is sigmoid 0.75: (2 * 0.75 - 0.5 + grid) * stride and (1.5)^2 * anchor.
TEST(Detect, DecodeFollowsYolorsFormulas) {
  const int ny = 2, nx = 3, classes = 2, no = 5 + classes;
  const YoloHead head = yolor_heads()[1];  // stride 16
  std::vector<float> raw(size_t(ny) * nx * 3 * no, 0.f);
  const float l3 = std::log(3.f);
  // Anchor 1 at (y 1, x 2): x and w at logit ln 3, a class at ln 3.
  float* p = &raw[(size_t(1) * nx + 2) * 3 * no + 1 * no];
  p[0] = l3, p[2] = l3, p[6] = l3;
  std::vector<float> out;
  yolo_decode_reference(raw.data(), ny, nx, head, classes, out);
  ASSERT_EQ(out.size(), size_t(3) * ny * nx * no);
  // Rows are (anchor, y, x): anchor 0, y 0, x 1 is row 1.
  EXPECT_FLOAT_EQ(out[1 * no + 0], (1 + 0.5f) * 16);
  EXPECT_FLOAT_EQ(out[1 * no + 1], 0.5f * 16);
  EXPECT_FLOAT_EQ(out[1 * no + 2], 36);  // anchor 0's width
  EXPECT_FLOAT_EQ(out[1 * no + 3], 75);
  EXPECT_FLOAT_EQ(out[1 * no + 4], 0.5f);
  const float* q = &out[(size_t(1) * ny * nx + 1 * nx + 2) * no];  // anchor 1, y 1, x 2
  EXPECT_NEAR(q[0], (2 * 0.75 - 0.5 + 2) * 16, 1e-4);
  EXPECT_NEAR(q[1], (0.5 + 1) * 16, 1e-4);
  EXPECT_NEAR(q[2], 1.5 * 1.5 * 76, 1e-3);
  EXPECT_NEAR(q[3], 55, 1e-4);
  EXPECT_NEAR(q[5], 0.5, 1e-6);
  EXPECT_NEAR(q[6], 0.75, 1e-6);
}

TEST(Detect, NmsKeepsTheBestOfOverlappingBoxesPerClass) {
  // Three boxes of class 0 around (100, 100), a fourth far away, one of class 1 on top of them.
  const std::vector<float> r = rows({
      row(100, 100, 50, 50, 0.9f, {0.9f, 0.0f}),   // score 0.81
      row(102, 101, 50, 50, 0.95f, {0.9f, 0.0f}),  // 0.855: the best of the cluster
      row(98, 99, 50, 50, 0.8f, {0.9f, 0.0f}),     // 0.72
      row(300, 300, 40, 40, 0.6f, {0.9f, 0.0f}),   // 0.54, alone
      row(101, 100, 50, 50, 0.9f, {0.0f, 0.8f}),   // class 1: 0.72, overlaps but another class
  });
  const std::vector<Detection> d = nms_reference(r, 2);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_FLOAT_EQ(d[0].score, 0.95f * 0.9f);
  EXPECT_FLOAT_EQ(d[0].x1, 102 - 25);
  EXPECT_EQ(d[0].cls, 0);
  EXPECT_EQ(d[1].cls, 1);  // 0.72, kept: NMS is per class
  EXPECT_FLOAT_EQ(d[2].score, 0.6f * 0.9f);
  EXPECT_FLOAT_EQ(d[2].x2, 320);
}

TEST(Detect, NmsThresholdsAndMultiLabel) {
  NmsOptions o;
  o.conf_thres = 0.25f;
  o.iou_thres = 0.5f;
  // Objectness at the threshold is out (strictly above is in); a box whose class score falls
  // below it is out; a box with two classes above it gives two detections.
  const std::vector<float> r = rows({
      row(10, 10, 4, 4, 0.25f, {1.0f, 0.0f}), row(50, 50, 4, 4, 0.9f, {0.2f, 0.0f}),  // 0.18
      row(90, 90, 4, 4, 0.8f, {0.5f, 0.6f}),  // 0.40 and 0.48
  });
  const std::vector<Detection> d = nms_reference(r, 2, o);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].cls, 1);
  EXPECT_EQ(d[1].cls, 0);
  EXPECT_FLOAT_EQ(d[0].x1, 88);

  // IoU exactly at the threshold is not suppressed: [0, 2] x [0, 1] and [1, 3] x [0, 1] overlap
  // by 1 of 3 (IoU 1/3); with iou_thres 1/3 both stay, with less the second goes.
  const std::vector<float> pair =
      rows({row(1, 0.5f, 2, 1, 0.9f, {0.9f}), row(2, 0.5f, 2, 1, 0.8f, {0.9f})});
  Detection a{0, 0, 2, 1, 1, 0}, b{1, 0, 3, 1, 1, 0};
  EXPECT_NEAR(box_iou(a, b), 1.0 / 3, 1e-6);
  o.iou_thres = box_iou(a, b);
  EXPECT_EQ(nms_reference(pair, 1, o).size(), 2u);
  o.iou_thres = 0.3f;
  EXPECT_EQ(nms_reference(pair, 1, o).size(), 1u);

  // The cap keeps the highest scores.
  std::vector<std::vector<float>> many;
  for (int i = 0; i < 10; ++i) many.push_back(row(20.f * i, 0, 4, 4, 0.5f + 0.04f * i, {1.0f}));
  o.max_det = 3;
  const std::vector<Detection> top = nms_reference(rows(many), 1, o);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_FLOAT_EQ(top[0].score, 0.5f + 0.04f * 9);
  EXPECT_FLOAT_EQ(top[2].score, 0.5f + 0.04f * 7);
}

// Against PyTorch: CNNBENCH_YOLOR_CASE=DIR names a case of `tools/yolor_reference.py write-case`
// (weights.safetensors as the reference names them, input.safetensors, reference.safetensors with
// the three heads as output0..2). The registered (folded) graph, on the folded file weights, run
// by the tests' interpreter in double, must give the heads within 1e-4 relative L2. Skipped
// without it (a case at 64 px takes the interpreter about a minute).
TEST(Detect, YolorInterpreterMatchesATorchCase) {
  const char* dir = std::getenv("CNNBENCH_YOLOR_CASE");
  if (!dir) GTEST_SKIP() << "CNNBENCH_YOLOR_CASE is not set";
  const SafetensorsFile in = SafetensorsFile::load(std::string(dir) + "/input.safetensors");
  const std::vector<int64_t> shape = in.info("input").shape;
  ASSERT_EQ(shape.size(), 4u);
  const int batch = int(shape[0]), size = int(shape[2]);
  const Graph g = build_network("yolor_csp_x", size);
  const HostWeights w =
      network_file_weights("yolor_csp_x", size, 0, std::string(dir) + "/weights.safetensors");
  const std::vector<std::vector<double>> values =
      test::interpret_values(g, w, in.to_float("input"), batch);
  const SafetensorsFile ref = SafetensorsFile::load(std::string(dir) + "/reference.safetensors");
  const std::vector<int> heads{g.output(), g.extra_outputs().at(0), g.extra_outputs().at(1)};
  for (size_t k = 0; k < heads.size(); ++k) {
    const std::vector<float> want = ref.to_float("output" + std::to_string(k));
    const std::vector<double>& got = values[heads[k]];
    ASSERT_EQ(got.size(), want.size()) << "head " << k;
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i)
      num += (got[i] - want[i]) * (got[i] - want[i]), den += double(want[i]) * want[i];
    const double err = std::sqrt(num / den);
    std::printf("  yolor_csp_x %d px, batch %d, head %zu: rel_l2 %.3e\n", size, batch, k, err);
    EXPECT_LT(err, 1e-4) << "head " << k;
  }
}
