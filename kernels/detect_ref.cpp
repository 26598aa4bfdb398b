#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/detect.h"

namespace cnnbench {

std::vector<YoloHead> yolor_heads() {
  // cfg/yolor_csp_x.cfg: anchors = 12,16, 19,36, 40,28, 36,75, 76,55, 72,146, 142,110, 192,243,
  // 459,401; masks 0,1,2 / 3,4,5 / 6,7,8 for strides 8 / 16 / 32.
  return {{8, {{{12, 16}, {19, 36}, {40, 28}}}},
          {16, {{{36, 75}, {76, 55}, {72, 146}}}},
          {32, {{{142, 110}, {192, 243}, {459, 401}}}}};
}

void yolo_decode_reference(const float* raw, int ny, int nx, const YoloHead& head, int classes,
                           std::vector<float>& out) {
  const int no = 5 + classes, C = 3 * no;
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int a = 0; a < 3; ++a)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        const float* p = raw + (size_t(y) * nx + x) * C + size_t(a) * no;
        const double sx = sig(p[0]), sy = sig(p[1]), sw = sig(p[2]), sh = sig(p[3]);
        out.push_back(float((2 * sx - 0.5 + x) * head.stride));
        out.push_back(float((2 * sy - 0.5 + y) * head.stride));
        out.push_back(float(4 * sw * sw * head.anchors[a][0]));
        out.push_back(float(4 * sh * sh * head.anchors[a][1]));
        for (int k = 4; k < no; ++k) out.push_back(float(sig(p[k])));
      }
}

float box_iou(const Detection& a, const Detection& b) {
  const float area_a = std::max(0.f, a.x2 - a.x1) * std::max(0.f, a.y2 - a.y1);
  const float area_b = std::max(0.f, b.x2 - b.x1) * std::max(0.f, b.y2 - b.y1);
  const float iw = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float ih = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float inter = iw * ih, uni = area_a + area_b - inter;
  return uni > 0 ? inter / uni : 0.f;
}

std::vector<Detection> nms_reference(const std::vector<float>& rows, int classes,
                                     const NmsOptions& o) {
  const size_t no = size_t(5 + classes);
  std::vector<Detection> cand;
  for (size_t r = 0; r + no <= rows.size(); r += no) {
    const float* p = &rows[r];
    if (!(p[4] > o.conf_thres)) continue;
    for (int c = 0; c < classes; ++c) {
      const float score = p[5 + c] * p[4];
      if (!(score > o.conf_thres)) continue;
      Detection d;
      d.x1 = p[0] - p[2] / 2, d.y1 = p[1] - p[3] / 2;
      d.x2 = p[0] + p[2] / 2, d.y2 = p[1] + p[3] / 2;
      d.score = score;
      d.cls = c;
      cand.push_back(d);
    }
  }
  // Highest score first; stable, so ties keep row then class order.
  std::stable_sort(cand.begin(), cand.end(),
                   [](const Detection& a, const Detection& b) { return a.score > b.score; });
  std::vector<Detection> kept;
  for (const Detection& d : cand) {
    bool suppressed = false;
    for (const Detection& k : kept)
      if (k.cls == d.cls && box_iou(k, d) > o.iou_thres) {
        suppressed = true;
        break;
      }
    if (!suppressed) kept.push_back(d);
    if (int(kept.size()) >= o.max_det) break;
  }
  return kept;
}

}  // namespace cnnbench
