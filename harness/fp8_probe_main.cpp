// cnnbench_fp8_probe: issue 9's FP8 (E4M3) lever, measured one layer at a time before any
// network runs in FP8. For each chosen conv of a network it builds the layer as a cuDNN graph in
// fp16 and in four FP8 forms (kernels/fp8_case.h), tries every engine config heuristics offer,
// times those that build, and checks the fastest one's output at sampled positions against the
// exact result (the accuracy FP8 costs) and against an emulation of its storage (that the
// device computes what we think). The INT8 form (int8_to_fp16_per_channel: int32 sums, a
// descale per output channel) is the same question for issue 9's INT8 lever. FP8 and INT8 are
// opt-in precisions and never reported as fp16.
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
#include "harness/probe_cases.h"
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
  --variants   fp16, fp8_sample, fp8_to_fp16, fp8_to_fp16_per_channel, fp8_to_fp8,
               int8_to_fp16_per_channel, int8_to_int8_per_channel, fp16_to_int8, fp16_residual,
               int8_to_fp16_residual (default all); "vs fp16" compares a form with the residual
               add to fp16_residual, the others to fp16
  --max_engines  engine configs timed per variant, in heuristics' order (A, B, fallback)
  --emulate_only  no GPU: the host's emulation of each variant against the exact result at
               the sampled outputs (the accuracy the device should show), E4M3 and INT8 outputs scaled by
               the samples' amax
Exit status 3 where a variant ran but its output departs from the emulation of its storage.
)";

std::vector<Fp8Case> pick_cases(const std::string& network, const std::string& layers, int batch) {
  const std::vector<std::string> defaults =
      find_network(network).name == "resnet50"
          ? std::vector<std::string>{"layer1.0.conv2", "layer1.0.conv3", "layer2.1.conv2",
                                     "layer3.1.conv1", "layer3.1.conv2", "layer4.1.conv2",
                                     "layer4.1.conv3"}
          : std::vector<std::string>{};
  auto fits = [](const ConvGeometry& g) {
    return g.groups == 1 && g.x.c % 16 == 0 && g.y.c % 16 == 0;
  };
  std::vector<Fp8Case> out;
  for (const ProbeCase& c : pick_probe_cases(network, layers, batch, defaults, fits))
    out.push_back({c.name, c.g});
  return out;
}

std::vector<Fp8Variant> pick_variants(const std::string& s) {
  if (s.empty()) return all_fp8_variants();
  std::vector<Fp8Variant> out;
  for (const std::string& name : split_commas(s)) {
    bool found = false;
    for (Fp8Variant v : all_fp8_variants())
      if (name == fp8_variant_name(v)) out.push_back(v), found = true;
    if (!found) {
      std::string known;
      for (Fp8Variant v : all_fp8_variants())
        known += std::string(known.empty() ? "" : ", ") + fp8_variant_name(v);
      throw UserError("--variants: unknown variant '" + name + "' (" + known + ")");
    }
  }
  return out;
}

int run(int argc, char** argv) {
  ProbeOptions defaults;
  defaults.max_engines = 4, defaults.samples = 2048;
  const ProbeOptions o = parse_probe_options(argc, argv, defaults, {"emulate_only"});
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  const std::string &network = o.network, &layers = o.layers, &json_path = o.json;
  const int batch = o.batch, max_engines = o.max_engines, samples = o.samples;
  const uint64_t seed = o.seed;
  const bool emulate_only = o.has("emulate_only");
  const std::vector<Fp8Case> cases = pick_cases(network, layers, batch);
  const std::vector<Fp8Variant> variants = pick_variants(o.variants);
  rewrite_json(json_path, "");  // fail before measuring, not after

  if (emulate_only) {
    std::printf("%-16s %-24s %-24s %12s\n", "layer", "x -> y", "variant", "l2 vs exact");
    for (const Fp8Case& c : cases) {
      const Fp8CaseData d = make_fp8_case(c, seed, samples);
      for (Fp8Variant v : variants) {
        double amax = 0;
        for (double e : fp8_exact(d, v)) amax = std::max(amax, std::fabs(e));
        const double err =
            relative_l2(fp8_emulated(d, v, output_scale_for(v, amax)), fp8_exact(d, v));
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
                     {"int8",
                      "x per tensor, w per output channel, scale 127 / amax, codes "
                      "-127..127 rounded to nearest even; int32 sums"},
                     {"y_scale",
                      "E4M3 outputs: 448 / the graph's amax output of a first run (delayed "
                      "scaling); INT8 outputs: 127 / the sampled outputs' amax"}};
  doc["cases"] = nlohmann::ordered_json::array();
  int disagreements = 0;
  std::printf("%-16s %-24s %-24s %7s %5s %-26s %9s %8s %7s %10s %10s %s\n", "layer", "x -> y",
              "variant", "configs", "built", "fastest engine", "us", "TFLOP/s", "vs fp16",
              "l2 exact", "l2 emul", "agrees");
  for (const Fp8Case& c : cases) {
    const Fp8CaseData d = make_fp8_case(c, seed, samples);
    nlohmann::ordered_json jc = probe_case_json(c.name, c.g);
    double fp16_us_plain = -1, fp16_us_residual = -1;
    for (Fp8Variant v : variants) {
      const Fp8VariantResult r = run_fp8_variant(ctx, d, v, max_engines);
      if (v == Fp8Variant::Fp16) fp16_us_plain = r.best_us();
      if (v == Fp8Variant::Fp16Residual) fp16_us_residual = r.best_us();
      const double fp16_us = has_residual(v) ? fp16_us_residual : fp16_us_plain;
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
        if (fp8_output(v) || int8_output(v)) {
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
    rewrite_json(json_path, doc.dump(1));  // after each case: a later failure keeps these
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
