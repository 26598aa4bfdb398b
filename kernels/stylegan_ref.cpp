#include <cmath>
#include <stdexcept>

#include "kernels/stylegan_ref.h"

namespace cnnbench {

FirSpec upsample2d_spec(int taps, int up) {
  FirSpec s;
  s.up = up;
  s.fh = s.fw = taps;
  s.pad_x0 = s.pad_y0 = (taps + up - 1) / 2;
  s.pad_x1 = s.pad_y1 = (taps - up) / 2;
  s.gain = float(up * up);
  return s;
}

std::vector<float> stylegan2_fir_1d() {
  return {1.f, 3.f, 3.f, 1.f};
}

std::vector<float> fir_2d(const std::vector<float>& t) {
  double sum = 0;
  for (float a : t)
    for (float b : t) sum += double(a) * b;
  std::vector<float> f;
  for (float a : t)
    for (float b : t) f.push_back(float(double(a) * b / sum));
  return f;
}

std::vector<float> fir_1d(const std::vector<float>& t) {
  double sum = 0;
  for (float a : t) sum += a;
  std::vector<float> f;
  for (float a : t) f.push_back(float(double(a) / sum));
  return f;
}

std::vector<float> upfirdn2d_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                       const std::vector<float>& f, const FirSpec& s) {
  if (x.size() != size_t(n) * c * h * w || f.size() != size_t(s.fh) * s.fw)
    throw std::invalid_argument("upfirdn2d_reference: sizes");
  const int oh = s.out_h(h), ow = s.out_w(w);
  std::vector<float> y(size_t(n) * c * oh * ow);
  for (int ni = 0; ni < n; ++ni)
    for (int ci = 0; ci < c; ++ci) {
      const float* xp = &x[(size_t(ni) * c + ci) * h * w];
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double acc = 0;
          for (int a = 0; a < s.fh; ++a)
            for (int b = 0; b < s.fw; ++b) {
              // The padded, up-sampled signal at (oy * down + a, ox * down + b).
              const int uy = oy * s.down + a - s.pad_y0, ux = ox * s.down + b - s.pad_x0;
              if (uy < 0 || ux < 0 || uy % s.up || ux % s.up) continue;
              const int iy = uy / s.up, ix = ux / s.up;
              if (iy >= h || ix >= w) continue;
              acc += double(xp[iy * w + ix]) * f[size_t(s.fh - 1 - a) * s.fw + (s.fw - 1 - b)];
            }
          y[((size_t(ni) * c + ci) * oh + oy) * ow + ox] = float(acc * s.gain);
        }
    }
  return y;
}

std::vector<float> bias_act_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                      const std::vector<float>& bias,
                                      const std::vector<float>& noise, const BiasActSpec& s) {
  std::vector<float> y(x.size());
  for (int ni = 0; ni < n; ++ni)
    for (int ci = 0; ci < c; ++ci)
      for (int p = 0; p < h * w; ++p) {
        const size_t i = (size_t(ni) * c + ci) * h * w + p;
        double v = x[i];
        if (!noise.empty()) v += double(s.noise_strength) * noise[size_t(p)];
        v += bias.empty() ? 0.0 : bias[size_t(ci)];
        v = (v >= 0 ? v : v * s.slope) * s.gain;
        if (s.clamp > 0) v = std::min(std::max(v, -double(s.clamp)), double(s.clamp));
        y[i] = float(v);
      }
  return y;
}

std::vector<float> demod_reference(const std::vector<float>& wt, int k, int c, int r, int s,
                                   const std::vector<float>& styles, int n) {
  std::vector<float> d(size_t(n) * k);
  for (int ni = 0; ni < n; ++ni)
    for (int ki = 0; ki < k; ++ki) {
      double sum = 0;
      for (int ci = 0; ci < c; ++ci)
        for (int q = 0; q < r * s; ++q) {
          const double v =
              double(wt[(size_t(ki) * c + ci) * r * s + q]) * styles[size_t(ni) * c + ci];
          sum += v * v;
        }
      d[size_t(ni) * k + ki] = float(1.0 / std::sqrt(sum + 1e-8));
    }
  return d;
}

std::vector<float> modconv_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                     const std::vector<float>& weight, int k, int r,
                                     const std::vector<float>& styles, bool demodulate) {
  const std::vector<float> d =
      demodulate ? demod_reference(weight, k, c, r, r, styles, n) : std::vector<float>{};
  const int pad = (r - 1) / 2;
  std::vector<float> y(size_t(n) * k * h * w);
  std::vector<double> wn(size_t(k) * c * r * r);
  for (int ni = 0; ni < n; ++ni) {
    // This image's own weight: W[k][c] * styles[c] (* d[k]).
    for (int ki = 0; ki < k; ++ki)
      for (int ci = 0; ci < c; ++ci)
        for (int q = 0; q < r * r; ++q) {
          const size_t i = (size_t(ki) * c + ci) * r * r + q;
          wn[i] = double(weight[i]) * styles[size_t(ni) * c + ci] *
                  (demodulate ? double(d[size_t(ni) * k + ki]) : 1.0);
        }
    for (int ki = 0; ki < k; ++ki)
      for (int oy = 0; oy < h; ++oy)
        for (int ox = 0; ox < w; ++ox) {
          double acc = 0;
          for (int ci = 0; ci < c; ++ci)
            for (int a = 0; a < r; ++a)
              for (int b = 0; b < r; ++b) {
                const int iy = oy + a - pad, ix = ox + b - pad;
                if (iy < 0 || ix < 0 || iy >= h || ix >= w) continue;
                acc += wn[(size_t(ki) * c + ci) * r * r + a * r + b] *
                       x[((size_t(ni) * c + ci) * h + iy) * w + ix];
              }
          y[((size_t(ni) * k + ki) * h + oy) * w + ox] = float(acc);
        }
  }
  return y;
}

}  // namespace cnnbench
