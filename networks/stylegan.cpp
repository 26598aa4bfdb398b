// StyleGAN2's generator (NVlabs stylegan2-ada-pytorch training/networks.py; networks.md 9.1): the
// mapping network (z normalised, `mapping_layers` FC + lrelu at 512) and the synthesis network's
// blocks b4 ... b{resolution} with the 'skip' architecture (each block's ToRGB added to the
// up-sampled image so far). Parameter and buffer names are NVlabs' state_dict's.
#include <algorithm>
#include <cmath>
#include <string>

#include "harness/check.h"
#include "networks/zoo.h"

namespace cnnbench {

Graph stylegan2_generator(int resolution, int channel_base, int mapping_layers) {
  if (resolution < 4 || (resolution & (resolution - 1)))
    throw UserError("stylegan2: the resolution must be a power of two from 4, not " +
                    std::to_string(resolution));
  const int z_dim = 512, w_dim = 512, channel_max = 512;
  Graph g("stylegan2_" + std::to_string(resolution));
  int x = g.normalize_2nd_moment(g.input(z_dim, 1, 1));
  for (int i = 0; i < mapping_layers; ++i)
    x = g.leaky_relu(g.linear(x, "mapping.fc" + std::to_string(i), w_dim));
  const int w = x;  // broadcast to every layer (no truncation, no style mixing)
  g.add_buffer("mapping.w_avg", {w_dim});
  auto channels = [&](int res) { return std::min(channel_base / res, channel_max); };
  int img = -1;
  for (int res = 4; res <= resolution; res *= 2) {
    const std::string m = "synthesis.b" + std::to_string(res);
    const int c = channels(res);
    if (res == 4) {
      x = g.learned_const(w, m, c, 4);
    } else {
      x = g.modconv(x, w, m + ".conv0", c, 3, 2, true, true);
    }
    x = g.modconv(x, w, m + ".conv1", c, 3, 1, true, true);
    g.add_buffer(m + ".resample_filter", {4, 4});
    const int rgb = g.modconv(x, w, m + ".torgb", 3, 1, 1, false, false);
    img = img < 0 ? rgb : g.add(g.fir_upsample(img), rgb);
  }
  g.set_output(img);
  return g;
}

std::vector<Sg3Layer> stylegan3_schedule(int resolution, int channel_base, int channel_max,
                                         int num_layers, int num_critical) {
  // SynthesisNetwork.__init__: first_cutoff 2, first_stopband 2^2.1, last_stopband_rel 2^0.3,
  // margin_size 10.
  const double first_cutoff = 2, first_stopband = std::exp2(2.1);
  const double last_cutoff = resolution / 2.0, last_stopband = last_cutoff * std::exp2(0.3);
  std::vector<Sg3Layer> out;
  for (int i = 0; i <= num_layers; ++i) {
    const double e = std::min(double(i) / (num_layers - num_critical), 1.0);
    Sg3Layer l;
    l.cutoff = first_cutoff * std::pow(last_cutoff / first_cutoff, e);
    l.stopband = first_stopband * std::pow(last_stopband / first_stopband, e);
    l.sampling_rate = std::exp2(std::ceil(std::log2(std::min(l.stopband * 2, double(resolution)))));
    l.half_width = std::max(l.stopband, l.sampling_rate / 2) - l.cutoff;
    l.size = i >= num_layers - 1 ? resolution : int(l.sampling_rate) + 2 * 10;
    // np.rint: to the nearest, halves to even, as nearbyint in the default rounding mode.
    l.channels =
        i == num_layers
            ? 3
            : int(std::nearbyint(std::min(channel_base / 2.0 / l.cutoff, double(channel_max))));
    l.name =
        "L" + std::to_string(i) + "_" + std::to_string(l.size) + "_" + std::to_string(l.channels);
    out.push_back(l);
  }
  return out;
}

Graph stylegan3_generator(int resolution, bool r_config, int mapping_layers) {
  if (resolution < 16 || (resolution & (resolution - 1)))
    throw UserError("stylegan3: the resolution must be a power of two from 16, not " +
                    std::to_string(resolution));
  // train.py: stylegan3-t cbase 32768, cmax 512, kernel 3; -r doubles both, kernel 1, radial.
  const int channel_base = r_config ? 65536 : 32768, channel_max = r_config ? 1024 : 512;
  const int kernel = r_config ? 1 : 3, num_layers = 14, num_critical = 2, filter_size = 6;
  const int z_dim = 512, w_dim = 512;
  Graph g(std::string(r_config ? "stylegan3_r_" : "stylegan3_t_") + std::to_string(resolution));
  int x = g.normalize_2nd_moment(g.input(z_dim, 1, 1));
  for (int i = 0; i < mapping_layers; ++i)
    x = g.leaky_relu(g.linear(x, "mapping.fc" + std::to_string(i), w_dim));
  const int w = x;
  g.add_buffer("mapping.w_avg", {w_dim});
  const std::vector<Sg3Layer> s =
      stylegan3_schedule(resolution, channel_base, channel_max, num_layers, num_critical);
  x = g.fourier_input(w, "synthesis.input", s[0].channels, s[0].size);
  for (int i = 0; i <= num_layers; ++i) {
    const Sg3Layer& in = s[std::max(i - 1, 0)];
    const bool torgb = i == num_layers, critical = i >= num_layers - num_critical;
    // SynthesisLayer: up-sample by the ratio of rates (x2 more for the lrelu but in ToRGB), FIR
    // taps filter_size per factor where the factor exceeds 1.
    const double tmp = std::max(in.sampling_rate, s[i].sampling_rate) * (torgb ? 1 : 2);
    const int up = int(std::nearbyint(tmp / in.sampling_rate));
    const int down = int(std::nearbyint(tmp / s[i].sampling_rate));
    const int up_taps = up > 1 && !torgb ? filter_size * up : 1;
    const int down_taps = down > 1 && !torgb ? filter_size * down : 1;
    x = g.filtered_modconv(x, w, "synthesis." + s[i].name, s[i].channels, torgb ? 1 : kernel,
                           s[i].size, up_taps, down_taps, r_config && !critical);
  }
  g.set_output(x);
  return g;
}

}  // namespace cnnbench
