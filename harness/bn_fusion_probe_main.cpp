// cnnbench_bn_fusion_probe: issue 9's ResNet-50 training miss (6,628 img/s against 8,000 at 256).
// In call 22's fp16 step at 256 the convs' own times (forward, data and weight gradients) came to
// 17.3 of the step's 38.6 ms; most of the rest is BatchNorm's passes over memory. MLPerf-style
// training keeps BatchNorm out of separate passes with fused cuDNN graphs; this probe asks, per
// ResNet-50 layer, whether cuDNN builds them here, what each costs against the plain conv, and what
// it saves (the BatchNorm passes it makes unnecessary, at the copy bandwidth measured here).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "harness/ceilings.h"
#include "harness/check.h"
#include "harness/cli.h"
#include "harness/context.h"
#include "harness/device.h"
#include "harness/probe_cases.h"
#include "harness/session.h"
#include "kernels/bn_fusion_probe.h"

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench_bn_fusion_probe [--network=resnet50] [--layers=NAME,...|all] [--batch=256]
                                [--variants=NAME,...] [--max_engines=3] [--samples=512] [--seed=1]
                                [--json=FILE]
  --layers     convs by module name (default for resnet50: layer1.0.conv2, layer1.1.conv1,
               layer2.1.conv2, layer3.1.conv1, layer4.1.conv3); all: every conv of groups 1
  --variants   fprop, fprop_stats, sbr_fprop_stats, wgrad, sbr_wgrad, dgrad, dgrad_drelu
               (default all; a fused one is compared with its plain one when both run)
Per layer and variant: the engine configs heuristics offer, how many build, the fastest one's
time, its extra time over the plain variant, the BatchNorm traffic it saves (bytes, and
microseconds at the copy bandwidth measured here), and its output against a host reference at
sampled positions. Exit status 3 where a variant ran but departs from its reference.
)";

int run(int argc, char** argv) {
  const ProbeOptions o = parse_probe_options(argc, argv, ProbeOptions());
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  const std::string& network = o.network;
  const int batch = o.batch, max_engines = o.max_engines, samples = o.samples;
  const uint64_t seed = o.seed;
  const std::string& json_path = o.json;
  const std::vector<std::string> defaults =
      find_network(network).name == "resnet50"
          ? std::vector<std::string>{"layer1.0.conv2", "layer1.1.conv1", "layer2.1.conv2",
                                     "layer3.1.conv1", "layer4.1.conv3"}
          : std::vector<std::string>{};
  auto groups1 = [](const ConvGeometry& g) { return g.groups == 1; };
  const std::vector<ProbeCase> cases =
      pick_probe_cases(network, o.layers, batch, defaults, groups1);
  std::vector<BnFusionVariant> variants;
  for (const std::string& name : split_commas(o.variants)) {
    bool found = false;
    for (BnFusionVariant v : all_bn_fusion_variants())
      if (name == bn_fusion_variant_name(v)) variants.push_back(v), found = true;
    if (!found)
      throw UserError("--variants: unknown variant '" + name +
                      "' (fprop, fprop_stats, sbr_fprop_stats, wgrad, sbr_wgrad, dgrad, "
                      "dgrad_drelu)");
  }
  if (variants.empty()) variants = all_bn_fusion_variants();
  rewrite_json(json_path, "");  // fail before measuring, not after

  require_cuda_device();
  const DeviceInfo dev = discover_device();
  GpuContext ctx;
  const double gbps = measure_copy_gbps();
  nlohmann::ordered_json doc, context = nlohmann::ordered_json::object();
  for (const auto& [k, v] : context_entries(dev)) context[k] = v;
  doc["context"] = context;
  doc["settings"] = {{"network", find_network(network).name},
                     {"batch", batch},
                     {"max_engines", max_engines},
                     {"samples", samples},
                     {"seed", seed},
                     {"copy_gbps", gbps}};
  doc["cases"] = nlohmann::ordered_json::array();
  std::printf("copy bandwidth measured here: %.0f GB/s\n", gbps);
  std::printf("%-15s %-16s %7s %5s %-30s %9s %9s %9s %9s %10s %s\n", "layer", "variant", "configs",
              "built", "fastest engine", "us", "extra us", "saved us", "net us", "rel l2",
              "agrees");
  int disagreements = 0;
  for (const ProbeCase& c : cases) {
    const BnFusionData d = make_bn_fusion_data(c.g, seed);
    nlohmann::ordered_json jc = probe_case_json(c.name, c.g);
    std::vector<BnFusionResult> done;
    for (BnFusionVariant v : variants) {
      // A fused wgrad in its baseline's dW type first, so that the two times compare; the
      // other type after it, so that a form that builds only there is still found.
      std::vector<cudnnDataType_t> dw_types;
      const BnFusionResult* base = nullptr;
      for (const BnFusionResult& b : done)
        if (b.variant == bn_fusion_baseline(v) && b.error.empty()) base = &b;
      if (v == BnFusionVariant::SbrWgrad && base)
        dw_types = base->dw_half ? std::vector{CUDNN_DATA_HALF, CUDNN_DATA_FLOAT}
                                 : std::vector{CUDNN_DATA_FLOAT, CUDNN_DATA_HALF};
      BnFusionResult r = run_bn_fusion_variant(ctx, d, v, max_engines, samples, 10, dw_types);
      const bool ran = r.error.empty();
      if (ran && !r.agrees()) ++disagreements;
      double base_us = -1;
      if (base && (v != BnFusionVariant::SbrWgrad || base->dw_half == r.dw_half))
        base_us = base->best_us();  // (fp16 against fp32 dW is no comparison)
      const double us = r.best_us();
      const double extra = base_us > 0 && us > 0 && bn_fusion_baseline(v) != v ? us - base_us : 0;
      const double saved_bytes = bn_fusion_bytes_saved(v, c.g);
      const double saved_us = saved_bytes / (gbps * 1e3);
      std::printf("%-15s %-16s %7d %5zu %-30s %9.1f %9.1f %9.1f %9.1f %10.2e %s\n", c.name.c_str(),
                  bn_fusion_variant_name(v), r.configs, r.engines.size(),
                  ran ? (r.engines.front().tag.substr(0, 30 - (r.dw_half ? 8 : 0)) +
                         (r.dw_half ? " dW f16" : ""))
                            .c_str()
                      : "-",
                  us, extra, saved_us,
                  ran && saved_bytes > 0 && base_us > 0 ? saved_us - extra : NAN, r.rel_l2,
                  ran ? (r.agrees() ? "yes" : "NO") : ("not run: " + r.error).c_str());
      for (const std::string& why : r.refusals)
        std::fprintf(stderr, "cnnbench_bn_fusion_probe: %s %s: refused %s\n", c.name.c_str(),
                     bn_fusion_variant_name(v), why.c_str());
      nlohmann::ordered_json jv;
      jv["variant"] = bn_fusion_variant_name(v);
      jv["configs"] = r.configs;
      jv["refusals"] = r.refusals;
      if (!ran) jv["error"] = r.error;
      if (v == BnFusionVariant::Wgrad || v == BnFusionVariant::SbrWgrad)
        jv["dw_type"] = r.dw_half ? "f16" : "f32";
      jv["engines"] = nlohmann::ordered_json::array();
      for (const ProbeEngine& e : r.engines)
        jv["engines"].push_back(
            {{"tag", e.tag}, {"notes", e.notes}, {"workspace", e.workspace}, {"us", e.us}});
      if (ran) {
        jv["best_us"] = us;
        if (bn_fusion_baseline(v) != v && base_us > 0) jv["extra_us"] = extra;
        jv["bytes_saved"] = saved_bytes;
        jv["saved_us_at_copy_bandwidth"] = saved_us;
        jv["rel_l2"] = r.rel_l2;
        if (r.stats_err >= 0) jv["stats_rel_l2"] = r.stats_err;
        jv["agrees"] = r.agrees();
      }
      jc["variants"].push_back(jv);
      done.push_back(std::move(r));
    }
    doc["cases"].push_back(jc);
    rewrite_json(json_path, doc.dump(1));  // after each case: a later failure keeps these
  }
  if (disagreements) {
    std::fprintf(stderr, "cnnbench_bn_fusion_probe: %d variants depart from their reference\n",
                 disagreements);
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench_bn_fusion_probe", cnnbench::run, argc, argv);
}
