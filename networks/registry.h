// The zoo's names: what a config or the CLI may ask for.
#pragma once

#include <string>
#include <vector>

#include "harness/config.h"
#include "networks/graph.h"
#include "networks/weights.h"

namespace cnnbench {

struct NetworkInfo {
  std::string name;                  // canonical: the name in benchmark names and JSON
  std::vector<std::string> aliases;  // other spellings users type ("resnet-50", "vgg-16")
  std::string description;           // where its definition comes from
  NetworkLimits limits;
  Graph (*build)(int input_size, int num_classes);
  // state_dict entries that a checkpoint may hold but inference never reads (Inception-v3's
  // AuxLogits): accepted and ignored by the weights loader.
  std::vector<std::string> training_only_prefixes;
  // The graph a training step runs, where it is not `build` (Inception-v3 with AuxLogits).
  Graph (*build_training)(int input_size, int num_classes) = nullptr;
  // Where `build` is an inference form whose weights are computed from the reference's (YOLOR's
  // implicit layers folded into its heads): the reference's graph, which names the tensors a
  // weights file holds and random weights are drawn for, and the fold from its weights to ours.
  Graph (*build_reference)(int input_size, int num_classes) = nullptr;
  HostWeights (*fold)(const HostWeights& reference) = nullptr;
  // Applied to random weights only (before the fold): what the reference's own initialisation
  // adds to them (YOLOR's head prior, yolor_head_prior).
  void (*random_prior)(HostWeights& w) = nullptr;
};

const std::vector<NetworkInfo>& network_registry();
// By canonical name or alias, ignoring case, '-' and '_' ("ResNet-50" is resnet50); UserError
// listing the valid names otherwise.
const NetworkInfo& find_network(const std::string& name);
// 0: the network's default input size, or its default class count (1000; YOLOR's 80).
Graph build_network(const std::string& name, int input_size = 0, int num_classes = 0);
// The same for training: with the heads that only training runs. UserError for a network that is
// inference only.
Graph build_training_network(const std::string& name, int input_size = 0, int num_classes = 0);
// The weights build_network(name, input_size, num_classes) runs on: drawn by random_weights
// (for a folded network, drawn for its reference graph and folded), or read from a file that
// names them as the reference does (load_weights' checks, then the fold).
HostWeights network_random_weights(const std::string& name, int input_size, int num_classes,
                                   uint64_t seed);
HostWeights network_file_weights(const std::string& name, int input_size, int num_classes,
                                 const std::string& path);
ConfigSchema config_schema();
// `cnnbench --list`: one row per network with its input size, parameters and GMACs.
std::string network_table();

}  // namespace cnnbench
