// A case for the stem pool's kernels (kernel 3, stride 2, pad 1; kernels/train_kernels.cu), shared
// by their host tests (test_stem.cpp) and GPU tests (test_gpu_train.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/pool.h"
#include "kernels/storage.h"
#include "kernels/tensor.h"
#include "kernels/train_refs.h"

namespace cnnbench {

struct StemPoolCase {
  PoolGeom g;
  PoolSpec s;
  std::vector<uint8_t> x, dy, dx0;  // stored as type t: the input, y's gradient, dx's old values
};

// values: 0, uniform in [-2, 2); 1, ties (from {-1, 0, 1}: most windows hold several maxima);
// 2, uniform with a third of x from ±0, ±inf and NaN. dy and dx0 uniform. Draws x, dy, dx0 in
// that order from rng.
inline StemPoolCase stem_pool_case(DType t, const Dims& d, int values, std::mt19937& rng) {
  StemPoolCase c;
  c.g = pool_geom(d, 3, 2, 1);
  c.s.x = c.g.x, c.s.y = c.g.y, c.s.kernel = 3, c.s.stride = 2, c.s.pad = 1;
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> x(size_t(d.numel())), dy(size_t(c.g.y.numel())), dx0(size_t(d.numel()));
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
  for (float& v : x) {
    v = values == 1 ? std::round(u(rng) / 2) : u(rng);
    if (values == 2 && rng() % 3 == 0) v = specials[rng() % 5];
  }
  for (float& v : dy) v = u(rng);
  for (float& v : dx0) v = u(rng);
  c.x = to_storage(x, t), c.dy = to_storage(dy, t), c.dx0 = to_storage(dx0, t);
  return c;
}

// The activation a BatchNorm + ReLU stores for x (stored as type t, d's NHWC rows): v =
// fmaf(x - mean, invstd * gamma, beta), ReLU by fmaxf, rounded to t; gamma and beta may be empty
// (1 and 0). What launch_bn_forward_train's apply writes, as its host form.
inline std::vector<uint8_t> bn_relu_stored(DType t, const std::vector<uint8_t>& xs, const Dims& d,
                                           const std::vector<float>& mean,
                                           const std::vector<float>& invstd,
                                           const std::vector<float>& gamma,
                                           const std::vector<float>& beta) {
  const std::vector<float> x = from_storage(xs, t);
  std::vector<float> a(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = i % size_t(d.c);
    const float k = invstd[c] * (gamma.empty() ? 1.0f : gamma[c]);
    const float b = beta.empty() ? 0.0f : beta[c];
    a[i] = std::fmax(std::fmaf(x[i] - mean[c], k, b), 0.0f);
  }
  return to_storage(a, t);
}

}  // namespace cnnbench
