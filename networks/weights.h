// Host-side weights in torchvision's layout and names, float32: deterministic random, or loaded
// from a .safetensors state_dict.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "networks/graph.h"

namespace cnnbench {

using HostWeights = std::map<std::string, std::vector<float>>;

// Every parameter and buffer of the graph (but num_batches_tracked), drawn from `seed` and the
// tensor's name, so a tensor's values do not depend on the order or on other tensors:
// convs and linears He-uniform, BatchNorm gamma in [0.5, 1], beta and running_mean in
// [-0.1, 0.1], running_var in [0.5, 1.5].
HostWeights random_weights(const Graph& g, uint64_t seed);

// Loads a state_dict. Every tensor the graph needs must be there with its exact shape and a float
// dtype; num_batches_tracked may be present or absent; any tensor the graph does not know is an
// error. Each problem is a UserError naming the file and the tensor (and both shapes).
// Tensors under one of `ignored_prefixes` (a training-only head) are accepted and left out.
HostWeights load_weights(const Graph& g, const std::string& path,
                         const std::vector<std::string>& ignored_prefixes = {});

// Deterministic uniform floats in [lo, hi) from (seed, name): also used for inputs.
std::vector<float> random_uniform(uint64_t seed, const std::string& name, size_t count, float lo,
                                  float hi);
// The generator state random_uniform starts from for (seed, name); element i of its stream is
// splitmix64 after i + 1 steps (what fill_uniform_nhwc computes on the device).
uint64_t random_stream_state(uint64_t seed, const std::string& name);

}  // namespace cnnbench
