// The networks' graphs against torchvision: every state_dict name, shape and dtype, in order, and
// the parameter and MAC counts, computed from the graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "harness/arena.h"
#include "harness/check.h"
#include "networks/registry.h"
#include "networks/resnet.h"
#include "networks/schedule.h"
#include "networks/zoo.h"

using namespace cnnbench;

namespace {

struct Entry {
  std::string name, dtype, shape;
};

// tests/data/<net>_state_dict.txt, written by tools/gen_state_dict_list.py from torchvision.
std::vector<Entry> read_list(const std::string& file) {
  std::ifstream in(std::string(CNNBENCH_TEST_DATA) + "/" + file);
  EXPECT_TRUE(in) << "missing parameter list " << file;
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

std::vector<Entry> torchvision_state_dict(const std::string& net) {
  return read_list(net + "_state_dict.txt");
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

// --- The zoo (issue 3): every network's names and shapes against its reference model, and the
// published parameter and MAC totals, all computed from our graphs.

TEST(Zoo, TorchvisionStateDictsMatch) {
  for (const Graph& g :
       {alexnet(), vgg(16, false), vgg(16, true), vgg(19, false), vgg(19, true), inception_v3(),
        inception_v3(299, 1000, true), efficientnet(0), efficientnet(1), efficientnet(2),
        efficientnet(3), efficientnet(4), efficientnet(5), efficientnet(6), efficientnet(7)}) {
    SCOPED_TRACE(g.name());
    expect_matches_torchvision(g);
  }
}

// MXNet keeps arguments and auxiliary states apart, so its order is not ours: compared as sets.
void expect_matches_mxnet(const Graph& g, const std::string& file) {
  std::map<std::string, std::string> want, got;
  for (const Entry& e : read_list(file)) want[e.name] = e.shape;
  for (const ParamSpec& p : g.params()) got[p.name] = shape_of(p);
  EXPECT_EQ(got.size(), g.params().size()) << "duplicate parameter names";
  EXPECT_EQ(got, want);
}

TEST(Zoo, MxnetSymbolsMatch) {
  expect_matches_mxnet(inception_bn(), "inception_bn_mxnet_params.txt");
  expect_matches_mxnet(alexnet_lrn(), "alexnet_lrn_mxnet_params.txt");
}

struct Published {
  const char* network;
  int input_size;
  int64_t params;
  double gmacs, tolerance;
};

// ../shared/reference/networks.md: torchvision's metadata, FlopCounterMode / 2 on an H200, and
// the computed MXNet figures.
const Published kPublished[] = {
    {"alexnet", 224, 61100840, 0.7142, 1e-4},
    {"alexnet_lrn", 227, 62378344, 1.135, 6e-4},
    {"alexnet_lrn", 224, 50844008, 1.010, 6e-4},
    {"vgg16", 224, 138357544, 15.470, 6e-4},
    {"vgg16_bn", 224, 138365992, 15.470, 6e-4},
    {"vgg19", 224, 143667240, 19.632, 6e-4},
    {"vgg19_bn", 224, 143678248, 19.632, 6e-4},
    {"inception_bn", 224, 11295240, 1.987, 6e-4},
    {"inception_v3", 299, 23834568, 5.7132, 1e-4},
    {"resnet50", 224, 25557032, 4.0892, 1e-4},
    {"resnet152", 224, 60192808, 11.5136, 1e-4},
    {"efficientnet_b0", 224, 5288548, 0.3858, 1e-4},
    {"efficientnet_b1", 240, 7794184, 0.6868, 1e-4},
    {"efficientnet_b2", 260, 9109994, 0.9936, 1e-4},
    {"efficientnet_b2", 288, 9109994, 1.0875, 1e-4},
    {"efficientnet_b3", 300, 12233232, 1.8271, 1e-4},
    {"efficientnet_b4", 380, 19341616, 4.3938, 1e-4},
    {"efficientnet_b5", 456, 30389784, 10.2664, 1e-4},
    {"efficientnet_b6", 528, 43040704, 19.0676, 1e-4},
    {"efficientnet_b7", 600, 66347960, 37.7459, 1e-4},
};

TEST(Zoo, ParameterAndMacCountsMatchThePublishedFigures) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(std::string(p.network) + " @" + std::to_string(p.input_size));
    const Graph g = build_network(p.network, p.input_size);
    EXPECT_EQ(g.num_parameters(), p.params);
    EXPECT_NEAR(double(g.macs()) / 1e9, p.gmacs, p.tolerance);
    EXPECT_EQ(g.node(g.output()).out.c, 1000);
  }
  // With its training-only head, Inception-v3 has torchvision's num_params.
  EXPECT_EQ(inception_v3(299, 1000, true).num_parameters(), 27161264);
}

TEST(Zoo, DefaultSizesAndShapes) {
  EXPECT_EQ(build_network("inception_v3").node(0).out.h, 299);
  EXPECT_EQ(build_network("efficientnet_b4").node(0).out.h, 380);
  EXPECT_EQ(build_network("alexnet_lrn").node(0).out.h, 227);
  // Inception-BN's floor pools: 112 -> 55 -> 27 (not the paper's 56 / 28).
  const Graph ibn = inception_bn();
  for (const Node& n : ibn.nodes()) {
    if (n.name == "pool_1") EXPECT_EQ(n.out.h, 55);
    if (n.name == "pool_2") EXPECT_EQ(n.out.h, 27);
    if (n.name == "ch_concat_3c_chconcat") EXPECT_EQ(n.out.c, 576);
    if (n.name == "ch_concat_4e_chconcat") EXPECT_EQ(n.out.c, 1056);
    if (n.name == "ch_concat_5b_chconcat") EXPECT_EQ(n.out.c, 1024);
  }
  // Inception-v3: 35x35x288 after Mixed_5d, 17x17x768 after Mixed_6e, 8x8x2048 after Mixed_7c.
  const Graph v3 = inception_v3();
  for (const Node& n : v3.nodes()) {
    if (n.name == "Mixed_5d") EXPECT_EQ(n.out.c * 1000 + n.out.h, 288035);
    if (n.name == "Mixed_6e") EXPECT_EQ(n.out.c * 1000 + n.out.h, 768017);
    if (n.name == "Mixed_7c") EXPECT_EQ(n.out.c * 1000 + n.out.h, 2048008);
    if (n.name == "Mixed_6b.branch7x7_2.conv") {
      EXPECT_EQ(n.kernel, 1);
      EXPECT_EQ(n.kernel_w, 7);
      EXPECT_EQ(n.pad_w, 3);
    }
  }
  // The class count is the classifier's width.
  EXPECT_EQ(build_network("vgg16", 224, 10).node(build_network("vgg16", 224, 10).output()).out.c,
            10);
  EXPECT_THROW(build_network("vgg16", 224, -1), UserError);  // 0: the default
}

// torchvision's (and MXNet's) Dropout modules are nodes of their own: no parameters, so the
// counts above are unchanged, and the identity at inference.
TEST(Zoo, DropoutSitsWhereTheReferenceModelsPutIt) {
  struct Want {
    const char* network;
    std::vector<std::string> names;
    double p;
  };
  const Want want[] = {
      {"alexnet", {"classifier.0", "classifier.3"}, 0.5},
      {"alexnet_lrn", {"dropout1", "dropout2"}, 0.5},
      {"vgg16", {"classifier.2", "classifier.5"}, 0.5},
      {"vgg19_bn", {"classifier.2", "classifier.5"}, 0.5},
      {"inception_v3", {"dropout"}, 0.5},
      {"efficientnet_b0", {"classifier.0"}, 0.2},
      {"efficientnet_b3", {"classifier.0"}, 0.3},
      {"efficientnet_b4", {"classifier.0"}, 0.4},
      {"efficientnet_b7", {"classifier.0"}, 0.5},
      {"resnet50", {}, 0},
      {"inception_bn", {}, 0},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.network);
    const Graph g = build_network(w.network);
    const auto consumers = g.consumers();
    std::vector<std::string> names;
    for (size_t id = 0; id < g.nodes().size(); ++id) {
      const Node& n = g.node(int(id));
      if (n.kind != OpKind::Dropout) continue;
      names.push_back(n.name);
      EXPECT_DOUBLE_EQ(n.dropout_p, w.p);
      EXPECT_TRUE(n.params.empty());
      // Every dropout feeds a classifier layer (through a flatten for Inception-v3).
      ASSERT_EQ(consumers[id].size(), 1u);
      int c = consumers[id][0];
      if (g.node(c).kind == OpKind::Flatten) c = g.consumers()[c][0];
      EXPECT_EQ(g.node(c).kind, OpKind::Linear) << n.name;
    }
    EXPECT_EQ(names, w.names);
  }
}

TEST(Zoo, EfficientNetSqueezeWidthComesFromTheBlockInput) {
  // features.2.0 of B0: 16 -> 24, expanded 96, squeeze max(1, 16 / 4) = 4 (not 96 / 4).
  const Graph g = efficientnet(0);
  bool seen = false;
  for (const ParamSpec& p : g.params())
    if (p.name == "features.2.0.block.2.fc1.weight") {
      EXPECT_EQ(shape_of(p), "4,96,1,1");
      seen = true;
    }
  EXPECT_TRUE(seen);
}

TEST(Zoo, NamesAndAliases) {
  EXPECT_EQ(find_network("resnet-50").name, "resnet50");
  EXPECT_EQ(find_network("ResNet_50").name, "resnet50");
  EXPECT_EQ(find_network("vgg-16").name, "vgg16");
  EXPECT_EQ(find_network("inception-bn").name, "inception_bn");
  EXPECT_EQ(find_network("bn-inception").name, "inception_bn");
  EXPECT_EQ(find_network("efficientnet-b4").name, "efficientnet_b4");
  EXPECT_EQ(find_network("Inception-v3").name, "inception_v3");
  EXPECT_EQ(find_network("alexnet-mxnet").name, "alexnet_lrn");
  // The detector: 640 and 80 classes by default, inference only, three outputs.
  EXPECT_EQ(find_network("YOLOR").name, "yolor_csp_x");
  {
    const Graph y = build_network("yolor_csp_x");
    EXPECT_EQ(y.node(y.input_id()).out.h, 640);
    EXPECT_EQ(y.extra_outputs().size(), 2u);
    EXPECT_EQ(y.node(y.output()).out.c, 255);
    EXPECT_EQ(y.node(y.output()).out.h, 80);
    EXPECT_THROW(build_training_network("yolor_csp_x"), UserError);
    EXPECT_THROW(build_network("yolor_csp_x", 650), UserError);
  }
  EXPECT_THROW(find_network("vgg17"), UserError);
  const std::string table = network_table();
  for (const NetworkInfo& n : network_registry()) {
    EXPECT_NE(table.find(n.name), std::string::npos) << n.name;
    // Every network builds at its default and at its smallest input.
    EXPECT_NO_THROW(build_network(n.name)) << n.name;
    EXPECT_NO_THROW(build_network(n.name, n.limits.min_input_size)) << n.name;
    EXPECT_THROW(build_network(n.name, n.limits.min_input_size - 1), UserError) << n.name;
  }
  EXPECT_NE(table.find("61100840"), std::string::npos);
}

// Every network schedules: each op's inputs come from ops that run before it, squeeze-excitation
// is one op per MBConv block, and Inception's concats need no copies (every branch writes its
// slice).
TEST(Zoo, EveryNetworkSchedules) {
  for (const NetworkInfo& info : network_registry()) {
    SCOPED_TRACE(info.name);
    const Graph g = build_network(info.name);
    const Schedule s = schedule_ops(g);
    std::vector<int> written(g.nodes().size(), -1);
    for (size_t step = 0; step < s.order.size(); ++step) {
      const OpGroup& grp = s.groups[s.order[step]];
      written[grp.anchor] = int(step);
    }
    // A value is ready once every value sharing its buffer slice has been written (a concat
    // with no op of its own is ready when its inputs are).
    std::function<int(int)> ready = [&](int id) {
      id = alias_source(g, id);
      if (id == g.input_id()) return -1;
      if (written[id] >= 0) return written[id];
      const Node& n = g.node(id);
      EXPECT_EQ(n.kind, OpKind::Concat) << "node " << id << " (" << n.name << ") is never written";
      int r = -1;
      for (int in : n.inputs) r = std::max(r, ready(in));
      return r;
    };
    for (size_t step = 0; step < s.order.size(); ++step)
      for (int v : s.groups[s.order[step]].in) EXPECT_LT(ready(v), int(step));
    int se = 0, copies = 0, blocks = 0;
    for (const OpGroup& grp : s.groups) {
      se += grp.kind == OpKind::Scale;
      copies += int(grp.copies.size());
    }
    for (const Node& n : g.nodes())
      blocks += n.kind == OpKind::Conv && n.groups > 1;  // one depthwise conv per MBConv
    EXPECT_EQ(se, blocks);
    if (info.name.rfind("inception", 0) == 0) EXPECT_EQ(copies, 0);
  }
}

TEST(Zoo, ConcatSlicesTileTheirBuffer) {
  const Graph g = inception_v3();
  const Schedule s = schedule_ops(g);
  // Mixed_7b = [branch1x1 320 | [2a 384 | 2b 384] | [3a 384 | 3b 384] | pool 192]: the nested
  // concats sit at channel offsets 320 and 1088 of Mixed_7b's buffer, 2048 channels wide.
  std::map<std::string, ValueView> by_name;
  for (size_t id = 0; id < g.nodes().size(); ++id) by_name[g.node(int(id)).name] = s.view[id];
  int mixed = -1;
  for (size_t id = 0; id < g.nodes().size(); ++id)
    if (g.node(int(id)).name == "Mixed_7b") mixed = int(id);
  ASSERT_GE(mixed, 0);
  const Node& m = g.node(mixed);
  const int offsets[] = {0, 320, 1088, 1856};
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const ValueView v = s.view[m.inputs[i]];
    EXPECT_EQ(v.root, mixed);
    EXPECT_EQ(v.offset, offsets[i]);
    EXPECT_EQ(v.ld, 2048);
  }
  const Node& inner = g.node(m.inputs[1]);
  EXPECT_EQ(s.view[inner.inputs[0]].offset, 320);
  EXPECT_EQ(s.view[inner.inputs[1]].offset, 704);
  EXPECT_EQ(s.view[inner.inputs[1]].root, mixed);
  // Inception-v3 at inference leaves the AuxLogits head out.
  const Graph aux = inception_v3(299, 1000, true);
  const Schedule sa = schedule_ops(aux);
  for (const OpGroup& grp : sa.groups)
    EXPECT_EQ(aux.node(grp.head).name.rfind("AuxLogits", 0), std::string::npos);
}

// Every buffer of every network is live whenever an op reads or writes a value placed in it, and
// the arena's plan of those lifetimes (batch 8, fp16) never lets two live buffers share bytes.
TEST(Zoo, BuffersAreLiveWhereverTheyAreUsedAndNeverShareBytesWhileLive) {
  for (const NetworkInfo& info : network_registry()) {
    SCOPED_TRACE(info.name);
    const Graph g = build_network(info.name);
    const Schedule s = schedule_ops(g);
    const Lifetimes l = buffer_lifetimes(g, s);
    auto root = [&](int id) { return s.view[alias_source(g, id)].root; };
    for (int step = 0; step < l.steps; ++step) {
      const OpGroup& grp = s.groups[s.order[step]];
      std::vector<int> used = grp.in;
      used.push_back(grp.anchor);
      for (int v : used) {
        const int r = root(v);
        ASSERT_GE(r, 0);
        EXPECT_LE(l.first[r], step) << g.node(v).name;
        EXPECT_GE(l.last[r], step) << g.node(v).name;
      }
    }
    EXPECT_EQ(l.last[root(g.output())], l.steps);
    // Slices stay inside their root's channels.
    for (size_t id = 0; id < g.nodes().size(); ++id) {
      const ValueView v = s.view[id];
      if (v.root < 0) continue;
      EXPECT_LE(v.offset + g.node(int(id)).out.c, v.ld);
      EXPECT_EQ(v.ld, g.node(v.root).out.c);
    }
    Arena a;
    std::vector<int> ids(g.nodes().size(), -1);
    for (size_t id = 0; id < g.nodes().size(); ++id)
      if (l.first[id] >= 0)
        ids[id] =
            a.add_activation(size_t(g.node(int(id)).out.numel()) * 8 * 2, l.first[id], l.last[id]);
    a.plan();
    for (size_t i = 0; i < ids.size(); ++i)
      for (size_t j = i + 1; j < ids.size(); ++j) {
        if (ids[i] < 0 || ids[j] < 0) continue;
        if (l.last[i] < l.first[j] || l.last[j] < l.first[i]) continue;  // never live together
        const size_t bi = size_t(g.node(int(i)).out.numel()) * 16,
                     bj = size_t(g.node(int(j)).out.numel()) * 16;
        const size_t oi = a.offset(ids[i]), oj = a.offset(ids[j]);
        EXPECT_TRUE(oi + bi <= oj || oj + bj <= oi)
            << g.node(int(i)).name << " / " << g.node(int(j)).name;
      }
    EXPECT_LT(a.bytes(MemKind::Activations), a.activations_unplanned_bytes());
  }
}

// YOLOR-CSP-X from its cfg (../shared/reference/networks.md section 8): the block counts, the
// parameter total and the MACs at 640 and 1280 as the reference's FlopCounterMode measured them,
// the reference's parameter names, and the three heads' shapes at strides 8, 16 and 32.
TEST(Yolor, CspXMatchesTheCfg) {
  EXPECT_EQ(yolor_layer_count("convolutional"), 137);
  EXPECT_EQ(yolor_layer_count("route"), 30);
  EXPECT_EQ(yolor_layer_count("shortcut"), 29);
  EXPECT_EQ(yolor_layer_count("maxpool"), 3);
  EXPECT_EQ(yolor_layer_count("upsample"), 2);
  for (const char* k :
       {"implicit_add", "implicit_mul", "shift_channels", "control_channels", "yolo"})
    EXPECT_EQ(yolor_layer_count(k), 3) << k;

  const Graph g = yolor_csp_x(640);
  EXPECT_EQ(g.num_parameters(), 99754058);
  EXPECT_NEAR(double(g.macs()) / 1e9, 110.942, 0.0005);
  EXPECT_NEAR(double(yolor_csp_x(1280).macs()) / 1e9, 443.77, 0.005);

  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ParamSpec& p : g.params()) shapes[p.name] = p.shape;
  EXPECT_EQ(shapes.at("module_list.0.Conv2d.weight"), (std::vector<int64_t>{32, 3, 3, 3}));
  EXPECT_EQ(shapes.at("module_list.0.BatchNorm2d.running_var"), (std::vector<int64_t>{32}));
  EXPECT_EQ(shapes.at("module_list.133.Conv2d.weight"), (std::vector<int64_t>{640, 1280, 1, 1}));
  EXPECT_EQ(shapes.at("module_list.201.Conv2d.weight"), (std::vector<int64_t>{255, 320, 1, 1}));
  EXPECT_EQ(shapes.at("module_list.213.Conv2d.bias"), (std::vector<int64_t>{255}));
  EXPECT_EQ(shapes.at("module_list.194.implicit"), (std::vector<int64_t>{1, 1280, 1, 1}));
  EXPECT_EQ(shapes.at("module_list.197.implicit"), (std::vector<int64_t>{1, 255, 1, 1}));
  EXPECT_EQ(shapes.count("module_list.201.BatchNorm2d.weight"), 0u);  // head convs: bias, linear
  EXPECT_EQ(shapes.count("module_list.4.Conv2d.weight"), 0u);         // a shortcut
  int convs = 0, bns = 0;
  for (const auto& [name, shape] : shapes) {
    EXPECT_EQ(name.rfind("module_list.", 0), 0u) << name;
    convs += name.size() > 14 && name.compare(name.size() - 14, 14, ".Conv2d.weight") == 0;
    bns += name.find(".BatchNorm2d.num_batches_tracked") != std::string::npos;
  }
  EXPECT_EQ(convs, 137);
  EXPECT_EQ(bns, 134);

  const std::vector<int> heads{g.output(), g.extra_outputs().at(0), g.extra_outputs().at(1)};
  const int sizes[3] = {80, 40, 20};
  for (int h = 0; h < 3; ++h) {
    const Dims d = g.node(heads[h]).out;
    EXPECT_EQ(d.c, 255);
    EXPECT_EQ(d.h, sizes[h]);
    EXPECT_EQ(d.w, sizes[h]);
    EXPECT_EQ(g.node(heads[h]).kind, OpKind::ImplicitMul);
  }
  EXPECT_THROW(yolor_csp_x(650), UserError);
  EXPECT_THROW(yolor_csp_x(640, 20), UserError);
}

// StyleGAN2's generator against the parameter totals of NVlabs' Generator (networks.md 9.1) for
// five configurations, the per-block counts, the state_dict's names and shapes, and the
// conv-only MACs (the up-sampling conv counted on its input, ToRGB included).
TEST(StyleGan, Generator2MatchesNvlabs) {
  EXPECT_EQ(stylegan2_generator(1024).num_parameters(), 30370060);
  EXPECT_EQ(stylegan2_generator(1024, 32768, 2).num_parameters(), 28794124);
  EXPECT_EQ(stylegan2_generator(512).num_parameters(), 30276583);
  EXPECT_EQ(stylegan2_generator(256).num_parameters(), 30034338);
  EXPECT_EQ(stylegan2_generator(256, 16384).num_parameters(), 24767458);

  const Graph g = stylegan2_generator(1024);
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, int64_t> block;  // trainable parameters per synthesis block
  for (const ParamSpec& p : g.params()) {
    shapes[p.name] = p.shape;
    if (p.trainable && p.name.rfind("synthesis.b", 0) == 0)
      block[p.name.substr(0, p.name.find('.', 11))] += p.numel();
  }
  EXPECT_EQ(block.at("synthesis.b4"), 2894852);
  for (const char* b : {"synthesis.b8", "synthesis.b16", "synthesis.b32", "synthesis.b64"})
    EXPECT_EQ(block.at(b), 5509125) << b;
  EXPECT_EQ(block.at("synthesis.b128"), 2296069);
  EXPECT_EQ(block.at("synthesis.b256"), 705669);
  EXPECT_EQ(block.at("synthesis.b512"), 242245);
  EXPECT_EQ(block.at("synthesis.b1024"), 93477);
  EXPECT_EQ(shapes.at("mapping.fc7.weight"), (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(shapes.at("mapping.w_avg"), (std::vector<int64_t>{512}));
  EXPECT_EQ(shapes.at("synthesis.b4.const"), (std::vector<int64_t>{512, 4, 4}));
  EXPECT_EQ(shapes.at("synthesis.b128.conv0.weight"), (std::vector<int64_t>{256, 512, 3, 3}));
  EXPECT_EQ(shapes.at("synthesis.b128.conv0.affine.weight"), (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(shapes.at("synthesis.b128.conv1.affine.weight"), (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(shapes.at("synthesis.b1024.torgb.weight"), (std::vector<int64_t>{3, 32, 1, 1}));
  EXPECT_TRUE(shapes.at("synthesis.b8.conv1.noise_strength").empty());
  EXPECT_EQ(shapes.at("synthesis.b8.conv1.noise_const"), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(shapes.count("synthesis.b8.torgb.noise_strength"), 0u);
  const Dims out = g.node(g.output()).out;
  EXPECT_EQ(out.c, 3);
  EXPECT_EQ(out.h, 1024);
  // networks.md's conv-only MACs are approximate (74.3 and 14.9 G); the mapping's 2.1 M are noise.
  EXPECT_NEAR(double(g.macs()) / 1e9, 74.3, 0.15);
  EXPECT_NEAR(double(stylegan2_generator(256, 16384).macs()) / 1e9, 14.9, 0.15);
  EXPECT_NEAR(double(stylegan2_generator(256).macs()) / 1e9, 45.1, 0.15);
  EXPECT_NEAR(double(stylegan2_generator(512).macs()) / 1e9, 59.7, 0.15);
  std::printf("  stylegan2 conv-only GMACs: 1024 %.2f, 512 %.2f, 256 %.2f, paper256 %.2f\n",
              g.macs() / 1e9, stylegan2_generator(512).macs() / 1e9,
              stylegan2_generator(256).macs() / 1e9, stylegan2_generator(256, 16384).macs() / 1e9);
  EXPECT_THROW(stylegan2_generator(300), UserError);
}

// StyleGAN3's schedule and generators against NVlabs' (networks.md 9.2): the layer names of T at
// 1024 and 256 (size and channels from the cutoffs), and the parameter totals of T and R at 256,
// 512 and 1024 with the mapping depth 2.
TEST(StyleGan, Generator3MatchesNvlabs) {
  auto names = [](int res) {
    std::string s;
    for (const Sg3Layer& l : stylegan3_schedule(res, 32768, 512))
      s += (s.empty() ? "" : " ") + l.name;
    return s;
  };
  EXPECT_EQ(names(1024),
            "L0_36_512 L1_36_512 L2_52_512 L3_52_512 L4_84_512 L5_148_512 L6_148_512 L7_276_323 "
            "L8_276_203 L9_532_128 L10_1044_81 L11_1044_51 L12_1044_32 L13_1024_32 L14_1024_3");
  EXPECT_EQ(names(256),
            "L0_36_512 L1_36_512 L2_36_512 L3_52_512 L4_52_512 L5_84_512 L6_84_512 L7_148_512 "
            "L8_148_512 L9_148_362 L10_276_256 L11_276_181 L12_276_128 L13_256_128 L14_256_3");
  const std::vector<Sg3Layer> r = stylegan3_schedule(1024, 65536, 1024);
  EXPECT_EQ(r[7].channels, 645);  // R-1024: 1024 ... 1024, 645, 406, 256, 161, 102, 64, 64, 3
  EXPECT_EQ(r[10].channels, 161);
  EXPECT_EQ(r[13].channels, 64);
  EXPECT_EQ(stylegan3_generator(256).num_parameters(), 28472133);
  EXPECT_EQ(stylegan3_generator(512).num_parameters(), 24873519);
  EXPECT_EQ(stylegan3_generator(1024).num_parameters(), 22313167);
  EXPECT_EQ(stylegan3_generator(256, true).num_parameters(), 18816387);
  EXPECT_EQ(stylegan3_generator(512, true).num_parameters(), 16665594);
  EXPECT_EQ(stylegan3_generator(1024, true).num_parameters(), 15093151);

  const Graph g = stylegan3_generator(1024);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ParamSpec& p : g.params()) shapes[p.name] = p.shape;
  EXPECT_EQ(shapes.at("synthesis.input.weight"), (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(shapes.at("synthesis.input.affine.weight"), (std::vector<int64_t>{4, 512}));
  EXPECT_EQ(shapes.at("synthesis.L7_276_323.weight"), (std::vector<int64_t>{323, 512, 3, 3}));
  EXPECT_EQ(shapes.at("synthesis.L7_276_323.affine.weight"), (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(shapes.at("synthesis.L14_1024_3.weight"), (std::vector<int64_t>{3, 32, 1, 1}));
  EXPECT_EQ(shapes.count("synthesis.L14_1024_3.up_filter"), 0u);  // ToRGB filters nothing
  EXPECT_EQ(shapes.at("synthesis.L0_36_512.up_filter"), (std::vector<int64_t>{12}));  // lrelu x2
  const Dims out = g.node(g.output()).out;
  EXPECT_EQ(out.c, 3);
  EXPECT_EQ(out.h, 1024);
  const Graph rg = stylegan3_generator(1024, true);
  bool radial = false;
  for (const ParamSpec& p : rg.params())
    radial = radial || (p.name.find("down_filter") != std::string::npos && p.shape.size() == 2);
  EXPECT_TRUE(radial);
  EXPECT_THROW(stylegan3_generator(100), UserError);

  // filtered_lrelu's geometry: the conv's output (padding k - 1) up-sampled and padded, less the
  // up filter's reach, then the down filter's, lands exactly on each layer's size.
  for (int res : {256, 1024})
    for (bool rc : {false, true}) {
      const Graph sg = stylegan3_generator(res, rc);
      for (const Node& n : sg.nodes()) {
        if (n.kind != OpKind::FilteredModConv) continue;
        const Node& in = sg.node(n.inputs[0]);
        const Sg3Spec& f = n.sg3;
        const int conv = in.out.h + n.kernel - 1;
        const int tmp = conv * f.up + f.pad_lo + f.pad_hi - f.up_taps + 1;
        EXPECT_EQ((tmp - f.down_taps) % f.down, 0) << n.name;
        EXPECT_EQ((tmp - f.down_taps) / f.down + 1, n.out.h) << n.name;
      }
    }
  std::map<std::string, Sg3Spec> spec;
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::FilteredModConv) spec[n.name] = n.sg3;
  // L0: 16 -> 16 at a rate of 32 for the lrelu; L9: 256 -> 512, so x4 then /2; ToRGB: nothing.
  const Sg3Spec& l0 = spec.at("synthesis.L0_36_512");
  EXPECT_EQ(l0.up, 2);
  EXPECT_EQ(l0.down, 2);
  EXPECT_EQ(l0.up_taps, 12);
  EXPECT_EQ(l0.fs, 32);
  const Sg3Spec& l9 = spec.at("synthesis.L9_532_128");
  EXPECT_EQ(l9.up, 4);
  EXPECT_EQ(l9.down, 2);
  EXPECT_EQ(l9.up_taps, 24);
  EXPECT_EQ(l9.down_taps, 12);
  EXPECT_EQ(l9.fs, 1024);
  const Sg3Spec& rgb = spec.at("synthesis.L14_1024_3");
  EXPECT_TRUE(rgb.torgb);
  EXPECT_EQ(rgb.up * rgb.down * rgb.up_taps * rgb.down_taps, 1);
  EXPECT_EQ(rgb.out_scale, 0.25f);
}

// StyleGAN-XL grown from a 16 px stem by SuperresGenerator stages: the parameter totals
// networks.md 9.3 computed with the repository's own code (c_dim 1000, cbase 65536, cmax 1024,
// head_layers 7), the head layers' numbering (on from the layers kept + 1) and channels.
TEST(StyleGan, XlMatchesTheGrownReference) {
  EXPECT_EQ(stylegan_xl_generator(16).num_parameters(), 101883463);
  EXPECT_EQ(stylegan_xl_generator(256).num_parameters(), 233375910);
  EXPECT_EQ(stylegan_xl_generator(512).num_parameters(), 235471137);
  EXPECT_EQ(stylegan_xl_generator(1024).num_parameters(), 236106655);
  EXPECT_EQ(stylegan_xl_generator(16, 14).num_parameters(), 141737543);
  EXPECT_EQ(stylegan_xl_generator(256, 14).num_parameters(), 273156689);
  EXPECT_EQ(stylegan_xl_generator(1024, 14).num_parameters(), 275887434);
  const Graph g = stylegan_xl_generator(32);
  std::vector<std::string> layers;
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::FilteredModConv) layers.push_back(n.name);
  // The stem's L0..L7 kept (L8, L9 and ToRGB L10 cut), the head from L9.
  ASSERT_EQ(layers.size(), 8u + 8u);
  EXPECT_EQ(layers[7].rfind("synthesis.L7_", 0), 0u) << layers[7];
  EXPECT_EQ(layers[8].rfind("synthesis.L9_", 0), 0u) << layers[8];
  EXPECT_EQ(layers.back(), "synthesis.L16_32_3");
  const Node& in = g.node(g.input_id());
  EXPECT_EQ(in.out.c, 64 + 1000);  // z, then the one-hot class
  EXPECT_EQ(g.node(g.output()).out.h, 32);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ParamSpec& p : g.params()) shapes[p.name] = p.shape;
  EXPECT_EQ(shapes.at("mapping.embed.weight"), (std::vector<int64_t>{1000, 320}));
  EXPECT_EQ(shapes.at("mapping.embed_proj.weight"), (std::vector<int64_t>{64, 320}));
  EXPECT_EQ(shapes.at("mapping.fc0.weight"), (std::vector<int64_t>{512, 128}));
  EXPECT_EQ(shapes.at("mapping.w_avg"), (std::vector<int64_t>{1000, 512}));
  // Heads' channels (networks.md): 128 px 1024 -> 512, 256 px 609 -> 256, 1024 px 152 -> 64.
  auto head_channels = [](int res) {
    const Graph x = stylegan_xl_generator(res);
    std::vector<int> c;
    for (const Node& n : x.nodes())
      if (n.kind == OpKind::FilteredModConv) c.push_back(n.out.c);
    return std::vector<int>(c.end() - 8, c.end() - 1);  // the last head's layers but ToRGB
  };
  EXPECT_EQ(head_channels(128).front(), 1024);
  EXPECT_EQ(head_channels(128).back(), 512);
  EXPECT_EQ(head_channels(256).front(), 609);
  EXPECT_EQ(head_channels(256).back(), 256);
  EXPECT_EQ(head_channels(1024).front(), 152);
  EXPECT_EQ(head_channels(1024).back(), 64);
  EXPECT_THROW(stylegan_xl_generator(24), UserError);
}

// YOLOR's inference form: the implicits folded into the heads' 1x1 convs. The graph loses only
// the six implicit ops and tensors (same MACs, same heads), the folded weights load into it, and
// each head computes what shift, conv and control computed.
TEST(Yolor, FoldedImplicitsComputeTheSameHeads) {
  const Graph full = yolor_csp_x(640), folded = yolor_csp_x(640, 80, true);
  for (const Node& n : folded.nodes())
    EXPECT_TRUE(n.kind != OpKind::ImplicitAdd && n.kind != OpKind::ImplicitMul);
  EXPECT_EQ(folded.macs(), full.macs());
  EXPECT_EQ(full.num_parameters() - folded.num_parameters(), 320 + 640 + 1280 + 3 * 255);
  const std::vector<int> heads{folded.output(), folded.extra_outputs().at(0),
                               folded.extra_outputs().at(1)};
  for (int h = 0; h < 3; ++h) {
    const Node& n = folded.node(heads[h]);
    EXPECT_EQ(n.kind, OpKind::Conv);
    EXPECT_TRUE(n.bias);
    EXPECT_EQ(n.name, "module_list." + std::to_string(201 + 6 * h) + ".Conv2d");
    EXPECT_EQ(n.out.c, 255);
  }

  const HostWeights w = random_weights(full, 3);
  const HostWeights wf = fold_yolor_implicits(w);
  size_t expected = 0;
  for (const ParamSpec& p : folded.params()) {
    if (p.integer) continue;
    ++expected;
    ASSERT_EQ(wf.count(p.name), 1u) << p.name;
    EXPECT_EQ(int64_t(wf.at(p.name).size()), p.numel()) << p.name;
  }
  EXPECT_EQ(wf.size(), expected) << "tensors the folded graph does not have";

  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int h = 0; h < 3; ++h) {
    const std::string conv = "module_list." + std::to_string(201 + 6 * h) + ".Conv2d";
    const auto& W = w.at(conv + ".weight");
    const auto& b = w.at(conv + ".bias");
    const auto& a = w.at("module_list." + std::to_string(192 + h) + ".implicit");
    const auto& m = w.at("module_list." + std::to_string(195 + h) + ".implicit");
    const auto& Wf = wf.at(conv + ".weight");
    const auto& bf = wf.at(conv + ".bias");
    const size_t K = b.size(), C = a.size();
    std::vector<double> x(C);
    for (double& v : x) v = u(rng);
    double worst = 0;
    for (size_t k = 0; k < K; ++k) {
      double ref = b[k], got = bf[k];
      for (size_t c = 0; c < C; ++c) {
        ref += double(W[k * C + c]) * (x[c] + a[c]);
        got += double(Wf[k * C + c]) * x[c];
      }
      ref *= m[k];
      worst = std::max(worst, std::fabs(got - ref) / std::max(1.0, std::fabs(ref)));
    }
    EXPECT_LT(worst, 1e-5) << conv;
  }
  HostWeights missing = w;
  missing.erase("module_list.196.implicit");
  EXPECT_THROW(fold_yolor_implicits(missing), UserError);
}
