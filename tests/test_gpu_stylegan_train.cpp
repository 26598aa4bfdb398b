// StyleGAN3-T's training step (networks/stylegan_train.h) on a 16 px generator and
// discriminator, batch 4 (one minibatch-stddev group): identities the phases must satisfy, and
// finite differences of the losses. The comparison with PyTorch autograd at 256 px is
// tools/stylegan3_train_reference.py's (a device call).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "networks/registry.h"
#include "networks/stylegan_train.h"

namespace cnnbench {
namespace {

constexpr int kRes = 16, kBatch = 4;

struct Case {
  HostWeights g, d;
  std::vector<float> z0, z1, reals;
  Case() {
    g = network_random_weights("stylegan3_t", kRes, 0, 3);
    d = stylegan2_discriminator_random(kRes, 5);
    std::mt19937 rng(9);
    std::normal_distribution<float> n(0.f, 1.f);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int i = 0; i < kBatch * 512; ++i) z0.push_back(n(rng)), z1.push_back(n(rng));
    for (int i = 0; i < kBatch * 3 * kRes * kRes; ++i) reals.push_back(u(rng));
    for (auto& [name, v] : d)  // small random biases, so their gradients are exercised
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0)
        for (float& x : v) x = 0.1f * n(rng);
  }
};

// The trainer's own engines may be nondeterministic; runs are compared bit for bit here.
GpuContext& deterministic(GpuContext& ctx) {
  ctx.excluded.push_back(kNondeterministic);
  return ctx;
}

std::map<std::string, std::vector<float>> run_phase(GpuContext& ctx, const Case& c,
                                                    const std::string& phase,
                                                    const HostWeights* g = nullptr,
                                                    const HostWeights* d = nullptr,
                                                    size_t workspace_bytes = 0) {
  SgTrainOptions o;
  o.resolution = kRes, o.batch = kBatch;
  if (workspace_bytes) o.workspace_bytes = workspace_bytes;
  StyleganTrainer t(ctx, o, g ? *g : c.g, d ? *d : c.d);
  EXPECT_LE(t.workspace_limit(), o.workspace_bytes);
  t.set_inputs(c.z0, c.z1, c.reals);
  if (phase == "Gmain") t.gmain(ctx.stream);
  if (phase == "Dmain") t.dmain(ctx.stream);
  if (phase == "Dreg") t.dreg(ctx.stream);
  EXPECT_EQ(cudaStreamSynchronize(ctx.stream), cudaSuccess);
  std::map<std::string, std::vector<float>> out;
  for (SafetensorOut& s : t.results(phase)) out[s.name] = std::move(s.values);
  return out;
}

double sum(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

TEST(GpuStyleganTrain, DregTangentEqualsThePenaltyAndRunsAreEqual) {
  GpuContext ctx;
  deterministic(ctx);
  const Case c;
  auto a = run_phase(ctx, c, "Dreg");
  // The derivative of D along v = dD/dx, summed over the batch, is sum |v_n|^2 (mbstd couples the
  // images, so only the sums agree).
  const double r1 = sum(a.at("Dreg.r1_penalty")), tangent = sum(a.at("Dreg.tangent_logits"));
  EXPECT_GT(r1, 0.0);
  EXPECT_NEAR(tangent, r1, 1e-4 * std::fabs(r1));
  auto b = run_phase(ctx, c, "Dreg");
  for (const auto& [name, v] : a) EXPECT_EQ(v, b.at(name)) << name;
  double g2 = 0;
  for (float x : a.at("Dreg.grad.b16.conv0.weight")) g2 += double(x) * x;
  EXPECT_GT(g2, 0.0);
  std::printf("  Dreg at 16 px: sum r1 %.6g, sum of the tangent logits %.6g\n", r1, tangent);
}

// A conv workspace limit larger than the card: the trainer's tuning scratch is halved until it
// fits (as at a --max_batch search's largest batches) and the step still gives the same result.
TEST(GpuStyleganTrain, AWorkspaceLimitOverTheCardIsHalvedUntilItFits) {
  GpuContext ctx;
  deterministic(ctx);
  const Case c;
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  SgTrainOptions o;
  o.resolution = kRes, o.batch = kBatch;
  o.workspace_bytes = size_t(4) * total_b;
  {
    StyleganTrainer t(ctx, o, c.g, c.d);
    EXPECT_LT(t.workspace_limit(), total_b);
    EXPECT_GE(t.workspace_limit(), size_t(32) << 20);
    std::printf("  workspace limit asked %zu MiB, used %zu MiB (card %zu MiB)\n",
                o.workspace_bytes >> 20, t.workspace_limit() >> 20, total_b >> 20);
  }
  const auto a = run_phase(ctx, c, "Gmain", nullptr, nullptr, o.workspace_bytes);
  const auto b = run_phase(ctx, c, "Gmain");
  EXPECT_NEAR(a.at("Gmain.loss")[0], b.at("Gmain.loss")[0], 1e-5);
}

TEST(GpuStyleganTrain, DmainOutputBiasGradientIsTheMeanSigmoids) {
  GpuContext ctx;
  deterministic(ctx);
  const Case c;
  auto r = run_phase(ctx, c, "Dmain");
  const std::vector<float>&lg = r.at("Dmain.logits_gen"), &lr = r.at("Dmain.logits_real");
  double expect = 0;
  for (int i = 0; i < kBatch; ++i)
    expect += (1 / (1 + std::exp(-lg[i])) - 1 / (1 + std::exp(lr[i]))) / kBatch;
  EXPECT_NEAR(r.at("Dmain.grad.b4.out.bias")[0], expect, 1e-5);
}

// Central differences of Gmain's loss (and of Dreg's mean penalty) by one parameter.
TEST(GpuStyleganTrain, GradientsMatchFiniteDifferences) {
  GpuContext ctx;
  deterministic(ctx);
  const Case c;
  auto base = run_phase(ctx, c, "Gmain");
  auto loss_with = [&](const std::string& name, size_t i, float delta) {
    HostWeights g = c.g;
    g.at(name).at(i) += delta;
    return double(run_phase(ctx, c, "Gmain", &g).at("Gmain.loss")[0]);
  };
  std::string layer_bias;  // the third synthesis layer's bias, whatever its name at 16 px
  for (const auto& [name, v] : c.g)
    if (name.rfind("synthesis.L2_", 0) == 0 && name.find(".bias") == name.size() - 5 &&
        name.find("affine") == std::string::npos)
      layer_bias = name;
  // Each tensor's element of the largest gradient, so the difference stands above fp32's noise
  // (the loss moves by about 1e-7 per ulp; a gradient below 1e-4 would drown in it).
  for (const std::string& name :
       {std::string("mapping.fc1.weight"), layer_bias, std::string("synthesis.input.weight"),
        std::string("synthesis.input.affine.weight")}) {
    if (!c.g.count(name)) {
      ADD_FAILURE() << "no parameter " << name;
      continue;
    }
    const std::vector<float>& grad = base.at("Gmain.grad." + name);
    size_t index = 0;
    for (size_t i = 0; i < grad.size(); ++i)
      if (std::fabs(grad[i]) > std::fabs(grad[index])) index = i;
    const float h = 1e-2f;
    const double fd = (loss_with(name, index, h) - loss_with(name, index, -h)) / (2 * h);
    const double an = base.at("Gmain.grad." + name).at(index);
    std::printf("  Gmain d loss / d %s[%zu]: backward %.6g, finite difference %.6g\n", name.c_str(),
                index, an, fd);
    EXPECT_NEAR(an, fd, 0.05 * std::fabs(fd) + 1e-5) << name;
  }
  // Dreg: the gradient of interval * gamma / 2 * mean |v_n|^2 by a D weight.
  auto dreg = run_phase(ctx, c, "Dreg");
  auto penalty_with = [&](float delta) {
    HostWeights d = c.d;
    d.at("b8.conv0.weight").at(11) += delta;
    return sum(run_phase(ctx, c, "Dreg", nullptr, &d).at("Dreg.r1_penalty")) / kBatch * 16 * 2 / 2;
  };
  const float h = 1e-2f;
  const double fd = (penalty_with(h) - penalty_with(-h)) / (2 * h);
  const double an = dreg.at("Dreg.grad.b8.conv0.weight").at(11);
  std::printf("  Dreg d R1 / d b8.conv0.weight[11]: backward %.6g, finite difference %.6g\n", an,
              fd);
  EXPECT_NEAR(an, fd, 0.05 * std::fabs(fd) + 1e-5);
}

}  // namespace
}  // namespace cnnbench
