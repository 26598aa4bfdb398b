// The fusion and ordering half of the compile step, on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "networks/resnet.h"
#include "networks/schedule.h"
#include "networks/zoo.h"

using namespace cnnbench;

namespace {
std::map<std::string, int> count_ops(const Graph& g, const Schedule& s) {
  std::map<std::string, int> c;
  for (const OpGroup& grp : s.groups) {
    std::string name = op_kind_name(grp.kind);
    if (grp.bn >= 0) name += "+bn";
    if (grp.residual >= 0) name += "+add";
    if (grp.act != OpKind::Input) name += std::string("+") + op_kind_name(grp.act);
    ++c[name];
  }
  (void)g;
  return c;
}
}  // namespace

TEST(Schedule, ResNet50FusesEveryConvWithItsEpilogue) {
  const Graph g = resnet50();
  const Schedule s = schedule_ops(g);
  const auto c = count_ops(g, s);
  // 53 convs: the stem and 2 per bottleneck with ReLU (33), the 16 bottleneck outputs with the
  // residual add and ReLU, and the 4 projections alone; then maxpool, avgpool, fc.
  EXPECT_EQ(c.at("conv+bn+relu"), 33);
  EXPECT_EQ(c.at("conv+bn+add+relu"), 16);
  EXPECT_EQ(c.at("conv+bn"), 4);
  EXPECT_EQ(c.at("maxpool"), 1);
  EXPECT_EQ(c.at("global_avgpool"), 1);
  EXPECT_EQ(c.at("linear"), 1);
  EXPECT_EQ(s.groups.size(), 56u);
}

TEST(Schedule, EveryInputIsProducedBeforeItIsRead) {
  for (const Graph& g : {resnet50(), resnet152(), build_resnet("small", {1, 1, 1, 1}, 64, 10)}) {
    const Schedule s = schedule_ops(g);
    std::vector<int> produced_at(g.nodes().size(), -1);
    produced_at[g.input_id()] = -1;
    for (size_t step = 0; step < s.order.size(); ++step)
      produced_at[s.groups[s.order[step]].anchor] = int(step);
    auto source = [&](int id) {
      while (g.node(id).kind == OpKind::Flatten) id = g.node(id).inputs[0];
      return id;
    };
    for (size_t step = 0; step < s.order.size(); ++step)
      for (int v : s.groups[s.order[step]].in) {
        const int src = source(v);
        if (src == g.input_id()) continue;
        EXPECT_GE(produced_at[src], 0) << g.name() << ": node " << src << " is never produced";
        EXPECT_LT(produced_at[src], int(step)) << g.name() << ": read before it is produced";
      }
    // The classifier, which makes the network's output, runs last.
    EXPECT_EQ(produced_at[source(g.output())], int(s.order.size()) - 1);
  }
}

// No fused residual conv runs right after the op that makes its residual: a bottleneck's
// projection runs before the block's first conv, so it comes before conv1, not after conv2.
TEST(Schedule, ResidualProducerNeverRunsRightBeforeTheConvThatAddsIt) {
  for (const Graph& g : {resnet50(), resnet152(), efficientnet(0), efficientnet(4)}) {
    SCOPED_TRACE(g.name());
    const Schedule s = schedule_ops(g);
    std::vector<int> step_of(g.nodes().size(), -1);
    for (size_t step = 0; step < s.order.size(); ++step)
      step_of[s.groups[s.order[step]].anchor] = int(step);
    int residuals = 0;
    for (size_t step = 0; step < s.order.size(); ++step) {
      const OpGroup& grp = s.groups[s.order[step]];
      if (grp.residual < 0) continue;
      ++residuals;
      const int src = alias_source(g, grp.residual);
      if (src == g.input_id()) continue;
      EXPECT_GE(step_of[src], 0);
      EXPECT_LT(step_of[src], int(step) - 1) << g.node(grp.head).name;
    }
    EXPECT_GT(residuals, 0);
  }
  // ResNet-50's first projection runs right after the stem's maxpool, before layer1.0.conv1.
  const Graph g = resnet50();
  const Schedule s = schedule_ops(g);
  std::vector<std::string> names;
  for (int gi : s.order) names.push_back(g.node(s.groups[gi].head).name);
  const auto at = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  EXPECT_EQ(at("layer1.0.downsample.0"), at("maxpool") + 1);
  EXPECT_LT(at("layer3.0.downsample.0"), at("layer3.0.conv1"));
}

// Dropout is the identity at inference: no op of its own, and the linear after it reads the
// value before it (AlexNet: the flattened pool, then each ReLU'd hidden layer).
TEST(Schedule, DropoutIsNoOpAtInference) {
  for (const Graph& g : {alexnet(), vgg(16, false), inception_v3(), efficientnet(0)}) {
    SCOPED_TRACE(g.name());
    const Schedule s = schedule_ops(g);
    int linears = 0;
    for (const OpGroup& grp : s.groups) {
      EXPECT_NE(g.node(grp.head).kind, OpKind::Dropout);
      EXPECT_NE(g.node(grp.anchor).kind, OpKind::Dropout);
      if (grp.kind != OpKind::Linear) continue;
      ++linears;
      const int src = alias_source(g, grp.in[0]);
      EXPECT_NE(g.node(src).kind, OpKind::Dropout);
      EXPECT_NE(g.node(src).kind, OpKind::Flatten);
      EXPECT_GE(s.view[src].root, 0);
    }
    EXPECT_EQ(linears,
              g.name().rfind("efficientnet", 0) == 0 || g.name() == "inception_v3" ? 1 : 3);
    for (size_t id = 0; id < g.nodes().size(); ++id)
      if (g.node(int(id)).kind == OpKind::Dropout) EXPECT_EQ(s.view[id].root, -1);
  }
  // AlexNet's fused classifier is still linear+relu, linear+relu, linear.
  const auto c = count_ops(alexnet(), schedule_ops(alexnet()));
  EXPECT_EQ(c.at("linear+relu"), 2);
  EXPECT_EQ(c.at("linear"), 1);
}

TEST(Schedule, ResidualIsTheShortcutNotTheMainPath) {
  const Graph g = resnet50();
  for (const OpGroup& grp : schedule_ops(g).groups) {
    if (grp.residual < 0) continue;
    const Node& head = g.node(grp.head);
    EXPECT_NE(head.name.find("conv3"), std::string::npos) << head.name;
    EXPECT_NE(grp.residual, grp.bn);
  }
}

// A detector's further heads are outputs too: live, run, and kept to the end whether their node
// comes before the main output or after it. YOLOR's folded graph: 137 convs (the implicits gone,
// so no op for them), all three heads' buffers held to the last step.
TEST(Schedule, ExtraOutputsAreLiveAndKeptToTheEnd) {
  Graph g("two_heads");
  const int x = g.input(3, 8, 8);
  const int trunk = g.relu(g.conv(x, "trunk", 8, 3, 1, 1));
  const int early = g.conv(trunk, "early_head", 4, 1, 1, 0, true);  // before the main output
  const int main = g.conv(g.relu(g.conv(trunk, "deep", 8, 3, 1, 1)), "main_head", 4, 1, 1, 0, true);
  const int late = g.conv(trunk, "late_head", 4, 1, 1, 0, true);  // after it
  g.set_output(main);
  g.add_extra_output(early);
  g.add_extra_output(late);
  const Schedule s = schedule_ops(g);
  for (int h : {early, main, late}) EXPECT_TRUE(s.live[h]) << g.node(h).name;
  std::vector<int> anchors;
  for (int gi : s.order) anchors.push_back(s.groups[gi].anchor);
  for (int h : {early, late})
    EXPECT_NE(std::find(anchors.begin(), anchors.end(), h), anchors.end()) << g.node(h).name;
  const Lifetimes l = buffer_lifetimes(g, s);
  for (int h : {early, main, late}) EXPECT_EQ(l.last[s.view[h].root], l.steps) << g.node(h).name;

  const Graph y = yolor_csp_x(640, 80, true);
  const Schedule ys = schedule_ops(y);
  const Lifetimes yl = buffer_lifetimes(y, ys);
  std::map<std::string, int> yc = count_ops(y, ys);
  EXPECT_EQ(yc["conv+bn+silu"] + yc["conv+bn+add+silu"] + yc["conv"], 137);
  EXPECT_EQ(yc["conv+bn+add+silu"], 29);  // the bottlenecks' shortcuts, added after the SiLU
  for (int h : {y.output(), y.extra_outputs().at(0), y.extra_outputs().at(1)})
    EXPECT_EQ(yl.last[ys.view[h].root], yl.steps);
  // The FPN's two upsamples write straight into their route's (concat's) buffer.
  int upsamples = 0;
  for (int id = 0; id < int(y.nodes().size()); ++id)
    if (y.node(id).kind == OpKind::Upsample) {
      ++upsamples;
      EXPECT_NE(ys.view[id].root, id) << "an upsample copied into its concat";
    }
  EXPECT_EQ(upsamples, 2);
}

// YOLOR's bottlenecks add after the activation, x + silu(bn(conv(...))): the add joins the conv's
// epilogue (residual_after_act) where nothing activates the sum; an add that is activated stays an
// op of its own, as does x + x.
TEST(Schedule, AnAddAfterTheActivationJoinsTheConv) {
  Graph g("post_act");
  const int x = g.input(16, 8, 8);
  const int a = g.conv_bn(x, "c1.conv", "c1.bn", 16, 3, 1, 1, false);
  const int y = g.add(x, g.silu(a));  // fused
  const int b = g.conv_bn(y, "c2.conv", "c2.bn", 16, 3, 1, 1, false);
  const int z = g.relu(g.add(y, g.silu(b)));  // activated: not
  const int c = g.conv_bn(z, "c3.conv", "c3.bn", 16, 1, 1, 0, false);
  const int s2 = g.silu(c);
  g.set_output(g.add(s2, s2));  // x + x: not
  const Schedule s = schedule_ops(g);
  int fused = 0, adds = 0;
  for (const OpGroup& grp : s.groups) {
    if (grp.kind == OpKind::Add) ++adds;
    if (grp.kind != OpKind::Conv || !grp.residual_after_act) continue;
    ++fused;
    EXPECT_EQ(grp.residual, x);
    EXPECT_EQ(grp.act, OpKind::SiLU);
    EXPECT_EQ(grp.anchor, y);
    EXPECT_EQ(grp.bn, a);
  }
  EXPECT_EQ(fused, 1);
  EXPECT_EQ(adds, 2);
}

TEST(Schedule, YolorsBottleneckAddsJoinTheirConvs) {
  const Graph g = yolor_csp_x(64, 80, true);
  const Schedule s = schedule_ops(g);
  int fused = 0, adds = 0;
  for (const OpGroup& grp : s.groups) {
    fused += grp.kind == OpKind::Conv && grp.residual_after_act;
    adds += grp.kind == OpKind::Add;
  }
  // The 29 adds of call 35's layer table were all bottleneck shortcuts: none stays an op.
  EXPECT_EQ(fused, 29);
  EXPECT_EQ(adds, 0);
}
