#include <string>
#include <vector>

#include "networks/graph.h"
#include "networks/zoo.h"

namespace cnnbench {

namespace {
constexpr int M = 0;  // a 2x2 max pool in the configuration table
// torchvision's cfgs "D" (VGG-16) and "E" (VGG-19): conv widths, M for pools.
const std::vector<int> kVgg16 = {64, 64,  M,   128, 128, M,   256, 256, 256,
                                 M,  512, 512, 512, M,   512, 512, 512, M};
const std::vector<int> kVgg19 = {64,  64,  M,   128, 128, M,   256, 256, 256, 256, M,
                                 512, 512, 512, 512, M,   512, 512, 512, 512, M};
}  // namespace

Graph vgg(int depth, bool batchnorm, int input_size, int num_classes) {
  Graph g("vgg" + std::to_string(depth) + (batchnorm ? "_bn" : ""));
  int x = g.input(3, input_size, input_size);
  int i = 0;  // index in torchvision's `features` Sequential
  for (int v : depth == 19 ? kVgg19 : kVgg16) {
    if (v == M) {
      x = g.maxpool(x, 2, 2, 0, "features." + std::to_string(i++));
      continue;
    }
    x = g.conv(x, "features." + std::to_string(i++), v, 3, 1, 1, true);  // keeps its bias
    if (batchnorm) x = g.batchnorm(x, "features." + std::to_string(i++));
    x = g.relu(x), ++i;
  }
  x = g.flatten(g.adaptive_avgpool(x, 7, 7, "avgpool"));
  x = g.dropout(g.relu(g.linear(x, "classifier.0", 4096)), 0.5, "classifier.2");
  x = g.dropout(g.relu(g.linear(x, "classifier.3", 4096)), 0.5, "classifier.5");
  g.set_output(g.linear(x, "classifier.6", num_classes));
  return g;
}

}  // namespace cnnbench
