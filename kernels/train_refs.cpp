#include "kernels/train_refs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace cnnbench {

namespace {

size_t nhwc(const Dims& d, int n, int h, int w, int c) {
  return ((size_t(n) * d.h + h) * d.w + w) * d.c + c;
}

double sigmoid(double v) {
  return 1.0 / (1.0 + std::exp(-v));
}

void expect_size(const RefVec& v, size_t n, const char* what) {
  if (v.size() != n)
    throw std::logic_error(std::string("train refs: ") + what + " has the wrong size");
}

}  // namespace

XentRef softmax_xent_ref(const RefVec& logits, const std::vector<int>& labels, int classes,
                         double weight) {
  const int N = int(labels.size());
  expect_size(logits, size_t(N) * classes, "logits");
  XentRef r;
  r.dlogits.assign(logits.size(), 0.0);
  for (int n = 0; n < N; ++n) {
    const double* z = &logits[size_t(n) * classes];
    const double top = *std::max_element(z, z + classes);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(z[k] - top);
    const double log_sum = top + std::log(sum);
    r.loss += (log_sum - z[labels[n]]) / N;
    for (int k = 0; k < classes; ++k)
      r.dlogits[size_t(n) * classes + k] =
          weight * (std::exp(z[k] - log_sum) - (k == labels[n] ? 1.0 : 0.0)) / N;
  }
  r.loss *= weight;
  return r;
}

namespace {
// Channel c's mean and sum of squared deviations over the rows of an NHWC [rows, channels] x.
std::pair<double, double> channel_stats(const RefVec& x, int channels, int c) {
  const size_t rows = x.size() / channels;
  double s = 0, ss = 0;
  for (size_t i = 0; i < rows; ++i) s += x[i * channels + c];
  const double mean = s / rows;
  for (size_t i = 0; i < rows; ++i)
    ss += (x[i * channels + c] - mean) * (x[i * channels + c] - mean);
  return {mean, ss};
}
}  // namespace

BnRef bn_forward_train_ref(const RefVec& x, int channels, const RefVec& gamma, const RefVec& beta,
                           double eps) {
  const size_t rows = x.size() / channels;
  BnRef r;
  r.mean.assign(channels, 0.0);
  r.invstd.assign(channels, 0.0);
  r.y.resize(x.size());
  for (int c = 0; c < channels; ++c) {
    const auto [mean, ss] = channel_stats(x, channels, c);
    r.mean[c] = mean;
    r.invstd[c] = 1.0 / std::sqrt(ss / rows + eps);
    for (size_t i = 0; i < rows; ++i)
      r.y[i * channels + c] = gamma[c] * (x[i * channels + c] - mean) * r.invstd[c] + beta[c];
  }
  return r;
}

BnGradRef bn_backward_ref(const RefVec& x, const RefVec& dy, int channels, const RefVec& gamma,
                          const RefVec& mean, const RefVec& invstd) {
  const size_t rows = x.size() / channels;
  expect_size(dy, x.size(), "dy");
  BnGradRef r;
  r.dx.resize(x.size());
  r.dgamma.assign(channels, 0.0);
  r.dbeta.assign(channels, 0.0);
  for (int c = 0; c < channels; ++c) {
    for (size_t i = 0; i < rows; ++i) {
      const double xhat = (x[i * channels + c] - mean[c]) * invstd[c];
      r.dbeta[c] += dy[i * channels + c];
      r.dgamma[c] += dy[i * channels + c] * xhat;
    }
    for (size_t i = 0; i < rows; ++i) {
      const double xhat = (x[i * channels + c] - mean[c]) * invstd[c];
      r.dx[i * channels + c] = gamma[c] * invstd[c] / rows *
                               (rows * dy[i * channels + c] - r.dbeta[c] - xhat * r.dgamma[c]);
    }
  }
  return r;
}

void bn_running_update_ref(RefVec& running_mean, RefVec& running_var, const RefVec& x, int channels,
                           double momentum) {
  const size_t rows = x.size() / channels;
  for (int c = 0; c < channels; ++c) {
    const auto [mean, ss] = channel_stats(x, channels, c);
    running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean;
    running_var[c] = (1 - momentum) * running_var[c] + momentum * ss / double(rows - 1);
  }
}

RefVec relu_backward_ref(const RefVec& y, const RefVec& dy) {
  RefVec dx(dy.size());
  for (size_t i = 0; i < dy.size(); ++i) dx[i] = y[i] > 0 ? dy[i] : 0.0;
  return dx;
}

RefVec sigmoid_backward_ref(const RefVec& y, const RefVec& dy) {
  RefVec dx(dy.size());
  for (size_t i = 0; i < dy.size(); ++i) dx[i] = dy[i] * y[i] * (1 - y[i]);
  return dx;
}

RefVec silu_backward_ref(const RefVec& x, const RefVec& dy) {
  RefVec dx(dy.size());
  for (size_t i = 0; i < dy.size(); ++i) {
    const double s = sigmoid(x[i]);
    dx[i] = dy[i] * s * (1 + x[i] * (1 - s));
  }
  return dx;
}

PoolGeom pool_geom(Dims x, int kernel, int stride, int pad, bool count_include_pad) {
  PoolGeom g;
  g.x = x;
  g.kernel = g.kernel_w = kernel, g.stride = stride, g.pad = g.pad_w = pad;
  g.count_include_pad = count_include_pad;
  g.y = {x.n, x.c, (x.h + 2 * pad - kernel) / stride + 1, (x.w + 2 * pad - kernel) / stride + 1};
  return g;
}

namespace {
// Calls f(in_index, out_index) for every in-bounds input position of every pooling window;
// `window(out_index, count)` once per window with its in-bounds count.
template <class F, class W>
void for_windows(const PoolGeom& g, F f, W window) {
  for (int n = 0; n < g.y.n; ++n)
    for (int oh = 0; oh < g.y.h; ++oh)
      for (int ow = 0; ow < g.y.w; ++ow)
        for (int c = 0; c < g.y.c; ++c) {
          const size_t o = nhwc(g.y, n, oh, ow, c);
          int count = 0;
          for (int r = 0; r < g.kernel; ++r)
            for (int s = 0; s < g.kernel_w; ++s) {
              const int ih = oh * g.stride - g.pad + r, iw = ow * g.stride - g.pad_w + s;
              if (ih < 0 || ih >= g.x.h || iw < 0 || iw >= g.x.w) continue;
              ++count;
              f(nhwc(g.x, n, ih, iw, c), o);
            }
          window(o, count);
        }
}
}  // namespace

RefVec maxpool_forward_ref(const RefVec& x, const PoolGeom& g) {
  RefVec y(size_t(g.y.numel()), -std::numeric_limits<double>::infinity());
  for_windows(
      g, [&](size_t i, size_t o) { y[o] = std::max(y[o], x[i]); }, [](size_t, int) {});
  return y;
}

RefVec maxpool_backward_ref(const RefVec& x, const RefVec& dy, const PoolGeom& g) {
  // Each window's gradient goes to its first maximum in scan order (PyTorch's choice on ties).
  RefVec dx(x.size(), 0.0);
  std::vector<size_t> arg(size_t(g.y.numel()), 0);
  std::vector<bool> seen(arg.size(), false);
  for_windows(
      g,
      [&](size_t i, size_t o) {
        if (!seen[o] || x[i] > x[arg[o]]) arg[o] = i, seen[o] = true;
      },
      [&](size_t o, int) { dx[arg[o]] += dy[o]; });
  return dx;
}

RefVec avgpool_forward_ref(const RefVec& x, const PoolGeom& g) {
  RefVec y(size_t(g.y.numel()), 0.0);
  const int full = g.kernel * g.kernel_w;
  for_windows(
      g, [&](size_t i, size_t o) { y[o] += x[i]; },
      [&](size_t o, int count) { y[o] /= g.count_include_pad ? full : count; });
  return y;
}

RefVec avgpool_backward_ref(const RefVec& dy, const PoolGeom& g) {
  // Two passes: the divisor of each window first, then the spread.
  std::vector<int> divisor(size_t(g.y.numel()), 1);
  const int full = g.kernel * g.kernel_w;
  for_windows(
      g, [](size_t, size_t) {},
      [&](size_t o, int count) { divisor[o] = g.count_include_pad ? full : count; });
  RefVec dx(size_t(g.x.numel()), 0.0);
  for_windows(
      g, [&](size_t i, size_t o) { dx[i] += dy[o] / divisor[o]; }, [](size_t, int) {});
  return dx;
}

RefVec scale_forward_ref(const RefVec& x, const RefVec& gate, const Dims& d) {
  RefVec y(x.size());
  const size_t hw = size_t(d.h) * d.w;
  for (int n = 0; n < d.n; ++n)
    for (size_t p = 0; p < hw; ++p)
      for (int c = 0; c < d.c; ++c) {
        const size_t i = (size_t(n) * hw + p) * d.c + c;
        y[i] = x[i] * gate[size_t(n) * d.c + c];
      }
  return y;
}

ScaleGradRef scale_backward_ref(const RefVec& x, const RefVec& gate, const RefVec& dy,
                                const Dims& d) {
  ScaleGradRef r;
  r.dx.resize(x.size());
  r.dgate.assign(gate.size(), 0.0);
  const size_t hw = size_t(d.h) * d.w;
  for (int n = 0; n < d.n; ++n)
    for (size_t p = 0; p < hw; ++p)
      for (int c = 0; c < d.c; ++c) {
        const size_t i = (size_t(n) * hw + p) * d.c + c, gi = size_t(n) * d.c + c;
        r.dx[i] = dy[i] * gate[gi];
        r.dgate[gi] += dy[i] * x[i];
      }
  return r;
}

namespace {
// S[c] of every row, the LRN's denominator before the power.
RefVec lrn_scale(const RefVec& x, const LrnGeom& g) {
  const int C = g.x.c;
  const size_t rows = x.size() / C;
  RefVec S(x.size());
  for (size_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) {
      double sq = 0;
      for (int j = std::max(0, c - (g.size - 1) / 2); j <= std::min(C - 1, c + g.size / 2); ++j)
        sq += x[r * C + j] * x[r * C + j];
      S[r * C + c] = g.k + g.alpha / g.size * sq;
    }
  return S;
}
}  // namespace

RefVec lrn_forward_ref(const RefVec& x, const LrnGeom& g) {
  const RefVec S = lrn_scale(x, g);
  RefVec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * std::pow(S[i], -g.beta);
  return y;
}

RefVec lrn_backward_ref(const RefVec& x, const RefVec& dy, const LrnGeom& g) {
  const int C = g.x.c;
  const size_t rows = x.size() / C;
  const RefVec S = lrn_scale(x, g);
  RefVec dx(x.size());
  for (size_t r = 0; r < rows; ++r)
    for (int j = 0; j < C; ++j) {
      // The channels whose window holds j: c - (size-1)/2 <= j <= c + size/2.
      double acc = 0;
      for (int c = std::max(0, j - g.size / 2); c <= std::min(C - 1, j + (g.size - 1) / 2); ++c)
        acc += dy[r * C + c] * x[r * C + c] * std::pow(S[r * C + c], -g.beta - 1);
      dx[r * C + j] = dy[r * C + j] * std::pow(S[r * C + j], -g.beta) -
                      2 * g.beta * g.alpha / g.size * x[r * C + j] * acc;
    }
  return dx;
}

ConvGeom conv_geom(Dims x, int out_channels, int kernel, int kernel_w, int stride, int pad,
                   int pad_w, int dilation, int groups) {
  if (x.c % groups || out_channels % groups) throw std::logic_error("conv_geom: bad groups");
  ConvGeom g;
  g.x = x;
  g.kernel = kernel, g.kernel_w = kernel_w, g.stride = stride, g.pad = pad, g.pad_w = pad_w;
  g.dilation = dilation, g.groups = groups;
  g.y = {x.n, out_channels, (x.h + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1,
         (x.w + 2 * pad_w - dilation * (kernel_w - 1) - 1) / stride + 1};
  return g;
}

namespace {
// Calls f(x_index, w_index, y_index) for every multiply-accumulate of the convolution.
template <class F>
void for_macs(const ConvGeom& g, F f) {
  const int cg = g.x.c / g.groups, kg = g.y.c / g.groups;
  for (int n = 0; n < g.y.n; ++n)
    for (int oh = 0; oh < g.y.h; ++oh)
      for (int ow = 0; ow < g.y.w; ++ow)
        for (int k = 0; k < g.y.c; ++k) {
          const size_t o = nhwc(g.y, n, oh, ow, k);
          const int c0 = (k / kg) * cg;
          for (int r = 0; r < g.kernel; ++r) {
            const int ih = oh * g.stride - g.pad + r * g.dilation;
            if (ih < 0 || ih >= g.x.h) continue;
            for (int s = 0; s < g.kernel_w; ++s) {
              const int iw = ow * g.stride - g.pad_w + s * g.dilation;
              if (iw < 0 || iw >= g.x.w) continue;
              for (int c = 0; c < cg; ++c)
                f(nhwc(g.x, n, ih, iw, c0 + c),
                  ((size_t(k) * g.kernel + r) * g.kernel_w + s) * cg + c, o);
            }
          }
        }
}
}  // namespace

RefVec conv_forward_ref(const RefVec& x, const RefVec& w, const RefVec& bias, const ConvGeom& g) {
  expect_size(x, size_t(g.x.numel()), "x");
  expect_size(w, size_t(g.y.c) * g.kernel * g.kernel_w * (g.x.c / g.groups), "w");
  RefVec y(size_t(g.y.numel()), 0.0);
  for_macs(g, [&](size_t xi, size_t wi, size_t yi) { y[yi] += x[xi] * w[wi]; });
  if (!bias.empty())
    for (size_t i = 0; i < y.size(); ++i) y[i] += bias[i % g.y.c];
  return y;
}

RefVec conv_backward_data_ref(const RefVec& dy, const RefVec& w, const ConvGeom& g) {
  RefVec dx(size_t(g.x.numel()), 0.0);
  for_macs(g, [&](size_t xi, size_t wi, size_t yi) { dx[xi] += dy[yi] * w[wi]; });
  return dx;
}

RefVec conv_backward_filter_ref(const RefVec& x, const RefVec& dy, const ConvGeom& g) {
  RefVec dw(size_t(g.y.c) * g.kernel * g.kernel_w * (g.x.c / g.groups), 0.0);
  for_macs(g, [&](size_t xi, size_t wi, size_t yi) { dw[wi] += dy[yi] * x[xi]; });
  return dw;
}

RefVec bias_backward_ref(const RefVec& dy, int channels) {
  RefVec db(channels, 0.0);
  for (size_t i = 0; i < dy.size(); ++i) db[i % channels] += dy[i];
  return db;
}

RefVec linear_forward_ref(const RefVec& x, const RefVec& w, const RefVec& b, int batch, int in,
                          int out) {
  RefVec y(size_t(batch) * out, 0.0);
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out; ++o) {
      double acc = b.empty() ? 0.0 : b[o];
      for (int i = 0; i < in; ++i) acc += x[size_t(n) * in + i] * w[size_t(o) * in + i];
      y[size_t(n) * out + o] = acc;
    }
  return y;
}

LinearGradRef linear_backward_ref(const RefVec& x, const RefVec& w, const RefVec& dy, int batch,
                                  int in, int out) {
  LinearGradRef r;
  r.dx.assign(size_t(batch) * in, 0.0);
  r.dw.assign(size_t(out) * in, 0.0);
  r.db.assign(out, 0.0);
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out; ++o) {
      const double d = dy[size_t(n) * out + o];
      r.db[o] += d;
      for (int i = 0; i < in; ++i) {
        r.dx[size_t(n) * in + i] += d * w[size_t(o) * in + i];
        r.dw[size_t(o) * in + i] += d * x[size_t(n) * in + i];
      }
    }
  return r;
}

RefVec dropout_forward_ref(const RefVec& x, const std::vector<uint8_t>& mask, double p) {
  RefVec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = mask[i] ? x[i] / (1 - p) : 0.0;
  return y;
}

RefVec dropout_backward_ref(const RefVec& dy, const std::vector<uint8_t>& mask, double p) {
  return dropout_forward_ref(dy, mask, p);
}

void sgd_step_ref(RefVec& p, const RefVec& g, SgdState& s, const SgdRef& h) {
  RefVec d(p.size());
  for (size_t i = 0; i < p.size(); ++i) d[i] = g[i] + h.weight_decay * p[i];
  if (h.momentum != 0) {
    if (s.momentum_buffer.empty()) {
      s.momentum_buffer = d;
    } else {
      for (size_t i = 0; i < p.size(); ++i)
        s.momentum_buffer[i] = h.momentum * s.momentum_buffer[i] + (1 - h.dampening) * d[i];
    }
    for (size_t i = 0; i < p.size(); ++i)
      d[i] = h.nesterov ? d[i] + h.momentum * s.momentum_buffer[i] : s.momentum_buffer[i];
  }
  for (size_t i = 0; i < p.size(); ++i) p[i] -= h.lr * d[i];
}

void adam_step_ref(RefVec& p, const RefVec& g, AdamState& s, const AdamRef& h) {
  if (s.m.empty()) s.m.assign(p.size(), 0.0), s.v.assign(p.size(), 0.0);
  ++s.step;
  const double bc1 = 1 - std::pow(h.beta1, s.step), bc2 = 1 - std::pow(h.beta2, s.step);
  for (size_t i = 0; i < p.size(); ++i) {
    const double gi = g[i] + h.weight_decay * p[i];
    s.m[i] = h.beta1 * s.m[i] + (1 - h.beta1) * gi;
    s.v[i] = h.beta2 * s.v[i] + (1 - h.beta2) * gi * gi;
    p[i] -= h.lr * (s.m[i] / bc1) / (std::sqrt(s.v[i] / bc2) + h.eps);
  }
}

bool LossScaleRef::update(bool found_inf) {
  if (found_inf) {
    scale *= backoff;
    good_steps = 0;
    return false;
  }
  if (++good_steps == interval) scale *= growth, good_steps = 0;
  return true;
}

}  // namespace cnnbench
