// The convs a layer probe (cnnbench_fp8_probe, cnnbench_bn_fusion_probe) runs: chosen from a
// network of the registry by module name, with the batch's geometry.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/conv_ref.h"

namespace cnnbench {

struct ProbeCase {
  std::string name;  // the module: "layer3.1.conv2"
  ConvGeometry g;
};

// `layers`: comma-separated module names, "all" (every conv that `keep` accepts), or empty (the
// `defaults`, which must be given then). UserError for a name the network lacks or a named conv
// that `keep` refuses.
std::vector<ProbeCase> pick_probe_cases(const std::string& network, const std::string& layers,
                                        int batch, const std::vector<std::string>& defaults,
                                        bool (*keep)(const ConvGeometry&));
std::vector<std::string> split_commas(const std::string& s);
// The flags both probes take: --network, --layers, --batch, --variants, --max_engines,
// --samples, --seed, --json, --help, and the given extra switches (flags without a value).
struct ProbeOptions {
  std::string network = "resnet50", layers, variants, json;
  int batch = 256, max_engines = 3, samples = 512;
  uint64_t seed = 1;
  std::vector<std::string> switches;  // the extra switches given
  bool help = false;
  bool has(const std::string& sw) const;
};
// Parses argv over `defaults`; UserError for an unknown argument or a bad number.
ProbeOptions parse_probe_options(int argc, char** argv, ProbeOptions defaults,
                                 const std::vector<std::string>& extra_switches = {});

// A probe's JSON entry for one case: layer, x, y, kernel, stride and an empty "variants".
nlohmann::ordered_json probe_case_json(const std::string& name, const ConvGeometry& g);

// Writes `text` to the --json file `path` (nothing where path is empty); with empty text, only
// checks that the file can be written. UserError naming the file otherwise.
void rewrite_json(const std::string& path, const std::string& text);

}  // namespace cnnbench
