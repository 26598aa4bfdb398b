// Host references of the minibatch standard deviation (kernels/mbstd_ref.h), in double.
#include "kernels/mbstd_ref.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace cnnbench {

namespace {

void check_shape(const char* what, size_t got, size_t want, int n, int group) {
  if (group <= 0 || n <= 0 || n % group != 0)
    throw std::invalid_argument(std::string(what) + ": batch " + std::to_string(n) +
                                " is not a multiple of the group " + std::to_string(group));
  if (got != want)
    throw std::invalid_argument(std::string(what) + ": a tensor has " + std::to_string(got) +
                                " values, not " + std::to_string(want));
}

// Per group j and element e of K: the statistics of the G members of group j in `x` (the
// samples j + g n/G, g < G, rows of K values).
struct GroupStats {
  double mu = 0, sd = 0;
};
GroupStats stats(const RefVec& x, int groups, int group, int j, size_t K, size_t e) {
  GroupStats s;
  for (int g = 0; g < group; ++g) s.mu += x[size_t(g * groups + j) * K + e];
  s.mu /= group;
  double var = 0;
  for (int g = 0; g < group; ++g) {
    const double d = x[size_t(g * groups + j) * K + e] - s.mu;
    var += d * d;
  }
  s.sd = std::sqrt(var / group + kMbstdEps);
  return s;
}

// y rows [hw][c + 1] of sample `row` (of y) from the K = hw * c values `src` and the scalar s.
void write_row(RefVec& y, size_t row, const double* src, int hw, int c, double s) {
  double* o = &y[row * size_t(hw) * (c + 1)];
  for (int p = 0; p < hw; ++p) {
    for (int ch = 0; ch < c; ++ch) o[size_t(p) * (c + 1) + ch] = src[size_t(p) * c + ch];
    o[size_t(p) * (c + 1) + c] = s;
  }
}

// The sum of dy[..., c] over the members of group j and (h, w), dy's samples offset by `base`.
double extra_sum(const RefVec& dy, size_t base, int groups, int group, int j, int hw, int c) {
  double s = 0;
  for (int g = 0; g < group; ++g)
    for (int p = 0; p < hw; ++p) s += dy[((base + size_t(g * groups + j)) * hw + p) * (c + 1) + c];
  return s;
}

}  // namespace

RefVec mbstd_forward_ref(const RefVec& x, int n, int h, int w, int c, int group) {
  const size_t K = size_t(h) * w * c;
  check_shape("mbstd_forward_ref", x.size(), size_t(n) * K, n, group);
  const int groups = n / group, hw = h * w;
  RefVec y(size_t(n) * hw * (c + 1));
  for (int j = 0; j < groups; ++j) {
    double s = 0;
    for (size_t e = 0; e < K; ++e) s += stats(x, groups, group, j, K, e).sd;
    s /= double(K);
    for (int g = 0; g < group; ++g) {
      const size_t i = size_t(g * groups + j);
      write_row(y, i, &x[i * K], hw, c, s);
    }
  }
  return y;
}

RefVec mbstd_backward_ref(const RefVec& x, const RefVec& dy, int n, int h, int w, int c,
                          int group) {
  const size_t K = size_t(h) * w * c;
  check_shape("mbstd_backward_ref", x.size(), size_t(n) * K, n, group);
  check_shape("mbstd_backward_ref", dy.size(), size_t(n) * h * w * (c + 1), n, group);
  const int groups = n / group, hw = h * w;
  RefVec dx(x.size());
  for (int j = 0; j < groups; ++j) {
    const double S = extra_sum(dy, 0, groups, group, j, hw, c);
    for (size_t e = 0; e < K; ++e) {
      const GroupStats st = stats(x, groups, group, j, K, e);
      const size_t p = e / size_t(c), ch = e % size_t(c);
      for (int g = 0; g < group; ++g) {
        const size_t i = size_t(g * groups + j);
        dx[i * K + e] = dy[(i * hw + p) * (c + 1) + ch] +
                        S * (x[i * K + e] - st.mu) / (group * st.sd) / double(K);
      }
    }
  }
  return dx;
}

RefVec mbstd_forward_dual_ref(const RefVec& x2, int n, int h, int w, int c, int group) {
  const size_t K = size_t(h) * w * c;
  check_shape("mbstd_forward_dual_ref", x2.size(), 2 * size_t(n) * K, n, group);
  const int groups = n / group, hw = h * w;
  RefVec y2(2 * size_t(n) * hw * (c + 1));
  for (int j = 0; j < groups; ++j) {
    double s = 0, sdot = 0;
    for (size_t e = 0; e < K; ++e) {
      const GroupStats st = stats(x2, groups, group, j, K, e);
      s += st.sd;
      double a = 0;
      for (int g = 0; g < group; ++g) {
        const size_t i = size_t(g * groups + j);
        a += (x2[i * K + e] - st.mu) * x2[(n + i) * K + e];
      }
      sdot += a / (group * st.sd);
    }
    s /= double(K), sdot /= double(K);
    for (int g = 0; g < group; ++g) {
      const size_t i = size_t(g * groups + j);
      write_row(y2, i, &x2[i * K], hw, c, s);
      write_row(y2, n + i, &x2[(n + i) * K], hw, c, sdot);
    }
  }
  return y2;
}

RefVec mbstd_backward_dual_ref(const RefVec& x2, const RefVec& dy2, int n, int h, int w, int c,
                               int group) {
  const size_t K = size_t(h) * w * c;
  check_shape("mbstd_backward_dual_ref", x2.size(), 2 * size_t(n) * K, n, group);
  check_shape("mbstd_backward_dual_ref", dy2.size(), 2 * size_t(n) * h * w * (c + 1), n, group);
  const int groups = n / group, hw = h * w;
  const double G = group;
  RefVec dx2(x2.size());
  for (int j = 0; j < groups; ++j) {
    const double S = extra_sum(dy2, 0, groups, group, j, hw, c);
    const double Gd = extra_sum(dy2, size_t(n), groups, group, j, hw, c);
    for (size_t e = 0; e < K; ++e) {
      const GroupStats st = stats(x2, groups, group, j, K, e);
      double xd_mean = 0, A = 0;
      for (int g = 0; g < group; ++g) {
        const size_t i = size_t(g * groups + j);
        xd_mean += x2[(n + i) * K + e];
        A += (x2[i * K + e] - st.mu) * x2[(n + i) * K + e];
      }
      xd_mean /= G;
      const double sd = st.sd, sd3 = sd * sd * sd;
      const size_t p = e / size_t(c), ch = e % size_t(c);
      for (int g = 0; g < group; ++g) {
        const size_t i = size_t(g * groups + j);
        const double y = x2[i * K + e] - st.mu, ydot = x2[(n + i) * K + e] - xd_mean;
        const double gp = dy2[(i * hw + p) * (c + 1) + ch];
        const double gd = dy2[((n + i) * hw + p) * (c + 1) + ch];
        dx2[i * K + e] = gp + S * y / (G * sd * double(K)) +
                         Gd / (G * double(K)) * (ydot / sd - A * y / (G * sd3));
        dx2[(n + i) * K + e] = gd + Gd * y / (G * sd * double(K));
      }
    }
  }
  return dx2;
}

}  // namespace cnnbench
