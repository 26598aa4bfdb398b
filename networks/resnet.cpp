#include "networks/resnet.h"

#include <string>

namespace cnnbench {

namespace {

// torchvision.models.resnet.Bottleneck: 1x1 -> 3x3 (carries the stride) -> 1x1 with 4x expansion,
// plus a 1x1 projection on the shortcut where the shape changes.
int bottleneck(Graph& g, int x, const std::string& p, int in_channels, int width, int stride) {
  const int out_channels = width * 4;
  int y = g.conv_bn(x, p + ".conv1", p + ".bn1", width, 1, 1, 0, true);
  y = g.conv_bn(y, p + ".conv2", p + ".bn2", width, 3, stride, 1, true);
  y = g.conv_bn(y, p + ".conv3", p + ".bn3", out_channels, 1, 1, 0, false);
  int shortcut = x;
  if (stride != 1 || in_channels != out_channels)
    shortcut =
        g.conv_bn(x, p + ".downsample.0", p + ".downsample.1", out_channels, 1, stride, 0, false);
  return g.relu(g.add(y, shortcut));
}

}  // namespace

Graph build_resnet(const std::string& name, const std::vector<int>& blocks, int input_size,
                   int num_classes) {
  Graph g(name);
  int x = g.input(3, input_size, input_size);
  x = g.conv_bn(x, "conv1", "bn1", 64, 7, 2, 3, true);
  x = g.maxpool(x, 3, 2, 1, "maxpool");
  int channels = 64;
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int width = 64 << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const int stride = (b == 0 && stage > 0) ? 2 : 1;
      const std::string path = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      x = bottleneck(g, x, path, channels, width, stride);
      channels = width * 4;
    }
  }
  x = g.flatten(g.global_avgpool(x, "avgpool"));
  g.set_output(g.linear(x, "fc", num_classes));
  return g;
}

Graph resnet50(int input_size) {
  return build_resnet("resnet50", {3, 4, 6, 3}, input_size);
}
Graph resnet152(int input_size) {
  return build_resnet("resnet152", {3, 8, 36, 3}, input_size);
}

}  // namespace cnnbench
