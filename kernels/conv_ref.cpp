#include "kernels/conv_ref.h"

#include <cstddef>

namespace cnnbench {

double conv_window(const ConvGeometry& g, const float* x, const float* w, int n, int k, int oh,
                   int ow) {
  const int K = g.y.c, C = g.x.c / g.groups, R = g.kernel_h, S = g.kernel_w;
  const int group = k / (K / g.groups);
  double acc = 0;
  for (int dr = 0; dr < R; ++dr) {
    const int ih = oh * g.stride - g.pad_h + dr * g.dilation;
    if (ih < 0 || ih >= g.x.h) continue;
    for (int ds = 0; ds < S; ++ds) {
      const int iw = ow * g.stride - g.pad_w + ds * g.dilation;
      if (iw < 0 || iw >= g.x.w) continue;
      const float* xp = &x[((size_t(n) * g.x.h + ih) * g.x.w + iw) * g.x.c + size_t(group) * C];
      const float* wp = &w[((size_t(k) * R + dr) * S + ds) * C];
      for (int c = 0; c < C; ++c) acc += double(xp[c]) * wp[c];
    }
  }
  return acc;
}

}  // namespace cnnbench
