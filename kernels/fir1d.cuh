// One output of a separable filtered_lrelu pass (kernels/stylegan3.h, Fir1dPass): the code the
// fir1d kernel runs for each element, callable on the host too, where a CPU test runs it over
// every element and checks the passes against the host reference.
#pragma once

#include <cstdint>

#include "kernels/convert.cuh"
#include "kernels/stylegan3.h"

namespace cnnbench {

// Element e of output row o: xo is input row o ([len][inner]), `rows` rows per image (a pass
// along W: the image's height; along H: 1) and c channels (the innermost of inner) locate
// pre_scale's [n][c] and bias's [c] entries. Tap t reads the padded, zero-inserted line at
// m = i * down + t - pad0: a sample where m is a multiple of up, its source (m0 + t0) / up and
// on by one every up taps (no division per tap).
template <typename T>
__host__ __device__ inline float fir1d_output(const T* xo, int o, int e, int len, int inner,
                                              int rows, int c, const float* f,
                                              const float* pre_scale, const float* bias,
                                              const Fir1dPass& p) {
  const int i = e / inner;
  const int r = e - i * inner;
  const int ci = r % c;
  const float s = pre_scale ? pre_scale[(o / rows) * c + ci] : 1.f;
  const float b = bias ? bias[ci] : 0.f;
  const int m0 = i * p.down - p.pad0;
  int t0 = (-m0) % p.up;
  if (t0 < 0) t0 += p.up;
  int src = (m0 + t0) / p.up;  // exact: m0 + t0 is a multiple of up
  float acc = 0.f;
  for (int t = t0; t < p.taps; t += p.up, ++src) {
    if (src < 0) continue;
    if (src >= len) break;
    acc += (load_f(xo, int64_t(src) * inner + r) * s + b) * (f ? f[p.taps - 1 - t] : 1.f);
  }
  float v = acc * p.gain;
  if (p.act) {
    v = (v >= 0.f ? v : v * p.slope) * p.act_gain;
    if (p.clamp > 0.f) v = v < -p.clamp ? -p.clamp : v > p.clamp ? p.clamp : v;
  }
  return v * p.out_scale;
}

}  // namespace cnnbench
