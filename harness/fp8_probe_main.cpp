// cnnbench_fp8_probe: issue 9's FP8 (E4M3) lever, measured one layer at a time before any
// network runs in FP8. For each chosen conv of a network it builds the layer as a cuDNN graph in
// fp16 and in four FP8 forms (kernels/fp8_case.h), tries every engine config heuristics offer,
// times those that build, and checks the fastest one's output at sampled positions against the
// exact result (the accuracy FP8 costs) and against an emulation of its storage (that the
// device computes what we think). FP8 is an opt-in precision and never reported as fp16.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/check.h"
#include "harness/cli.h"
#include "harness/context.h"
#include "harness/device.h"
#include "harness/session.h"
#include "kernels/fp8.h"
#include "kernels/fp8_conv.h"
#include "networks/registry.h"

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench_fp8_probe [--network=resnet50] [--layers=NAME,...|all] [--batch=256]
                          [--variants=NAME,...] [--max_engines=4] [--samples=2048] [--seed=1]
                          [--json=FILE]
  --layers     the network's convs by module name (default for resnet50: layer1.0.conv2,
               layer1.0.conv3, layer2.1.conv2, layer3.1.conv1, layer3.1.conv2, layer4.1.conv2,
               layer4.1.conv3); all: every conv with channels in multiples of 16
  --variants   fp16, fp8_sample, fp8_to_fp16, fp8_to_fp16_per_channel, fp8_to_fp8 (default all)
  --max_engines  engine configs timed per variant, in heuristics' order (A, B, fallback)
  --emulate_only  no GPU: the host's emulation of each variant against the exact result at
               the sampled outputs (the accuracy the device should show), E4M3 outputs scaled by
               the samples' amax
Exit status 3 where a variant ran but its output departs from the emulation of its storage.
)";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<Fp8Case> pick_cases(const std::string& network, const std::string& layers, int batch) {
  const Graph g = build_network(network);
  std::vector<std::string> names = split(layers);
  if (layers.empty()) {
    if (find_network(network).name != "resnet50")
      throw UserError("--layers is needed for " + network + " (the default list is ResNet-50's)");
    names = {"layer1.0.conv2", "layer1.0.conv3", "layer2.1.conv2", "layer3.1.conv1",
             "layer3.1.conv2", "layer4.1.conv2", "layer4.1.conv3"};
  }
  const bool all = layers == "all";
  std::vector<Fp8Case> out;
  for (const Node& n : g.nodes()) {
    if (n.kind != OpKind::Conv) continue;
    if (!all && std::find(names.begin(), names.end(), n.name) == names.end()) continue;
    Dims x = g.node(n.inputs.at(0)).out, y = n.out;
    x.n = y.n = batch;
    if (all && (n.groups != 1 || x.c % 16 || y.c % 16)) continue;
    out.push_back({n.name, ConvGeometry{x, y, n.kernel, n.kernel_w, n.stride, n.pad, n.pad_w,
                                        n.dilation, n.groups}});
  }
  for (const std::string& name : names) {
    if (all) break;
    bool found = false;
    for (const Fp8Case& c : out) found |= c.name == name;
    if (!found) throw UserError("--layers: " + network + " has no conv named '" + name + "'");
  }
  return out;
}

std::vector<Fp8Variant> pick_variants(const std::string& s) {
  if (s.empty()) return all_fp8_variants();
  std::vector<Fp8Variant> out;
  for (const std::string& name : split(s)) {
    bool found = false;
    for (Fp8Variant v : all_fp8_variants())
      if (name == fp8_variant_name(v)) out.push_back(v), found = true;
    if (!found)
      throw UserError("--variants: unknown variant '" + name +
                      "' (fp16, fp8_sample, fp8_to_fp16, fp8_to_fp16_per_channel, fp8_to_fp8)");
  }
  return out;
}

int run(int argc, char** argv) {
  std::string network = "resnet50", layers, batch_s = "256", variants_s, engines_s = "4",
              samples_s = "2048", seed_s = "1", json_path;
  bool emulate_only = false;
  for (int i = 1; i < argc; ++i) {
    if (take_flag(i, argc, argv, "help", nullptr)) {
      std::cout << kUsage;
      return 0;
    }
    if (take_flag(i, argc, argv, "emulate_only", nullptr)) {
      emulate_only = true;
      continue;
    }
    if (take_flag(i, argc, argv, "network", &network) ||
        take_flag(i, argc, argv, "layers", &layers) ||
        take_flag(i, argc, argv, "batch", &batch_s) ||
        take_flag(i, argc, argv, "variants", &variants_s) ||
        take_flag(i, argc, argv, "max_engines", &engines_s) ||
        take_flag(i, argc, argv, "samples", &samples_s) ||
        take_flag(i, argc, argv, "seed", &seed_s) || take_flag(i, argc, argv, "json", &json_path))
      continue;
    throw UserError(std::string("unknown argument '") + argv[i] + "' (see --help)");
  }
  const int batch = int(parse_count(batch_s, "--batch"));
  const int max_engines = int(parse_count(engines_s, "--max_engines"));
  const int samples = int(parse_count(samples_s, "--samples"));
  const uint64_t seed = uint64_t(parse_count(seed_s, "--seed"));
  if (batch < 1 || max_engines < 1 || samples < 1)
    throw UserError("--batch, --max_engines and --samples must be at least 1");
  const std::vector<Fp8Case> cases = pick_cases(network, layers, batch);
  const std::vector<Fp8Variant> variants = pick_variants(variants_s);
  if (!json_path.empty()) {  // fail before measuring, not after
    std::ofstream probe(json_path, std::ios::app);
    if (!probe) throw UserError("--json: cannot write '" + json_path + "'");
  }

  if (emulate_only) {
    std::printf("%-16s %-24s %-24s %12s\n", "layer", "x -> y", "variant", "l2 vs exact");
    for (const Fp8Case& c : cases) {
      const Fp8CaseData d = make_fp8_case(c, seed, samples);
      for (Fp8Variant v : variants) {
        double amax = 0;
        for (double e : fp8_exact(d, v)) amax = std::max(amax, std::fabs(e));
        const double err = relative_l2(fp8_emulated(d, v, fp8_scale_for(amax)), fp8_exact(d, v));
        std::printf("%-16s %-24s %-24s %12.3e\n", c.name.c_str(),
                    (c.g.x.str() + "->" + std::to_string(c.g.y.c)).c_str(), fp8_variant_name(v),
                    err);
      }
    }
    return 0;
  }
  require_cuda_device();
  const DeviceInfo dev = discover_device();
  GpuContext ctx;
  nlohmann::ordered_json doc, context = nlohmann::ordered_json::object();
  for (const auto& [k, v] : context_entries(dev)) context[k] = v;
  doc["context"] = context;
  doc["settings"] = {{"network", find_network(network).name},
                     {"batch", batch},
                     {"max_engines", max_engines},
                     {"samples", samples},
                     {"seed", seed},
                     {"x", "max(0, N(0, 1)), per-tensor scale 448 / amax"},
                     {"w", "He-normal; per-tensor or per-output-channel scale 448 / amax"},
                     {"y_scale", "448 / the graph's amax output of a first run (delayed scaling)"}};
  doc["cases"] = nlohmann::ordered_json::array();
  int disagreements = 0;
  std::printf("%-16s %-24s %-24s %7s %5s %-26s %9s %8s %7s %10s %10s %s\n", "layer", "x -> y",
              "variant", "configs", "built", "fastest engine", "us", "TFLOP/s", "vs fp16",
              "l2 exact", "l2 emul", "agrees");
  for (const Fp8Case& c : cases) {
    const Fp8CaseData d = make_fp8_case(c, seed, samples);
    nlohmann::ordered_json jc;
    jc["layer"] = c.name;
    jc["x"] = c.g.x.str(), jc["y"] = c.g.y.str();
    jc["kernel"] = std::to_string(c.g.kernel_h) + "x" + std::to_string(c.g.kernel_w);
    jc["stride"] = c.g.stride;
    jc["variants"] = nlohmann::ordered_json::array();
    double fp16_us = -1;
    for (Fp8Variant v : variants) {
      const Fp8VariantResult r = run_fp8_variant(ctx, d, v, max_engines);
      if (v == Fp8Variant::Fp16) fp16_us = r.best_us();
      const bool ran = r.error.empty();
      if (ran && !r.agrees()) ++disagreements;
      const double us = r.best_us();
      std::printf(
          "%-16s %-24s %-24s %7d %5zu %-26s %9.2f %8.1f %7s %10.2e %10.2e %s\n", c.name.c_str(),
          (c.g.x.str() + "->" + std::to_string(c.g.y.c)).c_str(), fp8_variant_name(v), r.configs,
          r.engines.size(), ran ? r.engines.front().tag.c_str() : "-", us,
          us > 0 ? r.flops / us * 1e-6 : 0.0,
          fp16_us > 0 && us > 0 ? (std::to_string(fp16_us / us).substr(0, 4) + "x").c_str() : "-",
          r.rel_l2_exact, r.rel_l2_emulated,
          ran ? (r.agrees() ? "yes" : "NO") : ("not run: " + r.error).c_str());
      nlohmann::ordered_json jv;
      jv["variant"] = fp8_variant_name(v);
      jv["configs"] = r.configs;
      jv["refusals"] = r.refusals;
      jv["flops"] = r.flops;
      if (!ran) jv["error"] = r.error;
      jv["engines"] = nlohmann::ordered_json::array();
      for (const Fp8EngineResult& e : r.engines)
        jv["engines"].push_back(
            {{"tag", e.tag}, {"notes", e.notes}, {"workspace", e.workspace}, {"us", e.us}});
      if (ran) {
        jv["best_us"] = us;
        jv["tflops"] = r.flops / us * 1e-6;
        if (fp16_us > 0) jv["speedup_vs_fp16"] = fp16_us / us;
        jv["rel_l2_exact"] = r.rel_l2_exact;
        jv["rel_l2_emulated"] = r.rel_l2_emulated;
        if (fp8_output(v)) {
          jv["amax"] = r.amax;
          jv["y_scale"] = r.y_scale;
          jv["codes_off"] = r.codes_off;
        }
        jv["agrees"] = r.agrees();
      }
      jc["variants"].push_back(jv);
      for (const std::string& why : r.refusals)
        std::fprintf(stderr, "cnnbench_fp8_probe: %s %s: refused %s\n", c.name.c_str(),
                     fp8_variant_name(v), why.c_str());
    }
    doc["cases"].push_back(jc);
    if (!json_path.empty()) {  // rewritten after each case: a later failure keeps these
      std::ofstream f(json_path);
      f << doc.dump(1) << "\n";
      if (!f) throw UserError("--json: writing '" + json_path + "' failed");
    }
  }
  if (disagreements) {
    std::fprintf(stderr, "cnnbench_fp8_probe: %d variants depart from their emulation\n",
                 disagreements);
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench_fp8_probe", cnnbench::run, argc, argv);
}
