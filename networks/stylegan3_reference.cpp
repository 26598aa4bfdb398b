// StyleGAN3's generator on the host (networks/stylegan3_reference.h): the graph's nodes in order,
// each as NVlabs' networks_stylegan3.py computes it, in double with float tensors between nodes.
#include "networks/stylegan3_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/check.h"
#include "kernels/fir_design.h"
#include "kernels/stylegan3_ref.h"

namespace cnnbench {

namespace {

const std::vector<float>& tensor(const HostWeights& w, const std::string& name, size_t count) {
  auto it = w.find(name);
  if (it == w.end()) throw UserError("stylegan3 reference: no tensor " + name);
  if (it->second.size() != count)
    throw UserError("stylegan3 reference: tensor " + name + " has " +
                    std::to_string(it->second.size()) + " values, not " + std::to_string(count));
  return it->second;
}

// y [n][out] = x [n][in] @ (W [out][in] * wg)^T + b * bg.
std::vector<float> fc(const std::vector<float>& x, int n, int in, const std::vector<float>& W,
                      const std::vector<float>* b, int out, double wg, double bg) {
  std::vector<float> y(size_t(n) * out);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double acc = 0;
      const float* xp = &x[size_t(i) * in];
      const float* wp = &W[size_t(o) * in];
      for (int k = 0; k < in; ++k) acc += double(xp[k]) * wp[k];
      y[size_t(i) * out + o] = float(acc * wg + (b ? double((*b)[size_t(o)]) * bg : 0.0));
    }
  return y;
}

std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// SynthesisLayer: modulated_conv2d (pre-normalisation, modulation, demodulation, input gain; a
// cross-correlation with padding k - 1) and filtered_lrelu. x [n][cin][h][h] -> node.out.
std::vector<float> synthesis_layer(const Graph& g, const Node& nd, const HostWeights& wt,
                                   const std::vector<float>& x, int n,
                                   const std::vector<float>& ws) {
  const Dims in = g.node(nd.inputs[0]).out;
  const int wdim = g.node(nd.inputs[1]).out.c;
  const int cin = in.c, h = in.h, wd = in.w, cout = nd.out.c, k = nd.kernel;
  const Sg3Spec& f = nd.sg3;
  const std::string& m = nd.name;
  const std::vector<float>& W = tensor(wt, m + ".weight", size_t(cout) * cin * k * k);
  const std::vector<float>& bias = tensor(wt, m + ".bias", size_t(cout));
  const std::vector<float>& ab = tensor(wt, m + ".affine.bias", size_t(cin));
  std::vector<float> styles = fc(ws, n, wdim, tensor(wt, m + ".affine.weight", size_t(cin) * wdim),
                                 &ab, cin, nd.weight_gain, 1.0);
  const double input_gain = 1.0 / std::sqrt(double(tensor(wt, m + ".magnitude_ema", 1)[0]));
  const bool demod = !f.torgb;
  const size_t kk = size_t(k) * k, per_out = size_t(cin) * kk;

  // Styles: the style gain (ToRGB), then, where demodulating, the RMS over the whole batch.
  std::vector<double> s(styles.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = double(styles[i]) * nd.style_gain;
  std::vector<double> w0(W.begin(), W.end());
  if (demod) {
    double ms = 0;
    for (double v : s) ms += v * v;
    const double r = 1.0 / std::sqrt(ms / double(s.size()));
    for (double& v : s) v *= r;
    for (int o = 0; o < cout; ++o) {
      double sq = 0;
      for (size_t q = 0; q < per_out; ++q) sq += w0[o * per_out + q] * w0[o * per_out + q];
      const double rr = 1.0 / std::sqrt(sq / double(per_out));
      for (size_t q = 0; q < per_out; ++q) w0[o * per_out + q] *= rr;
    }
  }

  const int pad = k - 1, oh = h + k - 1, ow = wd + k - 1;
  std::vector<float> conv(size_t(n) * cout * oh * ow);
  std::vector<double> wn(per_out), acc(size_t(oh) * ow);
  for (int ni = 0; ni < n; ++ni) {
    const double* sp = &s[size_t(ni) * cin];
    for (int o = 0; o < cout; ++o) {
      // This image's weight for output channel o.
      double sq = 0;
      for (int i = 0; i < cin; ++i)
        for (size_t q = 0; q < kk; ++q) {
          const double v = w0[size_t(o) * per_out + i * kk + q] * sp[i];
          wn[i * kk + q] = v;
          sq += v * v;
        }
      const double d = (demod ? 1.0 / std::sqrt(sq + 1e-8) : 1.0) * input_gain;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int i = 0; i < cin; ++i) {
        const float* xp = &x[(size_t(ni) * cin + i) * h * wd];
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) {
            const double v = wn[i * kk + size_t(a) * k + b] * d;
            // out[oy][ox] += v * x[oy + a - pad][ox + b - pad] where inside.
            const int x_lo = std::max(0, pad - b), x_hi = std::min(ow, wd + pad - b);
            for (int oy = std::max(0, pad - a); oy < std::min(oh, h + pad - a); ++oy) {
              const float* row = xp + size_t(oy + a - pad) * wd + (b - pad);
              double* arow = &acc[size_t(oy) * ow];
              for (int ox = x_lo; ox < x_hi; ++ox) arow[ox] += v * row[ox];
            }
          }
      }
      float* cp = &conv[(size_t(ni) * cout + o) * oh * ow];
      for (size_t p = 0; p < acc.size(); ++p) cp[p] = float(acc[p]);
    }
  }

  FilteredLreluSpec fs;
  fs.up = f.up, fs.down = f.down;
  fs.pad_x0 = fs.pad_y0 = f.pad_lo;
  fs.pad_x1 = fs.pad_y1 = f.pad_hi;
  fs.gain = f.torgb ? 1.f : float(std::sqrt(2.0));
  fs.slope = f.torgb ? 1.f : 0.2f;
  fs.clamp = nd.clamp;
  fs.out_scale = f.out_scale;
  const std::vector<float> fu =
      to_float(design_lowpass_filter(f.up_taps, f.up_cutoff, f.up_width, f.fs));
  const std::vector<float> fd =
      to_float(design_lowpass_filter(f.down_taps, f.down_cutoff, f.down_width, f.fs, f.radial));
  const int fut = f.up_taps, fdt = f.down_taps;
  if (fs.out_h(oh, fut, fdt) != nd.out.h || fs.out_w(ow, fut, fdt) != nd.out.w)
    throw std::logic_error("stylegan3 reference: " + m + " gives " +
                           std::to_string(fs.out_h(oh, fut, fdt)) + " px, the graph says " +
                           std::to_string(nd.out.h));
  return filtered_lrelu_reference(conv, n, cout, oh, ow, fu, fd, f.radial, bias, fs);
}

}  // namespace

std::vector<float> stylegan3_generate_reference(const Graph& g, const HostWeights& w,
                                                const std::vector<float>& z, int n) {
  const std::vector<Node>& nodes = g.nodes();
  std::vector<std::vector<float>> val(nodes.size());
  auto numel = [&](int id) {
    const Dims& d = nodes[size_t(id)].out;
    return size_t(d.c) * d.h * d.w;
  };
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& nd = nodes[id];
    std::vector<float>& y = val[id];
    switch (nd.kind) {
      case OpKind::Input:
        if (z.size() != size_t(n) * numel(int(id)))
          throw UserError("stylegan3 reference: z has " + std::to_string(z.size()) +
                          " values, not n x " + std::to_string(numel(int(id))) +
                          " for n = " + std::to_string(n));
        y = z;
        break;
      case OpKind::Normalize2ndMoment: {
        const std::vector<float>& x = val[size_t(nd.inputs[0])];
        const size_t c = numel(nd.inputs[0]);
        y.resize(x.size());
        for (int i = 0; i < n; ++i) {
          double ms = 0;
          for (size_t k = 0; k < c; ++k) ms += double(x[i * c + k]) * x[i * c + k];
          const double r = 1.0 / std::sqrt(ms / double(c) + 1e-8);
          for (size_t k = 0; k < c; ++k) y[i * c + k] = float(x[i * c + k] * r);
        }
        break;
      }
      case OpKind::Linear: {
        const int in = int(numel(nd.inputs[0])), out = nd.out.c;
        const std::string& wn = g.params()[size_t(nd.params.at(0))].name;
        const std::vector<float>* b = nullptr;
        if (nd.bias) b = &tensor(w, g.params()[size_t(nd.params.at(1))].name, size_t(out));
        y = fc(val[size_t(nd.inputs[0])], n, in, tensor(w, wn, size_t(out) * in), b, out,
               nd.weight_gain, nd.bias_gain);
        break;
      }
      case OpKind::LeakyReLU: {
        y = val[size_t(nd.inputs[0])];
        const double gain = std::sqrt(2.0);
        for (float& v : y) v = float((v >= 0 ? double(v) : v * 0.2) * gain);
        break;
      }
      case OpKind::ClassEmbed: {  // StyleGAN-XL: z normalised beside the projected class embed
        const std::vector<float>& x = val[size_t(nd.inputs[0])];
        const int zd = nd.out.c / 2, in = int(numel(nd.inputs[0])), classes = in - zd;
        const std::vector<int64_t>& es = g.params()[size_t(nd.params.at(0))].shape;
        const int rows = int(es[0]), ed = int(es[1]);
        const std::vector<float>& e =
            tensor(w, g.params()[size_t(nd.params[0])].name, size_t(rows) * ed);
        const std::vector<float>& pw =
            tensor(w, g.params()[size_t(nd.params[1])].name, size_t(zd) * ed);
        const std::vector<float>& pb = tensor(w, g.params()[size_t(nd.params[2])].name, size_t(zd));
        y.assign(size_t(n) * 2 * zd, 0.f);
        for (int i = 0; i < n; ++i) {
          const float* xi = x.data() + size_t(i) * in;
          int cls = 0;  // torch.argmax: the first of equal maxima
          for (int j = 1; j < classes; ++j)
            if (xi[zd + j] > xi[zd + cls]) cls = j;
          if (cls >= rows) throw UserError("stylegan3 reference: class beyond the embedding");
          std::vector<double> p(static_cast<size_t>(zd));
          double mz = 0, mp = 0;
          for (int k = 0; k < zd; ++k) {
            double acc = 0;
            for (int j = 0; j < ed; ++j)
              acc += double(e[size_t(cls) * ed + j]) * pw[size_t(k) * ed + j];
            const double v = acc * nd.weight_gain + double(pb[size_t(k)]) * nd.bias_gain;
            p[size_t(k)] = (v >= 0 ? v : 0.2 * v) * std::sqrt(2.0);
            mz += double(xi[k]) * xi[k], mp += p[size_t(k)] * p[size_t(k)];
          }
          const double rz = 1.0 / std::sqrt(mz / zd + 1e-8), rp = 1.0 / std::sqrt(mp / zd + 1e-8);
          for (int k = 0; k < zd; ++k) {
            y[size_t(i) * 2 * zd + k] = float(xi[k] * rz);
            y[size_t(i) * 2 * zd + zd + k] = float(p[size_t(k)] * rp);
          }
        }
        break;
      }
      case OpKind::FourierInput: {
        const int wdim = int(numel(nd.inputs[0])), c = nd.out.c;
        const std::string& m = nd.name;
        y = fourier_input_reference(
            val[size_t(nd.inputs[0])], n, wdim, tensor(w, m + ".affine.weight", 4 * size_t(wdim)),
            tensor(w, m + ".affine.bias", 4), nd.weight_gain, tensor(w, m + ".transform", 9),
            tensor(w, m + ".freqs", 2 * size_t(c)), tensor(w, m + ".phases", size_t(c)),
            tensor(w, m + ".weight", size_t(c) * c), c, nd.out.h, nd.sg3.fs, nd.sg3.up_cutoff);
        break;
      }
      case OpKind::FilteredModConv:
        y = synthesis_layer(g, nd, w, val[size_t(nd.inputs[0])], n, val[size_t(nd.inputs[1])]);
        break;
      default:
        throw UserError(std::string("stylegan3 reference: no host form of op ") +
                        op_kind_name(nd.kind) + " (node " + nd.name + ")");
    }
  }
  if (g.output() < 0) throw UserError("stylegan3 reference: the graph has no output");
  return val[size_t(g.output())];
}

}  // namespace cnnbench
