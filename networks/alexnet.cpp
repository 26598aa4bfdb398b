#include "networks/graph.h"
#include "networks/zoo.h"

namespace cnnbench {

Graph alexnet(int input_size, int num_classes) {
  Graph g("alexnet");
  int x = g.input(3, input_size, input_size);
  // features: (conv, ReLU) at 0/1, 3/4, 6/7, 8/9, 10/11; max pools at 2, 5 and 12.
  x = g.relu(g.conv(x, "features.0", 64, 11, 4, 2, true));
  x = g.maxpool(x, 3, 2, 0, "features.2");
  x = g.relu(g.conv(x, "features.3", 192, 5, 1, 2, true));
  x = g.maxpool(x, 3, 2, 0, "features.5");
  x = g.relu(g.conv(x, "features.6", 384, 3, 1, 1, true));
  x = g.relu(g.conv(x, "features.8", 256, 3, 1, 1, true));
  x = g.relu(g.conv(x, "features.10", 256, 3, 1, 1, true));
  x = g.maxpool(x, 3, 2, 0, "features.12");
  x = g.flatten(g.adaptive_avgpool(x, 6, 6, "avgpool"));
  // classifier: Dropout 0.5 (0, 3), Linear + ReLU (1/2, 4/5), Linear (6).
  x = g.relu(g.linear(g.dropout(x, 0.5, "classifier.0"), "classifier.1", 4096));
  x = g.relu(g.linear(g.dropout(x, 0.5, "classifier.3"), "classifier.4", 4096));
  g.set_output(g.linear(x, "classifier.6", num_classes));
  return g;
}

Graph alexnet_lrn(int input_size, int num_classes) {
  Graph g("alexnet_lrn", ParamStyle::MXNet);
  // LRN as the symbol sets it: alpha 1e-4 (divided by nsize), beta 0.75, knorm 2, nsize 5.
  auto lrn = [&](int v, const std::string& name) { return g.lrn(v, 5, 1e-4, 0.75, 2.0, name); };
  int x = g.input(3, input_size, input_size);
  x = lrn(g.relu(g.conv(x, "conv1", 96, 11, 4, 0, true)), "lrn1");
  x = g.maxpool(x, 3, 2, 0, "pool1");
  x = lrn(g.relu(g.conv(x, "conv2", 256, 5, 1, 2, true)), "lrn2");
  x = g.maxpool(x, 3, 2, 0, "pool2");
  x = g.relu(g.conv(x, "conv3", 384, 3, 1, 1, true));
  x = g.relu(g.conv(x, "conv4", 384, 3, 1, 1, true));
  x = g.relu(g.conv(x, "conv5", 256, 3, 1, 1, true));
  x = g.flatten(g.maxpool(x, 3, 2, 0, "pool3"));
  x = g.dropout(g.relu(g.linear(x, "fc1", 4096)), 0.5, "dropout1");
  x = g.dropout(g.relu(g.linear(x, "fc2", 4096)), 0.5, "dropout2");
  g.set_output(g.linear(x, "fc3", num_classes));
  return g;
}

}  // namespace cnnbench
