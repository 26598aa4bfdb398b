// The graph interpreter of the tests (CPU): every node of a graph run in double, NCHW, from
// weights named as the graph names them. The GPU tests hold compiled models to it; CPU tests run
// it against other references (PyTorch cases).
#pragma once

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "networks/graph.h"
#include "networks/weights.h"

namespace cnnbench::test {

// Runs the graph node by node in double, NCHW, from torchvision-layout weights (looked up by
// each node's parameter roles, so MXNet-named graphs run too).
// Every node's value for input x, NCHW, in double.
inline std::vector<std::vector<double>> interpret_values(const Graph& g, const HostWeights& w,
                                                         const std::vector<float>& x, int batch) {
  const auto& nodes = g.nodes();
  auto param = [&](const Node& n, size_t i) -> const std::vector<float>& {
    return w.at(g.params()[n.params[i]].name);
  };
  std::vector<std::vector<double>> v(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    const Dims o = n.out;
    const size_t per = size_t(o.c) * o.h * o.w;
    std::vector<double>& y = v[id];
    y.assign(per * batch, 0.0);
    if (n.kind == OpKind::Input) {
      y.assign(x.begin(), x.end());
      continue;
    }
    const std::vector<double>& a = v[n.inputs[0]];
    const Dims in = nodes[n.inputs[0]].out;
    auto at = [&](const std::vector<double>& t, const Dims& d, int b, int c, int h, int ww) {
      return t[((size_t(b) * d.c + c) * d.h + h) * d.w + ww];
    };
    auto out = [&](int b, int c, int h, int ww) -> double& {
      return y[((size_t(b) * o.c + c) * o.h + h) * o.w + ww];
    };
    switch (n.kind) {
      case OpKind::Conv: {
        const auto& W = param(n, 0);
        const int R = n.kernel, S = n.kernel_w, cg = in.c / n.groups, kg = o.c / n.groups;
        for (int b = 0; b < batch; ++b)
          for (int k = 0; k < o.c; ++k)
            for (int oh = 0; oh < o.h; ++oh)
              for (int ow = 0; ow < o.w; ++ow) {
                double acc = n.bias ? param(n, 1)[k] : 0.0;
                const int g0 = (k / kg) * cg;
                for (int c = 0; c < cg; ++c)
                  for (int r = 0; r < R; ++r) {
                    const int ih = oh * n.stride - n.pad + r;
                    if (ih < 0 || ih >= in.h) continue;
                    for (int q = 0; q < S; ++q) {
                      const int iw = ow * n.stride - n.pad_w + q;
                      if (iw < 0 || iw >= in.w) continue;
                      acc +=
                          at(a, in, b, g0 + c, ih, iw) * W[((size_t(k) * cg + c) * R + r) * S + q];
                    }
                  }
                out(b, k, oh, ow) = acc;
              }
        break;
      }
      case OpKind::BatchNorm: {
        const auto &ga = param(n, 0), &be = param(n, 1), &mu = param(n, 2), &va = param(n, 3);
        for (size_t i = 0; i < y.size(); ++i) {
          const int c = int((i / (size_t(o.h) * o.w)) % o.c);
          y[i] = (a[i] - mu[c]) / std::sqrt(double(va[c]) + n.eps) * ga[c] + be[c];
        }
        break;
      }
      case OpKind::ReLU:
        for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(a[i], 0.0);
        break;
      case OpKind::SiLU:
        for (size_t i = 0; i < y.size(); ++i) y[i] = a[i] / (1.0 + std::exp(-a[i]));
        break;
      case OpKind::Sigmoid:
        for (size_t i = 0; i < y.size(); ++i) y[i] = 1.0 / (1.0 + std::exp(-a[i]));
        break;
      case OpKind::Add:
        for (size_t i = 0; i < y.size(); ++i) y[i] = a[i] + v[n.inputs[1]][i];
        break;
      case OpKind::Scale: {
        const std::vector<double>& gate = v[n.inputs[1]];
        for (size_t i = 0; i < y.size(); ++i) {
          const size_t bc = i / (size_t(o.h) * o.w);  // b * C + c
          y[i] = a[i] * gate[bc];
        }
        break;
      }
      case OpKind::Concat: {
        int c0 = 0;
        for (int src : n.inputs) {
          const Dims d = nodes[src].out;
          for (int b = 0; b < batch; ++b)
            for (int c = 0; c < d.c; ++c)
              for (int h = 0; h < d.h; ++h)
                for (int ww = 0; ww < d.w; ++ww) out(b, c0 + c, h, ww) = at(v[src], d, b, c, h, ww);
          c0 += d.c;
        }
        break;
      }
      case OpKind::LRN:
        for (int b = 0; b < batch; ++b)
          for (int c = 0; c < o.c; ++c)
            for (int h = 0; h < o.h; ++h)
              for (int ww = 0; ww < o.w; ++ww) {
                double sq = 0;
                for (int j = c - (n.lrn_size - 1) / 2; j <= c + n.lrn_size / 2; ++j)
                  if (j >= 0 && j < o.c) sq += at(a, in, b, j, h, ww) * at(a, in, b, j, h, ww);
                out(b, c, h, ww) = at(a, in, b, c, h, ww) /
                                   std::pow(n.lrn_k + n.lrn_alpha / n.lrn_size * sq, n.lrn_beta);
              }
        break;
      case OpKind::Upsample:  // nearest, by n.stride
        for (int b = 0; b < batch; ++b)
          for (int c = 0; c < o.c; ++c)
            for (int oh = 0; oh < o.h; ++oh)
              for (int ow = 0; ow < o.w; ++ow)
                out(b, c, oh, ow) = at(a, in, b, c, oh / n.stride, ow / n.stride);
        break;
      case OpKind::MaxPool:
      case OpKind::AvgPool:
        for (int b = 0; b < batch; ++b)
          for (int c = 0; c < o.c; ++c)
            for (int oh = 0; oh < o.h; ++oh)
              for (int ow = 0; ow < o.w; ++ow) {
                double m = -DBL_MAX, s = 0;
                int count = 0;
                for (int r = 0; r < n.kernel; ++r)
                  for (int q = 0; q < n.kernel; ++q) {
                    const int ih = oh * n.stride - n.pad + r, iw = ow * n.stride - n.pad + q;
                    if (ih >= 0 && ih < in.h && iw >= 0 && iw < in.w) {
                      m = std::max(m, at(a, in, b, c, ih, iw));
                      s += at(a, in, b, c, ih, iw);
                      ++count;
                    }
                  }
                const int h0 = oh * n.stride - n.pad, w0 = ow * n.stride - n.pad;
                const int padded = (std::min(h0 + n.kernel, in.h + n.pad) - h0) *
                                   (std::min(w0 + n.kernel, in.w + n.pad) - w0);
                out(b, c, oh, ow) = n.kind == OpKind::MaxPool
                                        ? m
                                        : s / (n.count_include_pad ? padded : std::max(count, 1));
              }
        break;
      case OpKind::GlobalAvgPool:
        for (int b = 0; b < batch; ++b)
          for (int c = 0; c < o.c; ++c) {
            double s = 0;
            for (int i = 0; i < in.h * in.w; ++i) s += a[(size_t(b) * in.c + c) * in.h * in.w + i];
            y[size_t(b) * o.c + c] = s / (in.h * in.w);
          }
        break;
      case OpKind::AdaptiveAvgPool:
        for (int b = 0; b < batch; ++b)
          for (int c = 0; c < o.c; ++c)
            for (int oh = 0; oh < o.h; ++oh)
              for (int ow = 0; ow < o.w; ++ow) {
                const int h0 = oh * in.h / o.h, h1 = ((oh + 1) * in.h + o.h - 1) / o.h;
                const int w0 = ow * in.w / o.w, w1 = ((ow + 1) * in.w + o.w - 1) / o.w;
                double s = 0;
                for (int h = h0; h < h1; ++h)
                  for (int ww = w0; ww < w1; ++ww) s += at(a, in, b, c, h, ww);
                out(b, c, oh, ow) = s / ((h1 - h0) * (w1 - w0));
              }
        break;
      case OpKind::Flatten:
      case OpKind::Dropout:  // the identity at inference
        y = a;
        break;
      case OpKind::Linear: {
        const auto& W = param(n, 0);
        for (int b = 0; b < batch; ++b)
          for (int k = 0; k < o.c; ++k) {
            double acc = n.bias ? param(n, 1)[k] : 0.0;
            for (int i = 0; i < in.c; ++i) acc += a[size_t(b) * in.c + i] * W[size_t(k) * in.c + i];
            y[size_t(b) * o.c + k] = acc;
          }
        break;
      }
      default:
        ADD_FAILURE() << "interpreter lacks " << op_kind_name(n.kind);
    }
  }
  return v;
}

// The graph's output for input x, NCHW, in double.
inline std::vector<double> interpret(const Graph& g, const HostWeights& w,
                                     const std::vector<float>& x, int batch) {
  return interpret_values(g, w, x, batch)[g.output()];
}

}  // namespace cnnbench::test
