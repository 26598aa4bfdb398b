// The conv backward's description on the CPU: what it takes from a forward conv, and plan keys
// that tell apart every difference that changes the cuDNN graph.
#include <gtest/gtest.h>

#include <set>

#include "kernels/conv_backward.h"

using namespace cnnbench;

namespace {
ConvSpec stem() {
  ConvSpec s;
  s.name = "conv1";
  s.x = {2, 3, 224, 224};
  s.y = {2, 64, 112, 112};
  s.kernel = 7;
  s.stride = 2;
  s.pad = 3;
  s.precision = Precision::FP16;
  s.residual = true;  // the epilogue has no backward here
  s.act = Act::ReLU;
  return s;
}
}  // namespace

TEST(ConvBackwardSpec, TakesTheForwardGeometryAndPrecision) {
  ConvSpec f = stem();
  f.kernel_w = 5, f.pad_w = 2, f.dilation = 2, f.groups = 1;
  const ConvBackwardSpec b = ConvBackwardSpec::of(f);
  EXPECT_EQ(b.name, "conv1");
  EXPECT_EQ(b.x.str(), f.x.str());
  EXPECT_EQ(b.y.str(), f.y.str());
  EXPECT_EQ(b.kernel, 7);
  EXPECT_EQ(b.kw(), 5);
  EXPECT_EQ(b.pad, 3);
  EXPECT_EQ(b.pw(), 2);
  EXPECT_EQ(b.stride, 2);
  EXPECT_EQ(b.dilation, 2);
  EXPECT_EQ(b.precision, Precision::FP16);
  EXPECT_FALSE(b.accumulate);
}

TEST(ConvBackwardSpec, SignaturesDifferWhereTheGraphDiffers) {
  const ConvBackwardSpec base = ConvBackwardSpec::of(stem());
  std::vector<ConvBackwardSpec> variants(8, base);
  variants[1].stride = 1;
  variants[2].pad = 2;
  variants[3].kernel_w = 3;
  variants[4].groups = 3;
  variants[5].precision = Precision::BF16;
  variants[6].accumulate = true;
  variants[7].x.n = 4, variants[7].y.n = 4;
  std::set<std::string> keys;
  for (const ConvBackwardSpec& v : variants)
    for (ConvGrad g : {ConvGrad::Data, ConvGrad::Filter}) keys.insert(v.signature(g));
  EXPECT_EQ(keys.size(), variants.size() * 2);
  // The name is not part of the key: layers of one shape share a plan.
  ConvBackwardSpec renamed = base;
  renamed.name = "layer1.0.conv1";
  EXPECT_EQ(renamed.signature(ConvGrad::Data), base.signature(ConvGrad::Data));
}
