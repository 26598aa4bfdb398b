// StyleGAN2's generator (NVlabs stylegan2-ada-pytorch training/networks.py; networks.md 9.1): the
// mapping network (z normalised, `mapping_layers` FC + lrelu at 512) and the synthesis network's
// blocks b4 ... b{resolution} with the 'skip' architecture (each block's ToRGB added to the
// up-sampled image so far). Parameter and buffer names are NVlabs' state_dict's.
#include <algorithm>
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

}  // namespace cnnbench
