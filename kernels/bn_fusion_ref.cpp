#include "kernels/bn_fusion_ref.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "kernels/fp8.h"

namespace cnnbench {

float bn_relu_fp16(float x, float scale, float bias) {
  return fp16_round(std::max(0.f, x * scale + bias));
}

BnFusionData make_bn_fusion_data(const ConvGeometry& g, uint64_t seed) {
  if (g.groups != 1) throw std::invalid_argument("bn fusion probe: groups must be 1");
  BnFusionData d;
  d.g = g;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  d.x.resize(size_t(g.x.numel()));
  for (float& v : d.x) v = fp16_round(0.3f + normal(rng));
  const int C = g.x.c;
  d.scale.resize(size_t(C)), d.bias.resize(size_t(C));
  for (int c = 0; c < C; ++c) {  // fp16 values: a graph may hold them in fp16
    d.scale[c] = fp16_round(1.f + 0.1f * normal(rng));
    d.bias[c] = fp16_round(0.2f * normal(rng));
  }
  d.a.resize(d.x.size());
  for (size_t i = 0; i < d.x.size(); ++i)
    d.a[i] = bn_relu_fp16(d.x[i], d.scale[i % size_t(C)], d.bias[i % size_t(C)]);
  const int64_t row = int64_t(g.kernel_h) * g.kernel_w * C;
  const float he = std::sqrt(2.f / float(row));
  d.w.resize(size_t(row) * size_t(g.y.c));
  for (float& v : d.w) v = fp16_round(he * normal(rng));
  d.dy.resize(size_t(g.y.numel()));
  for (float& v : d.dy) v = fp16_round(normal(rng));
  return d;
}

double wgrad_entry(const ConvGeometry& g, const float* a, const float* dy, int k, int r, int s,
                   int c) {
  double acc = 0;
  for (int n = 0; n < g.y.n; ++n)
    for (int oh = 0; oh < g.y.h; ++oh) {
      const int ih = oh * g.stride - g.pad_h + r * g.dilation;
      if (ih < 0 || ih >= g.x.h) continue;
      for (int ow = 0; ow < g.y.w; ++ow) {
        const int iw = ow * g.stride - g.pad_w + s * g.dilation;
        if (iw < 0 || iw >= g.x.w) continue;
        acc += double(dy[((size_t(n) * g.y.h + oh) * g.y.w + ow) * g.y.c + k]) *
               a[((size_t(n) * g.x.h + ih) * g.x.w + iw) * g.x.c + c];
      }
    }
  return acc;
}

double dgrad_entry(const ConvGeometry& g, const float* dy, const float* w, int n, int h, int wc,
                   int c) {
  const int C = g.x.c, R = g.kernel_h, S = g.kernel_w;
  double acc = 0;
  for (int r = 0; r < R; ++r) {
    const int t = h + g.pad_h - r * g.dilation;  // = oh * stride
    if (t < 0 || t % g.stride) continue;
    const int oh = t / g.stride;
    if (oh >= g.y.h) continue;
    for (int s = 0; s < S; ++s) {
      const int u = wc + g.pad_w - s * g.dilation;
      if (u < 0 || u % g.stride) continue;
      const int ow = u / g.stride;
      if (ow >= g.y.w) continue;
      const float* dyp = &dy[((size_t(n) * g.y.h + oh) * g.y.w + ow) * g.y.c];
      for (int k = 0; k < g.y.c; ++k)
        acc += double(dyp[k]) * w[((size_t(k) * R + r) * S + s) * C + c];
    }
  }
  return acc;
}

}  // namespace cnnbench
