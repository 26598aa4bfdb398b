// StyleGAN3's host references: filtered_lrelu as NVlabs' _filtered_lrelu_ref composes it from
// upfirdn2d and bias_act, and SynthesisInput.forward. Plain C++ in double on NCHW float tensors.
#include "kernels/stylegan3_ref.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/stylegan_ref.h"

namespace cnnbench {

namespace {

constexpr double kPi = 3.14159265358979323846;

// The [fh][fw] filter upfirdn2d_reference takes for filtered_lrelu's taps: empty -> [[1]] (no
// filter); 1D taps -> their outer product, not normalised (the designed taps already sum to 1);
// fd_2d -> the taps as given, square.
std::vector<float> filter_2d(const std::vector<float>& f, bool is_2d, int& taps, const char* what) {
  if (f.empty()) {
    taps = 1;
    return {1.f};
  }
  if (!is_2d) {
    taps = int(f.size());
    std::vector<float> o(f.size() * f.size());
    for (size_t a = 0; a < f.size(); ++a)
      for (size_t b = 0; b < f.size(); ++b) o[a * f.size() + b] = float(double(f[a]) * f[b]);
    return o;
  }
  taps = int(std::lround(std::sqrt(double(f.size()))));
  if (size_t(taps) * taps != f.size())
    throw std::invalid_argument(std::string("filtered_lrelu_reference: the 2D ") + what +
                                " filter has " + std::to_string(f.size()) +
                                " taps, not a square number");
  return f;
}

}  // namespace

std::vector<float> filtered_lrelu_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                            const std::vector<float>& fu,
                                            const std::vector<float>& fd, bool fd_2d,
                                            const std::vector<float>& bias,
                                            const FilteredLreluSpec& s) {
  if (x.size() != size_t(n) * c * h * w)
    throw std::invalid_argument("filtered_lrelu_reference: x is not n*c*h*w");
  if (!bias.empty() && bias.size() != size_t(c))
    throw std::invalid_argument("filtered_lrelu_reference: bias is not [c]");
  if (s.up < 1 || s.down < 1)
    throw std::invalid_argument("filtered_lrelu_reference: up and down must be >= 1");
  int fu_taps = 1, fd_taps = 1;
  const std::vector<float> fu2 = filter_2d(fu, false, fu_taps, "up");
  const std::vector<float> fd2 = filter_2d(fd, fd_2d, fd_taps, "down");
  if (s.tmp_h(h, fu_taps) < fd_taps || s.tmp_w(w, fu_taps) < fd_taps)
    throw std::invalid_argument(
        "filtered_lrelu_reference: the padded input is smaller than the "
        "filters");

  // Bias.
  std::vector<float> xb(x);
  if (!bias.empty())
    for (size_t p = 0; p < size_t(n) * c; ++p) {
      const double b = bias[p % size_t(c)];
      for (size_t q = 0; q < size_t(h) * w; ++q) {
        float& v = xb[p * h * w + q];
        v = float(double(v) + b);
      }
    }

  // Up-sampling: zero insertion, padding, fu, gain up^2.
  FirSpec su;
  su.up = s.up;
  su.pad_x0 = s.pad_x0, su.pad_x1 = s.pad_x1, su.pad_y0 = s.pad_y0, su.pad_y1 = s.pad_y1;
  su.fh = su.fw = fu_taps;
  su.gain = float(s.up * s.up);
  std::vector<float> t = upfirdn2d_reference(xb, n, c, h, w, fu2, su);
  const int th = su.out_h(h), tw = su.out_w(w);

  // Leaky ReLU, gain, clamp (bias_act: act, then gain, then clamp).
  for (float& v : t) {
    double y = v;
    y = (y >= 0 ? y : y * double(s.slope)) * double(s.gain);
    if (s.clamp > 0) y = std::min(std::max(y, -double(s.clamp)), double(s.clamp));
    v = float(y);
  }

  // fd and down-sampling, then the output scale.
  FirSpec sd;
  sd.down = s.down;
  sd.fh = sd.fw = fd_taps;
  std::vector<float> y = upfirdn2d_reference(t, n, c, th, tw, fd2, sd);
  if (s.out_scale != 1.f)
    for (float& v : y) v = float(double(v) * s.out_scale);
  return y;
}

std::vector<float> fourier_input_reference(
    const std::vector<float>& w, int n, int wdim, const std::vector<float>& affine_w,
    const std::vector<float>& affine_b, float affine_weight_gain,
    const std::vector<float>& transform, const std::vector<float>& freqs,
    const std::vector<float>& phases, const std::vector<float>& weight, int channels, int size,
    double sampling_rate, double bandwidth) {
  const size_t C = size_t(channels);
  if (w.size() != size_t(n) * wdim || affine_w.size() != 4 * size_t(wdim) || affine_b.size() != 4 ||
      transform.size() != 9 || freqs.size() != 2 * C || phases.size() != C ||
      weight.size() != C * C)
    throw std::invalid_argument("fourier_input_reference: tensor sizes");
  const size_t hw = size_t(size) * size;
  std::vector<float> out(size_t(n) * C * hw);
  // The grid (affine_grid, align_corners false): x over the width, y over the height, the same
  // coordinates on both axes for a square output.
  std::vector<double> coord(static_cast<size_t>(size));
  const double half_extent = 0.5 * size / sampling_rate;
  for (int j = 0; j < size; ++j) coord[size_t(j)] = ((2.0 * j + 1) / size - 1) * half_extent;
  const double mix = 1.0 / std::sqrt(double(channels));
  std::vector<double> fx(C), fy(C), ph(C), amp(C), feat(C * hw);
  for (int ni = 0; ni < n; ++ni) {
    // t = affine(w), normalised by the norm of its rotation part.
    double t[4];
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < wdim; ++k)
        acc += double(w[size_t(ni) * wdim + k]) * affine_w[size_t(j) * wdim + k];
      t[j] = acc * affine_weight_gain + affine_b[size_t(j)];
    }
    const double norm = std::sqrt(t[0] * t[0] + t[1] * t[1]);
    for (double& v : t) v /= norm;
    // T = m_r @ m_t @ transform.
    const double mr[3][3] = {{t[0], -t[1], 0}, {t[1], t[0], 0}, {0, 0, 1}};
    const double mt[3][3] = {{1, 0, -t[2]}, {0, 1, -t[3]}, {0, 0, 1}};
    double a[3][3] = {}, T[3][3] = {};
    for (int r = 0; r < 3; ++r)
      for (int q = 0; q < 3; ++q)
        for (int k = 0; k < 3; ++k) a[r][q] += mr[r][k] * mt[k][q];
    for (int r = 0; r < 3; ++r)
      for (int q = 0; q < 3; ++q)
        for (int k = 0; k < 3; ++k) T[r][q] += a[r][k] * transform[size_t(k) * 3 + q];
    // phases + freqs @ T[0:2, 2]; freqs @ T[0:2, 0:2]; the band limit.
    for (size_t ci = 0; ci < C; ++ci) {
      const double f0 = freqs[ci * 2], f1 = freqs[ci * 2 + 1];
      ph[ci] = phases[ci] + f0 * T[0][2] + f1 * T[1][2];
      fx[ci] = f0 * T[0][0] + f1 * T[1][0];
      fy[ci] = f0 * T[0][1] + f1 * T[1][1];
      const double r = std::hypot(fx[ci], fy[ci]);
      amp[ci] = std::clamp(1 - (r - bandwidth) / (sampling_rate / 2 - bandwidth), 0.0, 1.0);
    }
    for (size_t ci = 0; ci < C; ++ci)
      for (int i = 0; i < size; ++i)
        for (int j = 0; j < size; ++j)
          feat[ci * hw + size_t(i) * size + j] =
              std::sin(2 * kPi * (coord[size_t(j)] * fx[ci] + coord[size_t(i)] * fy[ci] + ph[ci])) *
              amp[ci];
    // The channel mixing: out[o] = sum_c feat[c] * weight[o][c] / sqrt(C).
    std::vector<double> acc(hw);
    for (size_t o = 0; o < C; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t ci = 0; ci < C; ++ci) {
        const double wv = double(weight[o * C + ci]) * mix;
        const double* fp = &feat[ci * hw];
        for (size_t p = 0; p < hw; ++p) acc[p] += wv * fp[p];
      }
      float* op = &out[(size_t(ni) * C + o) * hw];
      for (size_t p = 0; p < hw; ++p) op[p] = float(acc[p]);
    }
  }
  return out;
}

}  // namespace cnnbench
