// Host references of SynthesisInput's Fourier features and their backward
// (kernels/fourier_backward_ref.h), in double.
#include "kernels/fourier_backward_ref.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace cnnbench {

namespace {

constexpr double kPi = 3.14159265358979323846;

void check_size(const char* what, const char* name, size_t got, size_t want) {
  if (got != want)
    throw std::invalid_argument(std::string(what) + ": " + name + " has " + std::to_string(got) +
                                " values, not " + std::to_string(want));
}

void check_prepare(const char* what, const RefVec& t, const RefVec& transform, const RefVec& freqs,
                   const RefVec& phases, int n, int c) {
  check_size(what, "t", t.size(), size_t(n) * 4);
  check_size(what, "transform", transform.size(), 9);
  check_size(what, "freqs", freqs.size(), size_t(c) * 2);
  check_size(what, "phases", phases.size(), size_t(c));
}

// u = t / |t[0:2]| and a = (m_r @ m_t)[0:2] @ transform for one image.
void prepare_matrix(const double* t, const RefVec& tr, double u[4], double& norm, double a[2][3]) {
  norm = std::sqrt(t[0] * t[0] + t[1] * t[1]);
  for (int k = 0; k < 4; ++k) u[k] = t[k] / norm;
  const double m[2][3] = {{u[0], -u[1], -(u[0] * u[2] - u[1] * u[3])},
                          {u[1], u[0], -(u[1] * u[2] + u[0] * u[3])}};
  for (int r = 0; r < 2; ++r)
    for (int q = 0; q < 3; ++q) {
      a[r][q] = 0;
      for (int k = 0; k < 3; ++k) a[r][q] += m[r][k] * tr[size_t(k) * 3 + q];
    }
}

}  // namespace

RefVec fourier_prepare_ref(const RefVec& t, const RefVec& transform, const RefVec& freqs,
                           const RefVec& phases, int n, int c, double sampling_rate,
                           double bandwidth) {
  check_prepare("fourier_prepare_ref", t, transform, freqs, phases, n, c);
  RefVec fp(size_t(n) * c * 4);
  for (int ni = 0; ni < n; ++ni) {
    double u[4], norm, a[2][3];
    prepare_matrix(&t[size_t(ni) * 4], transform, u, norm, a);
    for (int ci = 0; ci < c; ++ci) {
      const double f0 = freqs[size_t(ci) * 2], f1 = freqs[size_t(ci) * 2 + 1];
      const double fx = f0 * a[0][0] + f1 * a[1][0], fy = f0 * a[0][1] + f1 * a[1][1];
      double* o = &fp[(size_t(ni) * c + ci) * 4];
      o[0] = fx, o[1] = fy;
      o[2] = phases[size_t(ci)] + f0 * a[0][2] + f1 * a[1][2];
      o[3] = std::clamp(1 - (std::hypot(fx, fy) - bandwidth) / (sampling_rate / 2 - bandwidth), 0.0,
                        1.0);
    }
  }
  return fp;
}

RefVec fourier_features_ref(const RefVec& fp, int n, int c, int size, double sampling_rate,
                            double scale) {
  check_size("fourier_features_ref", "fp", fp.size(), size_t(n) * c * 4);
  const double half = 0.5 * size / sampling_rate;
  RefVec y(size_t(n) * size * size * c);
  for (int ni = 0; ni < n; ++ni)
    for (int iy = 0; iy < size; ++iy)
      for (int ix = 0; ix < size; ++ix) {
        const double gx = (2.0 * ix + 1) / size - 1, gy = (2.0 * iy + 1) / size - 1;
        for (int ci = 0; ci < c; ++ci) {
          const double* q = &fp[(size_t(ni) * c + ci) * 4];
          y[((size_t(ni) * size + iy) * size + ix) * c + ci] =
              scale * std::sin(2 * kPi * (gx * half * q[0] + gy * half * q[1] + q[2])) * q[3];
        }
      }
  return y;
}

RefVec fourier_features_backward_ref(const RefVec& fp, const RefVec& dy, int n, int c, int size,
                                     double sampling_rate, double scale) {
  check_size("fourier_features_backward_ref", "fp", fp.size(), size_t(n) * c * 4);
  check_size("fourier_features_backward_ref", "dy", dy.size(), size_t(n) * size * size * c);
  const double half = 0.5 * size / sampling_rate;
  RefVec dfp(fp.size(), 0.0);
  for (int ni = 0; ni < n; ++ni)
    for (int iy = 0; iy < size; ++iy)
      for (int ix = 0; ix < size; ++ix) {
        const double gx = (2.0 * ix + 1) / size - 1, gy = (2.0 * iy + 1) / size - 1;
        for (int ci = 0; ci < c; ++ci) {
          const double* q = &fp[(size_t(ni) * c + ci) * 4];
          double* o = &dfp[(size_t(ni) * c + ci) * 4];
          const double g = dy[((size_t(ni) * size + iy) * size + ix) * c + ci] * scale;
          const double theta = 2 * kPi * (gx * half * q[0] + gy * half * q[1] + q[2]);
          const double d_arg = g * q[3] * std::cos(theta) * 2 * kPi;  // d/d(gx half fx + ...)
          o[0] += d_arg * gx * half;
          o[1] += d_arg * gy * half;
          o[2] += d_arg;
          o[3] += g * std::sin(theta);
        }
      }
  return dfp;
}

RefVec fourier_prepare_backward_ref(const RefVec& t, const RefVec& transform, const RefVec& freqs,
                                    const RefVec& phases, const RefVec& dfp, int n, int c,
                                    double sampling_rate, double bandwidth) {
  check_prepare("fourier_prepare_backward_ref", t, transform, freqs, phases, n, c);
  check_size("fourier_prepare_backward_ref", "dfp", dfp.size(), size_t(n) * c * 4);
  const double band = sampling_rate / 2 - bandwidth;
  RefVec dt(size_t(n) * 4);
  for (int ni = 0; ni < n; ++ni) {
    double u[4], norm, a[2][3];
    prepare_matrix(&t[size_t(ni) * 4], transform, u, norm, a);
    // da [2][3], summed over the channels.
    double da[2][3] = {};
    for (int ci = 0; ci < c; ++ci) {
      const double f0 = freqs[size_t(ci) * 2], f1 = freqs[size_t(ci) * 2 + 1];
      const double fx = f0 * a[0][0] + f1 * a[1][0], fy = f0 * a[0][1] + f1 * a[1][1];
      const double* g = &dfp[(size_t(ni) * c + ci) * 4];
      double gfx = g[0], gfy = g[1];
      const double r = std::hypot(fx, fy);
      const double raw = 1 - (r - bandwidth) / band;
      if (raw >= 0 && raw <= 1 && r > 0) {  // d amp / d f = -f / (r band)
        gfx -= g[3] * fx / (r * band);
        gfy -= g[3] * fy / (r * band);
      }
      da[0][0] += gfx * f0, da[1][0] += gfx * f1;
      da[0][1] += gfy * f0, da[1][1] += gfy * f1;
      da[0][2] += g[2] * f0, da[1][2] += g[2] * f1;
    }
    // a = m @ transform: dm[r][k] = sum_q da[r][q] transform[k][q].
    double dm[2][3] = {};
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 3; ++k)
        for (int q = 0; q < 3; ++q) dm[r][k] += da[r][q] * transform[size_t(k) * 3 + q];
    // m from u = (r_c, r_s, t_x, t_y).
    double du[4];
    du[0] = dm[0][0] + dm[1][1] - u[2] * dm[0][2] - u[3] * dm[1][2];
    du[1] = -dm[0][1] + dm[1][0] + u[3] * dm[0][2] - u[2] * dm[1][2];
    du[2] = -u[0] * dm[0][2] - u[1] * dm[1][2];
    du[3] = u[1] * dm[0][2] - u[0] * dm[1][2];
    // u = t / norm, norm = |t[0:2]|: dt_j = (du_j - [j < 2] u_j sum_k du_k u_k) / norm.
    const double proj = du[0] * u[0] + du[1] * u[1] + du[2] * u[2] + du[3] * u[3];
    double* o = &dt[size_t(ni) * 4];
    for (int j = 0; j < 4; ++j) o[j] = (du[j] - (j < 2 ? u[j] * proj : 0.0)) / norm;
  }
  return dt;
}

}  // namespace cnnbench
