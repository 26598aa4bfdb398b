// Inception-v3 as torchvision builds it (models/inception.py), at 299. BasicConv2d is conv
// (no bias) -> BatchNorm (eps 0.001) -> ReLU; blocks are built in the order their modules are
// registered, so the parameters come out in state_dict order.
#include <string>

#include "networks/graph.h"
#include "networks/zoo.h"

namespace cnnbench {

namespace {

struct Builder {
  Graph& g;
  std::string prefix;  // the block, e.g. "Mixed_5b"
  // BasicConv2d with a kh x kw kernel, stride 1, padded to keep the size.
  int rect(int x, const std::string& name, int out, int kh, int kw) {
    return basic(x, name, out, kh, kw, 1, (kh - 1) / 2, (kw - 1) / 2);
  }
  int conv(int x, const std::string& name, int out, int k, int stride = 1, int pad = 0) {
    return basic(x, name, out, k, k, stride, pad, pad);
  }
  int basic(int x, const std::string& name, int out, int kh, int kw, int stride, int ph, int pw) {
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    int y = g.conv_rect(x, path + ".conv", out, kh, kw, stride, ph, pw);
    return g.relu(g.batchnorm(y, path + ".bn", 1e-3));
  }
  int avg3(int x) { return g.avgpool(x, 3, 1, 1, true); }
};

int inception_a(Graph& g, int x, const std::string& name, int pool_features) {
  Builder b{g, name};
  const int b1 = b.conv(x, "branch1x1", 64, 1);
  int b5 = b.conv(x, "branch5x5_1", 48, 1);
  b5 = b.conv(b5, "branch5x5_2", 64, 5, 1, 2);
  int d = b.conv(x, "branch3x3dbl_1", 64, 1);
  d = b.conv(d, "branch3x3dbl_2", 96, 3, 1, 1);
  d = b.conv(d, "branch3x3dbl_3", 96, 3, 1, 1);
  const int p = b.conv(b.avg3(x), "branch_pool", pool_features, 1);
  return g.concat({b1, b5, d, p}, name);
}

int inception_b(Graph& g, int x, const std::string& name) {
  Builder b{g, name};
  const int b3 = b.conv(x, "branch3x3", 384, 3, 2);
  int d = b.conv(x, "branch3x3dbl_1", 64, 1);
  d = b.conv(d, "branch3x3dbl_2", 96, 3, 1, 1);
  d = b.conv(d, "branch3x3dbl_3", 96, 3, 2);
  const int p = g.maxpool(x, 3, 2);
  return g.concat({b3, d, p}, name);
}

int inception_c(Graph& g, int x, const std::string& name, int c7) {
  Builder b{g, name};
  const int b1 = b.conv(x, "branch1x1", 192, 1);
  int b7 = b.conv(x, "branch7x7_1", c7, 1);
  b7 = b.rect(b7, "branch7x7_2", c7, 1, 7);
  b7 = b.rect(b7, "branch7x7_3", 192, 7, 1);
  int d = b.conv(x, "branch7x7dbl_1", c7, 1);
  d = b.rect(d, "branch7x7dbl_2", c7, 7, 1);
  d = b.rect(d, "branch7x7dbl_3", c7, 1, 7);
  d = b.rect(d, "branch7x7dbl_4", c7, 7, 1);
  d = b.rect(d, "branch7x7dbl_5", 192, 1, 7);
  const int p = b.conv(b.avg3(x), "branch_pool", 192, 1);
  return g.concat({b1, b7, d, p}, name);
}

int inception_d(Graph& g, int x, const std::string& name) {
  Builder b{g, name};
  int b3 = b.conv(x, "branch3x3_1", 192, 1);
  b3 = b.conv(b3, "branch3x3_2", 320, 3, 2);
  int b7 = b.conv(x, "branch7x7x3_1", 192, 1);
  b7 = b.rect(b7, "branch7x7x3_2", 192, 1, 7);
  b7 = b.rect(b7, "branch7x7x3_3", 192, 7, 1);
  b7 = b.conv(b7, "branch7x7x3_4", 192, 3, 2);
  const int p = g.maxpool(x, 3, 2);
  return g.concat({b3, b7, p}, name);
}

int inception_e(Graph& g, int x, const std::string& name) {
  Builder b{g, name};
  const int b1 = b.conv(x, "branch1x1", 320, 1);
  const int b3 = b.conv(x, "branch3x3_1", 384, 1);
  const int b3a = b.rect(b3, "branch3x3_2a", 384, 1, 3);
  const int b3b = b.rect(b3, "branch3x3_2b", 384, 3, 1);
  int d = b.conv(x, "branch3x3dbl_1", 448, 1);
  d = b.conv(d, "branch3x3dbl_2", 384, 3, 1, 1);
  const int da = b.rect(d, "branch3x3dbl_3a", 384, 1, 3);
  const int db = b.rect(d, "branch3x3dbl_3b", 384, 3, 1);
  const int p = b.conv(b.avg3(x), "branch_pool", 192, 1);
  return g.concat({b1, g.concat({b3a, b3b}), g.concat({da, db}), p}, name);
}

// AuxLogits (InceptionAux): 5x5/3 average pool -> 1x1 128 -> 5x5 768 -> global pool -> fc.
void inception_aux(Graph& g, int x, int num_classes) {
  Builder b{g, "AuxLogits"};
  int y = b.conv(g.avgpool(x, 5, 3, 0, true), "conv0", 128, 1);
  y = b.conv(y, "conv1", 768, 5);
  y = g.flatten(g.adaptive_avgpool(y, 1, 1));
  g.linear(y, "AuxLogits.fc", num_classes);
}

}  // namespace

Graph inception_v3(int input_size, int num_classes, bool aux) {
  Graph g(aux ? "inception_v3_aux" : "inception_v3");
  Builder stem{g, ""};
  int x = g.input(3, input_size, input_size);
  x = stem.conv(x, "Conv2d_1a_3x3", 32, 3, 2);
  x = stem.conv(x, "Conv2d_2a_3x3", 32, 3);
  x = stem.conv(x, "Conv2d_2b_3x3", 64, 3, 1, 1);
  x = g.maxpool(x, 3, 2, 0, "maxpool1");
  x = stem.conv(x, "Conv2d_3b_1x1", 80, 1);
  x = stem.conv(x, "Conv2d_4a_3x3", 192, 3);
  x = g.maxpool(x, 3, 2, 0, "maxpool2");
  x = inception_a(g, x, "Mixed_5b", 32);
  x = inception_a(g, x, "Mixed_5c", 64);
  x = inception_a(g, x, "Mixed_5d", 64);
  x = inception_b(g, x, "Mixed_6a");
  x = inception_c(g, x, "Mixed_6b", 128);
  x = inception_c(g, x, "Mixed_6c", 160);
  x = inception_c(g, x, "Mixed_6d", 160);
  x = inception_c(g, x, "Mixed_6e", 192);
  if (aux) inception_aux(g, x, num_classes);
  x = inception_d(g, x, "Mixed_7a");
  x = inception_e(g, x, "Mixed_7b");
  x = inception_e(g, x, "Mixed_7c");
  x = g.flatten(g.dropout(g.adaptive_avgpool(x, 1, 1, "avgpool"), 0.5, "dropout"));
  g.set_output(g.linear(x, "fc", num_classes));
  return g;
}

}  // namespace cnnbench
