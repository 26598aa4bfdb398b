#include "networks/registry.h"

#include "harness/check.h"
#include "networks/resnet.h"

namespace cnnbench {

const std::vector<NetworkInfo>& network_registry() {
  // ResNet's minimum: the 224-pixel design divides by 32 before the global pool.
  static const std::vector<NetworkInfo> registry = {
      {"resnet50", {224, 32}, &resnet50},
      {"resnet152", {224, 32}, &resnet152},
  };
  return registry;
}

const NetworkInfo& find_network(const std::string& name) {
  std::string valid;
  for (const NetworkInfo& n : network_registry()) {
    if (n.name == name) return n;
    valid += (valid.empty() ? "" : ", ") + n.name;
  }
  throw UserError("unknown network '" + name + "': valid networks are " + valid);
}

Graph build_network(const std::string& name, int input_size) {
  const NetworkInfo& info = find_network(name);
  if (input_size == 0) input_size = info.limits.default_input_size;
  if (input_size < info.limits.min_input_size)
    throw UserError("input size " + std::to_string(input_size) + " is too small for " + name +
                    ": the minimum is " + std::to_string(info.limits.min_input_size));
  return info.build(input_size);
}

ConfigSchema config_schema() {
  ConfigSchema schema;
  for (const NetworkInfo& n : network_registry()) schema.networks[n.name] = n.limits;
  return schema;
}

}  // namespace cnnbench
