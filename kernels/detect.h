// YOLO detection's post-processing (issue 6), as YOLOR's PyTorch code does it at inference: the
// decode of each head (models.py YOLOLayer.forward) and confidence filtering with class-aware
// non-maximum suppression (utils/general.py non_max_suppression). These are the host references
// that the GPU kernels are to be checked against; they are plain C++ so CPU tests run them.
//
// A head's raw output is the last 1x1 conv's (implicits folded in), NHWC: [ny][nx][3 * (5 + nc)],
// channel a * (5 + nc) + k for anchor a and field k (x, y, w, h, objectness, classes).
#pragma once

#include <array>
#include <vector>

namespace cnnbench {

struct YoloHead {
  int stride = 8;
  std::array<std::array<float, 2>, 3> anchors{};  // (w, h) in pixels
};

// YOLOR-CSP-X's three heads, strides 8 / 16 / 32, the cfg's anchors.
std::vector<YoloHead> yolor_heads();

// Appends one row of 5 + nc per (anchor, y, x), in that order (PyTorch's view/permute), to `out`:
//   s = sigmoid(raw); x, y = (2 s - 0.5 + grid) * stride; w, h = (2 s)^2 * anchor; the rest s.
void yolo_decode_reference(const float* raw, int ny, int nx, const YoloHead& head, int classes,
                           std::vector<float>& out);

struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // pixels
  float score = 0;                       // objectness x class probability
  int cls = 0;
};

struct NmsOptions {
  float conf_thres = 0.25f;  // the article's
  float iou_thres = 0.5f;    // YOLOR detect.py's default
  int max_det = 300;
};

// non_max_suppression for one image, from decoded rows of 5 + nc (x, y, w, h, obj, classes):
// rows with obj > conf_thres; each class whose obj * p > conf_thres is a candidate (multi-label,
// as for nc > 1); candidates sorted by score, highest first (ties: the earlier row, then the lower
// class), each kept unless a kept one of its class overlaps it by IoU > iou_thres; at most
// max_det, by score.
std::vector<Detection> nms_reference(const std::vector<float>& rows, int classes,
                                     const NmsOptions& o = {});

// Intersection over union of two xyxy boxes (0 when both are empty).
float box_iou(const Detection& a, const Detection& b);

}  // namespace cnnbench
