// StyleGAN2's generator (NVlabs stylegan2-ada-pytorch training/networks.py; networks.md 9.1): the
// mapping network (z normalised, `mapping_layers` FC + lrelu at 512) and the synthesis network's
// blocks b4 ... b{resolution} with the 'skip' architecture (each block's ToRGB added to the
// up-sampled image so far). Parameter and buffer names are NVlabs' state_dict's.
#include <algorithm>
#include <cmath>
#include <string>

#include "harness/check.h"
#include "kernels/stylegan_ref.h"
#include "networks/zoo.h"

namespace cnnbench {

Graph stylegan2_generator(int resolution, int channel_base, int mapping_layers) {
  if (resolution < 4 || (resolution & (resolution - 1)))
    throw UserError("stylegan2: the resolution must be a power of two from 4, not " +
                    std::to_string(resolution));
  const int z_dim = 512, w_dim = 512, channel_max = 512;
  Graph g("stylegan2_" + std::to_string(resolution));
  int x = g.normalize_2nd_moment(g.input(z_dim, 1, 1));
  // FullyConnectedLayer(lr_multiplier 0.01): W * 0.01 / sqrt(512), b * 0.01.
  for (int i = 0; i < mapping_layers; ++i) {
    const int fc = g.linear(x, "mapping.fc" + std::to_string(i), w_dim);
    g.set_stylegan_gains(fc, float(0.01 / std::sqrt(double(z_dim))), 0.01f);
    x = g.leaky_relu(fc);
  }
  const int w = x;  // broadcast to every layer (no truncation, no style mixing)
  g.add_buffer("mapping.w_avg", {w_dim});
  auto channels = [&](int res) { return std::min(channel_base / res, channel_max); };
  int img = -1;
  for (int res = 4; res <= resolution; res *= 2) {
    const std::string m = "synthesis.b" + std::to_string(res);
    const int c = channels(res);
    // Affines: W / sqrt(w_dim), b as stored; ToRGB's styles / sqrt(C_in); conv_clamp 256.
    const float affine = float(1.0 / std::sqrt(double(w_dim))), clamp = 256.f;
    if (res == 4) {
      x = g.learned_const(w, m, c, 4);
    } else {
      x = g.modconv(x, w, m + ".conv0", c, 3, 2, true, true);
      g.set_stylegan_gains(x, affine, 1.f, 1.f, clamp);
    }
    const int in_c = c;
    x = g.modconv(x, w, m + ".conv1", c, 3, 1, true, true);
    g.set_stylegan_gains(x, affine, 1.f, 1.f, clamp);
    g.add_buffer(m + ".resample_filter", {4, 4});
    const int rgb = g.modconv(x, w, m + ".torgb", 3, 1, 1, false, false);
    g.set_stylegan_gains(rgb, affine, 1.f, float(1.0 / std::sqrt(double(in_c))), clamp);
    img = img < 0 ? rgb : g.add(g.fir_upsample(img), rgb);
  }
  g.set_output(img);
  return g;
}

namespace {

const std::vector<float>& tensor(const HostWeights& w, const std::string& name) {
  auto it = w.find(name);
  if (it == w.end()) throw UserError("stylegan2 reference: no tensor " + name);
  return it->second;
}

// y [n][out] = x [n][in] @ (W [out][in] * wg)^T + b * bg.
std::vector<float> fc(const std::vector<float>& x, int n, int in, const std::vector<float>& W,
                      const std::vector<float>& b, int out, double wg, double bg) {
  std::vector<float> y(size_t(n) * out);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double acc = 0;
      for (int k = 0; k < in; ++k) acc += double(x[size_t(i) * in + k]) * W[size_t(o) * in + k];
      y[size_t(i) * out + o] = float(acc * wg + double(b[o]) * bg);
    }
  return y;
}

// The modulated conv of one synthesis layer (demodulated) or ToRGB (not), with its up-sampling.
std::vector<float> modulated(const HostWeights& wt, const std::string& m,
                             const std::vector<float>& x, int n, int c, int h,
                             const std::vector<float>& ws, int k, int r, int up, bool demodulate,
                             double style_gain) {
  std::vector<float> styles = fc(ws, n, 512, tensor(wt, m + ".affine.weight"),
                                 tensor(wt, m + ".affine.bias"), c, 1.0 / std::sqrt(512.0), 1.0);
  for (float& s : styles) s = float(s * style_gain);
  const std::vector<float>& W = tensor(wt, m + ".weight");
  if (up == 1) return modconv_reference(x, n, c, h, h, W, k, r, styles, demodulate);
  // conv2d_resample's generic path: upfirdn2d (up 2, padding 3 and 2 for the 4-tap filter and
  // the conv's padding 1, gain 4), then a valid conv with the weight flipped (a true
  // convolution): the same as modconv_reference at padding (r - 1) / 2 on the up-sampled input
  // cropped by one pixel on each side, so it is written out here.
  FirSpec s;
  s.up = 2, s.fh = s.fw = 4, s.gain = 4.f;
  s.pad_x0 = s.pad_y0 = 3, s.pad_x1 = s.pad_y1 = 2;
  std::vector<float> xs(x.size());
  const int hw = h * h;
  for (int i = 0; i < n; ++i)
    for (int ci = 0; ci < c; ++ci)
      for (int p = 0; p < hw; ++p)
        xs[(size_t(i) * c + ci) * hw + p] =
            float(double(x[(size_t(i) * c + ci) * hw + p]) * styles[size_t(i) * c + ci]);
  const std::vector<float> u = upfirdn2d_reference(xs, n, c, h, h, fir_2d(stylegan2_fir_1d()), s);
  const int uh = s.out_h(h), oh = uh - r + 1;  // 2h + 2, then 2h
  const std::vector<float> d = demodulate ? demod_reference(W, k, c, r, r, styles, n)
                                          : std::vector<float>(size_t(n) * k, 1.f);
  std::vector<float> y(size_t(n) * k * oh * oh);
  for (int i = 0; i < n; ++i)
    for (int ki = 0; ki < k; ++ki)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < oh; ++ox) {
          double acc = 0;
          for (int ci = 0; ci < c; ++ci)
            for (int a = 0; a < r; ++a)
              for (int b = 0; b < r; ++b)
                acc += double(u[((size_t(i) * c + ci) * uh + oy + a) * uh + ox + b]) *
                       W[((size_t(ki) * c + ci) * r + (r - 1 - a)) * r + (r - 1 - b)];
          y[((size_t(i) * k + ki) * oh + oy) * oh + ox] = float(acc * d[size_t(i) * k + ki]);
        }
  return y;
}

}  // namespace

std::vector<float> stylegan2_generate_reference(const HostWeights& wt, int resolution,
                                                int channel_base, int mapping_layers,
                                                const std::vector<float>& z, int n,
                                                float conv_clamp) {
  if (z.size() != size_t(n) * 512) throw UserError("stylegan2 reference: z must be [n][512]");
  // Mapping: normalize_2nd_moment, then the FC layers.
  std::vector<float> x(z.size());
  for (int i = 0; i < n; ++i) {
    double ms = 0;
    for (int k = 0; k < 512; ++k) ms += double(z[size_t(i) * 512 + k]) * z[size_t(i) * 512 + k];
    const double r = 1.0 / std::sqrt(ms / 512 + 1e-8);
    for (int k = 0; k < 512; ++k) x[size_t(i) * 512 + k] = float(z[size_t(i) * 512 + k] * r);
  }
  BiasActSpec lrelu;  // slope 0.2, gain sqrt(2), no clamp
  for (int l = 0; l < mapping_layers; ++l) {
    const std::string m = "mapping.fc" + std::to_string(l);
    x = fc(x, n, 512, tensor(wt, m + ".weight"), tensor(wt, m + ".bias"), 512,
           0.01 / std::sqrt(512.0), 0.01);
    x = bias_act_reference(x, n, 512, 1, 1, {}, {}, lrelu);
  }
  const std::vector<float> ws = x;
  auto channels = [&](int res) { return std::min(channel_base / res, 512); };
  BiasActSpec act;
  act.clamp = conv_clamp;
  BiasActSpec rgb_act;
  rgb_act.slope = 1.f, rgb_act.gain = 1.f, rgb_act.clamp = conv_clamp;
  std::vector<float> img;
  for (int res = 4; res <= resolution; res *= 2) {
    const std::string b = "synthesis.b" + std::to_string(res);
    const int c = channels(res);
    auto layer = [&](const std::string& m, const std::vector<float>& in, int cin, int hin, int up) {
      std::vector<float> y = modulated(wt, m, in, n, cin, hin, ws, c, 3, up, true, 1.0);
      BiasActSpec s = act;
      s.noise_strength = tensor(wt, m + ".noise_strength").at(0);
      return bias_act_reference(y, n, c, res, res, tensor(wt, m + ".bias"),
                                tensor(wt, m + ".noise_const"), s);
    };
    if (res == 4) {
      const std::vector<float>& k = tensor(wt, b + ".const");
      x.clear();
      for (int i = 0; i < n; ++i) x.insert(x.end(), k.begin(), k.end());
      x = layer(b + ".conv1", x, c, 4, 1);
    } else {
      const int cin = channels(res / 2);
      x = layer(b + ".conv0", x, cin, res / 2, 2);
      x = layer(b + ".conv1", x, c, res, 1);
    }
    std::vector<float> y =
        modulated(wt, b + ".torgb", x, n, c, res, ws, 3, 1, 1, false, 1.0 / std::sqrt(double(c)));
    y = bias_act_reference(y, n, 3, res, res, tensor(wt, b + ".torgb.bias"), {}, rgb_act);
    if (!img.empty()) {
      const std::vector<float> upi = upfirdn2d_reference(
          img, n, 3, res / 2, res / 2, fir_2d(stylegan2_fir_1d()), upsample2d_spec(4));
      for (size_t i = 0; i < y.size(); ++i) y[i] += upi[i];
    }
    img = y;
  }
  return img;
}

namespace {

// The geometric progressions of SynthesisNetwork.__init__ and compute_superres_filterparams:
// cutoffs and stopbands from the first to resolution / 2 and its 2^0.3 multiple over num_layers
// - num_critical layers, the sampling rates their powers of two, margins of 10, channels from the
// cutoffs, the last ToRGB's 3; entry 0's rate and channels replaced where first_rate and
// first_channels are given (a SuperresGenerator head continues its stem's last layer).
std::vector<Sg3Layer> progression(double first_cutoff, double first_stopband, int resolution,
                                  int num_layers, int num_critical, int channel_base,
                                  int channel_max, double first_rate = 0, int first_channels = 0) {
  const double last_cutoff = resolution / 2.0, last_stopband = last_cutoff * std::exp2(0.3);
  std::vector<Sg3Layer> out;
  for (int i = 0; i <= num_layers; ++i) {
    const double e = std::min(double(i) / (num_layers - num_critical), 1.0);
    Sg3Layer l;
    l.cutoff = first_cutoff * std::pow(last_cutoff / first_cutoff, e);
    l.stopband = first_stopband * std::pow(last_stopband / first_stopband, e);
    l.sampling_rate =
        i == 0 && first_rate > 0
            ? first_rate
            : std::exp2(std::ceil(std::log2(std::min(l.stopband * 2, double(resolution)))));
    l.half_width = std::max(l.stopband, l.sampling_rate / 2) - l.cutoff;
    l.size = i >= num_layers - 1 ? resolution : int(l.sampling_rate) + 2 * 10;
    // np.rint: to the nearest, halves to even, as nearbyint in the default rounding mode.
    l.channels =
        i == 0 && first_channels > 0 ? first_channels
        : i == num_layers
            ? 3
            : int(std::nearbyint(std::min(channel_base / 2.0 / l.cutoff, double(channel_max))));
    l.name =
        "L" + std::to_string(i) + "_" + std::to_string(l.size) + "_" + std::to_string(l.channels);
    out.push_back(l);
  }
  return out;
}

}  // namespace

std::vector<Sg3Layer> stylegan3_schedule(int resolution, int channel_base, int channel_max,
                                         int num_layers, int num_critical) {
  // SynthesisNetwork.__init__: first_cutoff 2, first_stopband 2^2.1.
  return progression(2, std::exp2(2.1), resolution, num_layers, num_critical, channel_base,
                     channel_max);
}

namespace {

// One SynthesisLayer from `in`'s output to `out`'s (networks_stylegan3.py SynthesisLayer.__init__):
// the lrelu runs at twice the larger rate (but in ToRGB); each factor's filter has filter_size
// taps per unit of the factor where the factor exceeds 1; the padding is the size wanted before
// the down-sampling, less the conv's output (padding k - 1) up-sampled, plus what the filters
// take, its low side shifted by the symmetric convention. Affine W / sqrt(w_dim); ToRGB's styles
// / sqrt(C_in k k) and the synthesis' output_scale 0.25; conv_clamp 256.
int synthesis_layer(Graph& g, int x, int w, const std::string& name, const Sg3Layer& in,
                    const Sg3Layer& out, bool torgb, bool radial, int kernel, int w_dim) {
  const int filter_size = 6;
  Sg3Spec f;
  f.torgb = torgb;
  const int k = torgb ? 1 : kernel;
  f.fs = std::max(in.sampling_rate, out.sampling_rate) * (torgb ? 1 : 2);
  f.up = int(std::nearbyint(f.fs / in.sampling_rate));
  f.down = int(std::nearbyint(f.fs / out.sampling_rate));
  f.up_taps = f.up > 1 && !torgb ? filter_size * f.up : 1;
  f.down_taps = f.down > 1 && !torgb ? filter_size * f.down : 1;
  f.up_cutoff = in.cutoff, f.up_width = in.half_width * 2;
  f.down_cutoff = out.cutoff, f.down_width = out.half_width * 2;
  f.radial = radial;
  const int pad_total =
      (out.size - 1) * f.down + 1 - (in.size + k - 1) * f.up + f.up_taps + f.down_taps - 2;
  f.pad_lo = (pad_total + f.up) >= 0 ? (pad_total + f.up) / 2 : -((-(pad_total + f.up) + 1) / 2);
  f.pad_hi = pad_total - f.pad_lo;
  f.out_scale = torgb ? 0.25f : 1.f;
  const int y = g.filtered_modconv(x, w, "synthesis." + name, out.channels, k, out.size, f);
  g.set_stylegan_gains(y, float(1.0 / std::sqrt(double(w_dim))), 1.f,
                       torgb ? float(1.0 / std::sqrt(double(in.channels) * k * k)) : 1.f, 256.f);
  return y;
}

// SynthesisInput from the first layer's schedule: FullyConnectedLayer(w_dim, 4), W / sqrt(w_dim).
int synthesis_input(Graph& g, int w, const Sg3Layer& first, int w_dim) {
  const int x = g.fourier_input(w, "synthesis.input", first.channels, first.size,
                                first.sampling_rate, first.cutoff);
  g.set_stylegan_gains(x, float(1.0 / std::sqrt(double(w_dim))), 1.f);
  return x;
}

// The mapping's FullyConnectedLayers (lr_multiplier 0.01, lrelu): W * 0.01 / sqrt(in), b * 0.01.
int mapping_layers_of(Graph& g, int x, int layers, int w_dim) {
  for (int i = 0; i < layers; ++i) {
    const int in = g.node(x).out.c;
    const int fc = g.linear(x, "mapping.fc" + std::to_string(i), w_dim);
    g.set_stylegan_gains(fc, float(0.01 / std::sqrt(double(in))), 0.01f);
    x = g.leaky_relu(fc);
  }
  return x;
}

}  // namespace

Graph stylegan3_generator(int resolution, bool r_config, int mapping_layers, int cbase, int cmax) {
  if (resolution < 16 || (resolution & (resolution - 1)))
    throw UserError("stylegan3: the resolution must be a power of two from 16, not " +
                    std::to_string(resolution));
  // train.py: stylegan3-t cbase 32768, cmax 512, kernel 3; -r doubles both, kernel 1, radial.
  const int channel_base = cbase > 0 ? cbase : r_config ? 65536 : 32768;
  const int channel_max = cmax > 0 ? cmax : r_config ? 1024 : 512;
  const int kernel = r_config ? 1 : 3, num_layers = 14, num_critical = 2;
  const int z_dim = 512, w_dim = 512;
  Graph g(std::string(r_config ? "stylegan3_r_" : "stylegan3_t_") + std::to_string(resolution));
  const int w = mapping_layers_of(g, g.normalize_2nd_moment(g.input(z_dim, 1, 1)), mapping_layers,
                                  w_dim);  // broadcast (no truncation)
  g.add_buffer("mapping.w_avg", {w_dim});
  const std::vector<Sg3Layer> s =
      stylegan3_schedule(resolution, channel_base, channel_max, num_layers, num_critical);
  int x = synthesis_input(g, w, s[0], w_dim);
  for (int i = 0; i <= num_layers; ++i) {
    const bool critical = i >= num_layers - num_critical;
    x = synthesis_layer(g, x, w, s[i].name, s[std::max(i - 1, 0)], s[i], i == num_layers,
                        r_config && !critical, kernel, w_dim);
  }
  g.set_output(x);
  return g;
}

std::vector<Sg3Layer> stylegan_xl_head_schedule(const Sg3Layer& last, int resolution,
                                                int head_layers, int channel_base, int channel_max,
                                                int num_critical) {
  // compute_superres_filterparams: from the last stem layer's output (its cutoff, stopband,
  // sampling rate and channels) to the new resolution's.
  return progression(last.cutoff, last.half_width + last.cutoff, resolution, head_layers,
                     num_critical, channel_base, channel_max, last.sampling_rate, last.channels);
}

Graph stylegan_xl_generator(int resolution, int syn_layers, int head_layers, int stem_resolution,
                            int classes, int cbase, int cmax) {
  if (stem_resolution < 16 || (stem_resolution & (stem_resolution - 1)) ||
      resolution < stem_resolution || (resolution & (resolution - 1)))
    throw UserError("stylegan_xl: the resolution must be a power of two from the stem's " +
                    std::to_string(stem_resolution) + ", not " + std::to_string(resolution));
  if (classes < 1 || classes > 1000)
    throw UserError(
        "stylegan_xl: the class embedding has 1,000 rows; num_classes must be 1 to "
        "1000, not " +
        std::to_string(classes));
  // train.py for StyleGAN-XL: stylegan3-t with cbase and cmax doubled, z 64, mapping depth 2.
  const int channel_base = cbase > 0 ? cbase : 65536, channel_max = cmax > 0 ? cmax : 1024;
  const int kernel = 3, num_critical = 2;
  if (syn_layers <= num_critical || head_layers <= num_critical)
    throw UserError(
        "stylegan_xl: syn_layers and head_layers must exceed the 2 critically sampled "
        "layers");
  const int z_dim = 64, w_dim = 512, embed_dim = 320;
  Graph g("stylegan_xl_" + std::to_string(resolution));
  const int c = g.class_embed(g.input(z_dim + classes, 1, 1), "mapping", z_dim, 1000, embed_dim);
  g.set_stylegan_gains(c, float(1.0 / std::sqrt(double(embed_dim))), 1.f);  // embed_proj
  const int w = mapping_layers_of(g, c, 2, w_dim);
  g.add_buffer("mapping.w_avg", {classes, w_dim});  // per class
  // The stem at stem_resolution (its SynthesisNetwork), then one SuperresGenerator stage per
  // doubling: the critically sampled layers and ToRGB cut off, head_layers + ToRGB appended,
  // numbered on from the layers kept + 1.
  struct Planned {
    std::string name;
    Sg3Layer in, out;
    bool torgb;
  };
  std::vector<Planned> layers;
  const std::vector<Sg3Layer> stem =
      stylegan3_schedule(stem_resolution, channel_base, channel_max, syn_layers, num_critical);
  for (int i = 0; i <= syn_layers; ++i)
    layers.push_back({stem[i].name, stem[std::max(i - 1, 0)], stem[i], i == syn_layers});
  auto cut = [&](int critical_and_rgb) { layers.resize(layers.size() - critical_and_rgb); };
  for (int res = stem_resolution * 2; res <= resolution; res *= 2) {
    cut(num_critical + 1);
    const int stem_len = int(layers.size()) + 1;
    const std::vector<Sg3Layer> h = stylegan_xl_head_schedule(
        layers.back().out, res, head_layers, channel_base, channel_max, num_critical);
    for (int i = 0; i <= head_layers; ++i) {
      const std::string name = "L" + std::to_string(i + stem_len) + "_" +
                               std::to_string(h[i].size) + "_" + std::to_string(h[i].channels);
      layers.push_back({name, h[std::max(i - 1, 0)], h[i], i == head_layers});
    }
  }
  int x = synthesis_input(g, w, stem[0], w_dim);
  for (const Planned& l : layers)
    x = synthesis_layer(g, x, w, l.name, l.in, l.out, l.torgb, false, kernel, w_dim);
  g.set_output(x);
  return g;
}

void stylegan3_random_buffers(HostWeights& w) {
  auto ends_with = [](const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  for (auto& [name, v] : w) {
    if (name.rfind("mapping.fc", 0) == 0 && ends_with(name, ".weight")) {
      for (float& e : v) e *= 100.f;  // randn / lr_multiplier: the used weight is unit-scale
    } else if (name.rfind("synthesis.", 0) == 0 && ends_with(name, ".weight") &&
               !ends_with(name, ".affine.weight")) {
      for (float& e : v) e = (e - 0.75f) * 4.f;  // signed: U(0.5, 1) -> U(-1, 1), as randn is
    } else if (name == "synthesis.input.affine.bias") {
      v = {1.f, 0.f, 0.f, 0.f};  // bias_init [1, 0, 0, 0]: no rotation, no translation
    } else if (ends_with(name, ".affine.bias")) {
      for (float& e : v) e += 1.f;  // bias_init 1
    } else if (ends_with(name, ".magnitude_ema")) {
      for (float& e : v) e = 1.25f + 0.75f * e;
    } else if (name == "synthesis.input.transform") {
      for (size_t i = 0; i < v.size(); ++i) v[i] = i % 4 == 0 ? 1.f : 0.f;
    } else if (name == "synthesis.input.phases") {
      for (float& e : v) e *= 0.5f;
    } else if (name == "synthesis.input.freqs") {
      const double bandwidth = 2;  // SynthesisNetwork's first_cutoff, whatever the resolution
      for (size_t c = 0; c + 1 < v.size(); c += 2) {
        const double r = std::max(std::hypot(double(v[c]), double(v[c + 1])), 1e-3);
        const double s = bandwidth / (r * std::pow(std::exp(r * r), 0.25));
        v[c] = float(v[c] * s), v[c + 1] = float(v[c + 1] * s);
      }
    }
  }
}

}  // namespace cnnbench
