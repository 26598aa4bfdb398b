#include "harness/probe_cases.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "harness/check.h"
#include "harness/cli.h"
#include "networks/registry.h"

namespace cnnbench {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<ProbeCase> pick_probe_cases(const std::string& network, const std::string& layers,
                                        int batch, const std::vector<std::string>& defaults,
                                        bool (*keep)(const ConvGeometry&)) {
  const Graph g = build_network(network);
  const bool all = layers == "all";
  std::vector<std::string> names = all ? std::vector<std::string>() : split_commas(layers);
  if (layers.empty()) {
    if (defaults.empty())
      throw UserError("--layers is needed for " + network + " (the default list is ResNet-50's)");
    names = defaults;
  }
  std::vector<ProbeCase> out;
  for (const Node& n : g.nodes()) {
    if (n.kind != OpKind::Conv) continue;
    if (!all && std::find(names.begin(), names.end(), n.name) == names.end()) continue;
    Dims x = g.node(n.inputs.at(0)).out, y = n.out;
    x.n = y.n = batch;
    const ConvGeometry geom{x,     y,       n.kernel,   n.kernel_w, n.stride,
                            n.pad, n.pad_w, n.dilation, n.groups};
    if (!keep(geom)) {
      if (all) continue;
      throw UserError("--layers: " + n.name + " (" + x.str() + " -> " + std::to_string(y.c) +
                      " channels, groups " + std::to_string(n.groups) +
                      ") is not a conv this probe takes");
    }
    out.push_back({n.name, geom});
  }
  for (const std::string& name : names) {
    bool found = false;
    for (const ProbeCase& c : out) found |= c.name == name;
    if (!found) throw UserError("--layers: " + network + " has no conv named '" + name + "'");
  }
  return out;
}

void rewrite_json(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream f(path, text.empty() ? std::ios::app : std::ios::trunc);
  if (!text.empty()) f << text << "\n";
  if (!f) throw UserError("--json: cannot write '" + path + "'");
}

bool ProbeOptions::has(const std::string& sw) const {
  return std::find(switches.begin(), switches.end(), sw) != switches.end();
}

ProbeOptions parse_probe_options(int argc, char** argv, ProbeOptions o,
                                 const std::vector<std::string>& extra_switches) {
  std::string batch = std::to_string(o.batch), engines = std::to_string(o.max_engines),
              samples = std::to_string(o.samples), seed = std::to_string(o.seed);
  for (int i = 1; i < argc; ++i) {
    if (take_flag(i, argc, argv, "help", nullptr)) {
      o.help = true;
      continue;
    }
    bool sw = false;
    for (const std::string& name : extra_switches)
      if (!sw && take_flag(i, argc, argv, name, nullptr)) o.switches.push_back(name), sw = true;
    if (sw) continue;
    if (take_flag(i, argc, argv, "network", &o.network) ||
        take_flag(i, argc, argv, "layers", &o.layers) ||
        take_flag(i, argc, argv, "batch", &batch) ||
        take_flag(i, argc, argv, "variants", &o.variants) ||
        take_flag(i, argc, argv, "max_engines", &engines) ||
        take_flag(i, argc, argv, "samples", &samples) || take_flag(i, argc, argv, "seed", &seed) ||
        take_flag(i, argc, argv, "json", &o.json))
      continue;
    throw UserError(std::string("unknown argument '") + argv[i] + "' (see --help)");
  }
  o.batch = int(parse_count(batch, "batch"));
  o.max_engines = int(parse_count(engines, "max_engines"));
  o.samples = int(parse_count(samples, "samples"));
  o.seed = uint64_t(parse_count(seed, "seed"));
  if (o.batch < 1 || o.max_engines < 1 || o.samples < 1)
    throw UserError("--batch, --max_engines and --samples must be at least 1");
  return o;
}

nlohmann::ordered_json probe_case_json(const std::string& name, const ConvGeometry& g) {
  nlohmann::ordered_json j;
  j["layer"] = name;
  j["x"] = g.x.str(), j["y"] = g.y.str();
  j["kernel"] = std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w);
  j["stride"] = g.stride;
  j["variants"] = nlohmann::ordered_json::array();
  return j;
}

}  // namespace cnnbench
