// The networks' graphs against torchvision: every state_dict name, shape and dtype, in order, and
// the parameter and MAC counts, computed from the graph.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/check.h"
#include "networks/registry.h"
#include "networks/resnet.h"

using namespace cnnbench;

namespace {

struct Entry {
  std::string name, dtype, shape;
};

// tests/data/<net>_state_dict.txt, written by tools/gen_state_dict_list.py from torchvision.
std::vector<Entry> torchvision_state_dict(const std::string& net) {
  std::ifstream in(std::string(CNNBENCH_TEST_DATA) + "/" + net + "_state_dict.txt");
  EXPECT_TRUE(in) << "missing state_dict list for " << net;
  std::vector<Entry> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    Entry e;
    ss >> e.name >> e.dtype >> e.shape;
    out.push_back(e);
  }
  return out;
}

std::string shape_of(const ParamSpec& p) {
  if (p.shape.empty()) return "-";
  std::string s;
  for (size_t i = 0; i < p.shape.size(); ++i) s += (i ? "," : "") + std::to_string(p.shape[i]);
  return s;
}

void expect_matches_torchvision(const Graph& g) {
  const std::vector<Entry> want = torchvision_state_dict(g.name());
  ASSERT_EQ(g.params().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const ParamSpec& p = g.params()[i];
    EXPECT_EQ(p.name, want[i].name) << "entry " << i;
    EXPECT_EQ(shape_of(p), want[i].shape) << p.name;
    EXPECT_EQ(p.integer ? "int64" : "float32", want[i].dtype) << p.name;
  }
}

}  // namespace

TEST(Graph, ResNet50StateDictMatchesTorchvision) {
  expect_matches_torchvision(resnet50());
}
TEST(Graph, ResNet152StateDictMatchesTorchvision) {
  expect_matches_torchvision(resnet152());
}

TEST(Graph, ResNet50Counts) {
  const Graph g = resnet50();
  EXPECT_EQ(g.num_parameters(), 25557032);
  // torchvision's _ops metadata: 4.089 GMACs (FlopCounterMode / 2 = 4.0892).
  EXPECT_NEAR(double(g.macs()) / 1e9, 4.0892, 5e-4);
  EXPECT_EQ(g.node(g.output()).out.c, 1000);
}

TEST(Graph, ResNet152Counts) {
  const Graph g = resnet152();
  EXPECT_EQ(g.num_parameters(), 60192808);
  EXPECT_NEAR(double(g.macs()) / 1e9, 11.514, 1e-3);
}

TEST(Graph, ShapesFollowTheStrides) {
  const Graph g = resnet50();
  const Dims last_conv = [&] {
    Dims d;
    for (const Node& n : g.nodes())
      if (n.kind == OpKind::Conv) d = n.out;
    return d;
  }();
  EXPECT_EQ(last_conv.h, 7);
  EXPECT_EQ(last_conv.w, 7);
  // v1.5: the stride of layer2.0 sits on conv2 (3x3), not conv1.
  for (const Node& n : g.nodes()) {
    if (n.name == "layer2.0.conv1") EXPECT_EQ(n.stride, 1);
    if (n.name == "layer2.0.conv2") EXPECT_EQ(n.stride, 2);
  }
  const Graph big = resnet50(320);
  EXPECT_EQ(big.macs() > g.macs(), true);
}

TEST(Graph, RegistryRejectsUnknownNetworksAndTinyInputs) {
  try {
    build_network("resnet51");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet50"), std::string::npos) << e.what();
  }
  EXPECT_THROW(build_network("resnet50", 16), UserError);
  EXPECT_NO_THROW(build_network("resnet50", 64));
}
