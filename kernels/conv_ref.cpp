#include "kernels/conv_ref.h"

#include <cstddef>

namespace cnnbench {

SampledOutput next_sampled_output(uint64_t& state, const Dims& y) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  SampledOutput s;
  s.idx = int64_t((state >> 17) % uint64_t(y.numel()));
  s.k = int(s.idx % y.c);
  s.row = s.idx / y.c;
  s.ow = int(s.row % y.w);
  const int64_t r = s.row / y.w;
  s.oh = int(r % y.h), s.n = int(r / y.h);
  return s;
}

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
