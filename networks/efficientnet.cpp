// EfficientNet-B0 ... B7 as torchvision builds them (models/efficientnet.py): the B0 stage table
// scaled in width (channels rounded to multiples of 8) and depth (repeats rounded up), MBConv
// blocks with depthwise convs and squeeze-excitation sized from the block *input*, SiLU
// throughout.
#include <cmath>
#include <stdexcept>
#include <string>

#include "networks/graph.h"
#include "networks/zoo.h"

namespace cnnbench {

namespace {

struct Variant {
  double width, depth;
  int resolution;
  double bn_eps, dropout;
};
// The paper's resolutions; torchvision's BatchNorm eps (1e-3 from B5 on) and classifier dropout.
const Variant kVariants[8] = {{1.0, 1.0, 224, 1e-5, 0.2}, {1.0, 1.1, 240, 1e-5, 0.2},
                              {1.1, 1.2, 260, 1e-5, 0.3}, {1.2, 1.4, 300, 1e-5, 0.3},
                              {1.4, 1.8, 380, 1e-5, 0.4}, {1.6, 2.2, 456, 1e-3, 0.4},
                              {1.8, 2.6, 528, 1e-3, 0.5}, {2.0, 3.1, 600, 1e-3, 0.5}};

struct Stage {
  int expand, kernel, stride, in, out, repeats;
};
// B0: MBConv1 k3 then MBConv6 stages (expand ratio, kernel, stride, channels in/out, repeats).
const Stage kB0[7] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},  {6, 5, 2, 24, 40, 2},
                      {6, 3, 2, 40, 80, 3},  {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4},
                      {6, 3, 1, 192, 320, 1}};

// torchvision's _make_divisible(v, 8): round to the nearest multiple of 8, never below 8 nor
// below 90% of v.
int make_divisible(double v) {
  int r = std::max(8, int(v + 4) / 8 * 8);
  if (r < 0.9 * v) r += 8;
  return r;
}

// Conv2dNormActivation: conv (no bias, "same" padding for odd kernels) -> BatchNorm -> SiLU?
int conv_bn(Graph& g, int x, const std::string& path, int out, int kernel, int stride, int groups,
            bool silu, double eps) {
  int y = g.conv(x, path + ".0", out, kernel, stride, (kernel - 1) / 2, false, groups);
  y = g.batchnorm(y, path + ".1", eps);
  return silu ? g.silu(y) : y;
}

int mbconv(Graph& g, int x, const std::string& p, int in, int out, int expand, int kernel,
           int stride, double eps) {
  const int expanded = make_divisible(double(in) * expand);
  int k = 0;  // index in the block's Sequential
  int y = x;
  if (expanded != in)
    y = conv_bn(g, y, p + ".block." + std::to_string(k++), expanded, 1, 1, 1, true, eps);
  y = conv_bn(g, y, p + ".block." + std::to_string(k++), expanded, kernel, stride, expanded, true,
              eps);
  // SqueezeExcitation: global pool -> fc1 (1x1, bias) -> SiLU -> fc2 -> sigmoid -> scale.
  const std::string se = p + ".block." + std::to_string(k++);
  const int squeeze = std::max(1, in / 4);
  int s = g.global_avgpool(y, se + ".avgpool");
  s = g.silu(g.conv(s, se + ".fc1", squeeze, 1, 1, 0, true));
  s = g.sigmoid(g.conv(s, se + ".fc2", expanded, 1, 1, 0, true));
  y = g.scale(y, s);
  y = conv_bn(g, y, p + ".block." + std::to_string(k++), out, 1, 1, 1, false, eps);
  // Stochastic depth is the identity at inference (and not modelled for training yet: it would
  // sit between the projection's BatchNorm and the add, where inference fuses them).
  return stride == 1 && in == out ? g.add(y, x) : y;
}

}  // namespace

int efficientnet_resolution(int variant) {
  if (variant < 0 || variant > 7) throw std::logic_error("efficientnet: variant 0..7");
  return kVariants[variant].resolution;
}

Graph efficientnet(int variant, int input_size, int num_classes) {
  const Variant v = kVariants[variant < 0 || variant > 7 ? 0 : variant];
  if (input_size == 0) input_size = efficientnet_resolution(variant);
  Graph g("efficientnet_b" + std::to_string(variant));
  auto width = [&](int c) { return make_divisible(c * v.width); };
  int x = g.input(3, input_size, input_size);
  x = conv_bn(g, x, "features.0", width(kB0[0].in), 3, 2, 1, true, v.bn_eps);
  int channels = width(kB0[0].in);
  for (int s = 0; s < 7; ++s) {
    const Stage& st = kB0[s];
    const int repeats = int(std::ceil(st.repeats * v.depth));
    const int out = width(st.out);
    for (int b = 0; b < repeats; ++b) {
      const std::string path = "features." + std::to_string(s + 1) + "." + std::to_string(b);
      x = mbconv(g, x, path, channels, out, st.expand, st.kernel, b == 0 ? st.stride : 1, v.bn_eps);
      channels = out;
    }
  }
  x = conv_bn(g, x, "features.8", 4 * channels, 1, 1, 1, true, v.bn_eps);
  x = g.flatten(g.global_avgpool(x, "avgpool"));
  g.set_output(g.linear(g.dropout(x, v.dropout, "classifier.0"), "classifier.1", num_classes));
  return g;
}

}  // namespace cnnbench
