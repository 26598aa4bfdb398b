// The zoo's names: what a config or the CLI may ask for.
#pragma once

#include <string>
#include <vector>

#include "harness/config.h"
#include "networks/graph.h"

namespace cnnbench {

struct NetworkInfo {
  std::string name;
  NetworkLimits limits;
  Graph (*build)(int input_size);
};

const std::vector<NetworkInfo>& network_registry();
const NetworkInfo& find_network(const std::string& name);  // UserError listing the valid names
Graph build_network(const std::string& name, int input_size = 0);  // 0: the network's default
ConfigSchema config_schema();

}  // namespace cnnbench
