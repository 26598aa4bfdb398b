// Inception-BN as MXNet's example/image-classification/symbols/inception-bn.py builds it for
// inputs larger than 28 pixels: every conv has a bias (MXNet's default), BatchNorm eps 1e-10 +
// 1e-5, pooling rounds down ("valid"), parameters named conv_<name>_weight, bn_<name>_gamma.
#include <string>

#include "networks/graph.h"
#include "networks/zoo.h"

namespace cnnbench {

namespace {

constexpr double kEps = 1e-10 + 1e-5;

// ConvFactory: conv (bias) -> BatchNorm -> ReLU.
int conv_factory(Graph& g, int x, const std::string& name, int filters, int kernel, int stride = 1,
                 int pad = 0) {
  int y = g.conv(x, "conv_" + name, filters, kernel, stride, pad, true);
  return g.relu(g.batchnorm(y, "bn_" + name, kEps));
}

// InceptionFactoryA: 1x1 | 1x1 -> 3x3 | 1x1 -> 3x3 -> 3x3 | 3x3/1 pool -> 1x1, concatenated.
int factory_a(Graph& g, int x, const std::string& name, int n1x1, int n3x3red, int n3x3,
              int nd3x3red, int nd3x3, bool max_pool, int proj) {
  const int c1 = conv_factory(g, x, name + "_1x1", n1x1, 1);
  int c3 = conv_factory(g, x, name + "_3x3_reduce", n3x3red, 1);
  c3 = conv_factory(g, c3, name + "_3x3", n3x3, 3, 1, 1);
  int d3 = conv_factory(g, x, name + "_double_3x3_reduce", nd3x3red, 1);
  d3 = conv_factory(g, d3, name + "_double_3x3_0", nd3x3, 3, 1, 1);
  d3 = conv_factory(g, d3, name + "_double_3x3_1", nd3x3, 3, 1, 1);
  const int pool = max_pool ? g.maxpool(x, 3, 1, 1, "max_pool_" + name + "_pool")
                            : g.avgpool(x, 3, 1, 1, true);  // MXNet counts the padding
  const int pr = conv_factory(g, pool, name + "_proj", proj, 1);
  return g.concat({c1, c3, d3, pr}, "ch_concat_" + name + "_chconcat");
}

// InceptionFactoryB: 1x1 -> 3x3/2 | 1x1 -> 3x3 -> 3x3/2 | 3x3/2 max pool, concatenated.
int factory_b(Graph& g, int x, const std::string& name, int n3x3red, int n3x3, int nd3x3red,
              int nd3x3) {
  int c3 = conv_factory(g, x, name + "_3x3_reduce", n3x3red, 1);
  c3 = conv_factory(g, c3, name + "_3x3", n3x3, 3, 2, 1);
  int d3 = conv_factory(g, x, name + "_double_3x3_reduce", nd3x3red, 1);
  d3 = conv_factory(g, d3, name + "_double_3x3_0", nd3x3, 3, 1, 1);
  d3 = conv_factory(g, d3, name + "_double_3x3_1", nd3x3, 3, 2, 1);
  const int pool = g.maxpool(x, 3, 2, 1, "max_pool_" + name + "_pool");
  return g.concat({c3, d3, pool}, "ch_concat_" + name + "_chconcat");
}

}  // namespace

Graph inception_bn(int input_size, int num_classes) {
  Graph g("inception_bn", ParamStyle::MXNet);
  int x = g.input(3, input_size, input_size);
  x = conv_factory(g, x, "1", 64, 7, 2, 3);
  x = g.maxpool(x, 3, 2, 0, "pool_1");
  x = conv_factory(g, x, "2_red", 64, 1);
  x = conv_factory(g, x, "2", 192, 3, 1, 1);
  x = g.maxpool(x, 3, 2, 0, "pool_2");
  x = factory_a(g, x, "3a", 64, 64, 64, 64, 96, false, 32);
  x = factory_a(g, x, "3b", 64, 64, 96, 64, 96, false, 64);
  x = factory_b(g, x, "3c", 128, 160, 64, 96);
  x = factory_a(g, x, "4a", 224, 64, 96, 96, 128, false, 128);
  x = factory_a(g, x, "4b", 192, 96, 128, 96, 128, false, 128);
  x = factory_a(g, x, "4c", 160, 128, 160, 128, 160, false, 128);
  x = factory_a(g, x, "4d", 96, 128, 192, 160, 192, false, 128);
  x = factory_b(g, x, "4e", 128, 192, 192, 256);
  x = factory_a(g, x, "5a", 352, 192, 320, 160, 224, false, 128);
  x = factory_a(g, x, "5b", 352, 192, 320, 192, 224, true, 128);
  // "global_pool": a 7x7 average pool, global at 224; larger inputs keep a spatial map, which
  // the classifier then reads flattened, as MXNet's FullyConnected does.
  x = g.flatten(g.avgpool(x, 7, 1, 0, true));
  g.set_output(g.linear(x, "fc1", num_classes));
  return g;
}

}  // namespace cnnbench
