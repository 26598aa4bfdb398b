// Random weights are deterministic; a weights file is checked tensor by tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/check.h"
#include "harness/safetensors.h"
#include "networks/registry.h"
#include "networks/resnet.h"
#include "networks/weights.h"
#include "networks/zoo.h"

using namespace cnnbench;

namespace {
std::string error_of(const Graph& g, const std::string& path) {
  try {
    load_weights(g, path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::vector<SafetensorOut> as_file(const Graph& g, const HostWeights& w) {
  std::vector<SafetensorOut> out;
  for (const ParamSpec& p : g.params())
    if (!p.integer) out.push_back({p.name, p.shape, w.at(p.name)});
  return out;
}
}  // namespace

TEST(Weights, RandomIsDeterministicPerSeedAndName) {
  const Graph g = resnet50();
  const HostWeights a = random_weights(g, 7), b = random_weights(g, 7), c = random_weights(g, 8);
  EXPECT_EQ(a.at("layer3.2.conv2.weight"), b.at("layer3.2.conv2.weight"));
  EXPECT_NE(a.at("layer3.2.conv2.weight"), c.at("layer3.2.conv2.weight"));
  EXPECT_EQ(a.count("bn1.num_batches_tracked"), 0u);
  for (float v : a.at("layer1.0.bn1.running_var")) EXPECT_TRUE(v >= 0.5f && v < 1.5f);
  const std::vector<float>& w = a.at("conv1.weight");
  const float bound = std::sqrt(6.0f / (3 * 7 * 7));
  for (float v : w) EXPECT_LE(std::fabs(v), bound);
  // Biases take 1 / sqrt(fan-in) of their layer's weight: fc's 2048 inputs.
  const std::vector<float>& fc_b = a.at("fc.bias");
  float widest = 0;
  for (float v : fc_b) widest = std::max(widest, std::fabs(v));
  EXPECT_LE(widest, 1.0f / std::sqrt(2048.0f));
  EXPECT_GT(widest, 0.5f / std::sqrt(2048.0f));
}

TEST(Weights, ConvBiasesScaleWithTheirFanIn) {
  const HostWeights a = random_weights(build_network("alexnet"), 2);
  float widest = 0;
  for (float v : a.at("features.3.bias")) widest = std::max(widest, std::fabs(v));  // 64 x 5 x 5
  EXPECT_LE(widest, 1.0f / std::sqrt(64.0f * 25));
  EXPECT_GT(widest, 0.5f / std::sqrt(64.0f * 25));
}

TEST(Weights, LoadsAFileAndNamesEachProblem) {
  const Graph g = build_resnet("resnet50", {1, 1, 1, 1}, 64);  // small, same names' shape rules
  const HostWeights w = random_weights(g, 1);
  const std::string dir = testing::TempDir();
  const std::string good = dir + "/good.safetensors";
  save_safetensors(good, as_file(g, w));
  EXPECT_EQ(load_weights(g, good).at("fc.bias"), w.at("fc.bias"));

  auto tensors = as_file(g, w);
  tensors.erase(tensors.begin() + 3);  // drop bn1.running_mean
  save_safetensors(dir + "/missing.safetensors", tensors);
  EXPECT_NE(error_of(g, dir + "/missing.safetensors").find("'bn1.running_mean'"),
            std::string::npos);

  tensors = as_file(g, w);
  tensors.push_back({"extra.weight", {2}, {1, 2}});
  save_safetensors(dir + "/extra.safetensors", tensors);
  EXPECT_NE(error_of(g, dir + "/extra.safetensors").find("'extra.weight'"), std::string::npos);

  tensors = as_file(g, w);
  tensors[0].shape = {64, 3, 49};
  save_safetensors(dir + "/shape.safetensors", tensors);
  const std::string msg = error_of(g, dir + "/shape.safetensors");
  EXPECT_NE(msg.find("[64, 3, 49]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[64, 3, 7, 7]"), std::string::npos) << msg;

  EXPECT_NE(error_of(g, dir + "/nope.safetensors").find("nope.safetensors"), std::string::npos);
}

// YOLOR's weights come as the reference names them (with the implicit layers); the registered
// graph is the folded inference form. Loading a file, or drawing random weights, goes through the
// fold: the result is fold_yolor_implicits of the reference's tensors, and it is exactly what the
// folded graph's parameters ask for.
TEST(Weights, YolorFileIsTheReferencesFoldedOnLoad) {
  const Graph ref = yolor_csp_x(64), folded = build_network("yolor", 64);
  const HostWeights w = random_weights(ref, 3);
  const std::string dir = testing::TempDir();
  const std::string path = dir + "/yolor_reference.safetensors";
  save_safetensors(path, as_file(ref, w));
  const HostWeights loaded = network_file_weights("YOLOR-CSP-X", 64, 0, path);
  EXPECT_EQ(loaded, fold_yolor_implicits(w));
  EXPECT_EQ(loaded.count("module_list.192.implicit"), 0u);
  EXPECT_NE(loaded.at("module_list.201.Conv2d.weight"), w.at("module_list.201.Conv2d.weight"));
  size_t wanted = 0;
  for (const ParamSpec& p : folded.params()) {
    if (p.integer) continue;
    ++wanted;
    ASSERT_EQ(loaded.count(p.name), 1u) << p.name;
    size_t n = 1;
    for (int64_t d : p.shape) n *= size_t(d);
    EXPECT_EQ(loaded.at(p.name).size(), n) << p.name;
  }
  EXPECT_EQ(loaded.size(), wanted);
  // Random weights: the reference's, with the head prior, folded.
  HostWeights prior = w;
  yolor_head_prior(prior);
  EXPECT_EQ(network_random_weights("yolor_csp_x", 64, 0, 3), fold_yolor_implicits(prior));
  const float obj_shift =
      prior.at("module_list.201.Conv2d.bias")[4] - w.at("module_list.201.Conv2d.bias")[4];
  EXPECT_NEAR(obj_shift, std::log(8.0 / (80.0 * 80.0)), 1e-5);  // stride 8: 80 x 80 cells
  const float cls_shift = prior.at("module_list.213.Conv2d.bias")[85 + 5 + 7] -
                          w.at("module_list.213.Conv2d.bias")[85 + 5 + 7];
  EXPECT_NEAR(cls_shift, std::log(0.6 / 79.01), 1e-5);
  // A file of the folded form is not the reference's: the first missing implicit is named.
  save_safetensors(dir + "/yolor_folded.safetensors", as_file(folded, loaded));
  try {
    network_file_weights("yolor_csp_x", 64, 0, dir + "/yolor_folded.safetensors");
    ADD_FAILURE() << "a file without the implicits loaded";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(".implicit'"), std::string::npos) << e.what();
  }
  // Another network's weights are drawn for its own graph, unfolded.
  EXPECT_EQ(network_random_weights("alexnet", 0, 0, 2),
            random_weights(build_network("alexnet"), 2));
}
