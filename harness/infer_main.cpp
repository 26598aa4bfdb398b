// cnnbench_infer: one forward of a network on given weights and input, for cross-checks against
// PyTorch. Input and output are .safetensors files: "input" float32 [N, 3, H, W] (NCHW, as
// PyTorch holds it) in, "logits" float32 [N, classes] out (a network of several outputs, YOLOR's
// heads, or of a spatial output: "output0", "output1", ... float32 [N, C, H, W]). The forward runs
// through the same compiled model and CUDA-graph replay as the benchmark (or op by op with
// --eager).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "harness/breakdown.h"
#include "harness/ceilings.h"
#include "harness/check.h"
#include "harness/plan_cache.h"
#include "harness/safetensors.h"
#include "harness/session.h"
#include "kernels/depthwise.h"
#include "kernels/storage.h"

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench_infer --network=NAME [--precision=fp32|tf32|fp16|bf16] [--batch=N]
                      [--weights=FILE] [--input=FILE] --output=FILE [--engine=heuristic|autotune]
                      [--eager] [--seed=N] [--input_size=N] [--num_classes=N] [--verify[=SAMPLES]]
  --share_plans=false  every layer builds its own cuDNN plan (layers of one shape share by default)
  --check_replays=false  no conv plan is replayed from a CUDA graph at build to check it gives
                       what a direct run gives (for the sanitizer runs, tools/sanitize_gpu.sh)
  --mode_b=false       autotune times heuristics mode A's top_k (and fallback) only, not also up
                       to top_k / 2 configs that only mode B offers
  --graph_tune_us=100  autotune times the fastest 8 candidates of a conv under this many
                       microseconds again, replayed from a CUDA graph; 0: eager launches alone
  --exclude_engines=eng4,...  cuDNN engines never to use (a name takes any knobs;
                       'nondeterministic' every engine cuDNN marks so)
  --deterministic      only engines cuDNN does not mark nondeterministic
  --build_threads=N    host threads that build cuDNN plans ahead of tuning (default: the
                       host's cores, at most 16; 1: one by one)
  --graph_edges=captured|full  keep the CUDA graph's programmatic (PDL) edges (default), or make
                       them full-completion dependencies
  --max_repairs=N      rebuilds, each banning the engine of the first layer where the graph
                       replay departs from eager, before giving up (default 6; 0: none)
  --plan_cache=FILE    autotune's choice per conv shape on disk (as cnnbench's --plan_cache)
  --pad_channels=false  the 3-channel stem reads the image as it is, not a zero-padded copy
  --se_fold            at batch 1, fold each squeeze-excitation's gates into the next 1x1 conv
  --depthwise=auto|cudnn|cnnbench  who computes depthwise convs: auto (default) times cuDNN
                       against our kernel per layer under autotune and keeps the faster, and
                       takes cuDNN's under heuristics; cudnn or cnnbench alone
  --stem=auto|cudnn|cnnbench  the padded stem (fp16, bf16): auto times the pad op plus cuDNN's
                       conv against our stem kernel under autotune; cudnn or cnnbench alone
  --bisect_graph       capture the first k ops for k = 1.. and report where the graph replay
                       first parts from eager execution
  --breakdown[=FILE]   after the forward (and --verify), each layer alone: its time (a CUDA graph
                       of 20 launches), FLOPs, bytes, TFLOP/s, GB/s and roofline bound against
                       the ceilings measured here (a cuBLASLt 8192^3 GEMM in this precision and a
                       1 GiB device-to-device copy), the sum of layers against the whole graph;
                       a table on stdout, and JSON to FILE
  --verify  also recompute SAMPLES (default 512) outputs of every conv and linear layer on the
            host from that layer's actual inputs, print each layer's relative L2 error, and
            fail if one exceeds the precision's tolerance (fp32 1e-5, tf32 1e-3, fp16/bf16 1e-2)
)";

int run(int argc, char** argv) {
  std::string network, precision = "fp32", batch_s = "1", weights_path, input_path, output_path,
                       engine = "heuristic", seed_s = "0", size_s = "0", verify_s, share_s = "true",
                       pad_s = "true", mode_b_s = "true", classes_s = "0", edges_s = "captured",
                       exclude_s, threads_s = std::to_string(default_build_threads()),
                       repairs_s = "6", depthwise_s = "auto", stem_s = "auto", breakdown_s,
                       plan_cache_s, graph_tune_s = "100", replays_s = "true";
  bool bisect = false, se_fold = false;
  bool eager = false, deterministic = false;
  for (int i = 1; i < argc; ++i) {
    if (take_flag(i, argc, argv, "help", nullptr)) {
      std::cout << kUsage;
      return 0;
    }
    if (take_flag(i, argc, argv, "network", &network) ||
        take_flag(i, argc, argv, "precision", &precision) ||
        take_flag(i, argc, argv, "batch", &batch_s) ||
        take_flag(i, argc, argv, "weights", &weights_path) ||
        take_flag(i, argc, argv, "input", &input_path) ||
        take_flag(i, argc, argv, "output", &output_path) ||
        take_flag(i, argc, argv, "engine", &engine) || take_flag(i, argc, argv, "seed", &seed_s) ||
        take_flag(i, argc, argv, "input_size", &size_s) ||
        take_flag(i, argc, argv, "num_classes", &classes_s))
      continue;
    if (take_flag(i, argc, argv, "eager", nullptr)) {
      eager = true;
      continue;
    }
    if (std::string(argv[i]) == "--verify") {
      verify_s = "512";
      continue;
    }
    if (take_flag(i, argc, argv, "verify", &verify_s)) continue;
    if (take_flag(i, argc, argv, "share_plans", &share_s)) continue;
    if (take_flag(i, argc, argv, "check_replays", &replays_s)) continue;
    if (take_flag(i, argc, argv, "mode_b", &mode_b_s)) continue;
    if (take_flag(i, argc, argv, "graph_tune_us", &graph_tune_s)) continue;
    if (take_flag(i, argc, argv, "pad_channels", &pad_s)) continue;
    if (take_flag(i, argc, argv, "graph_edges", &edges_s)) continue;
    if (take_flag(i, argc, argv, "exclude_engines", &exclude_s)) continue;
    if (take_flag(i, argc, argv, "deterministic", nullptr)) {
      deterministic = true;
      continue;
    }
    if (take_flag(i, argc, argv, "build_threads", &threads_s)) continue;
    if (take_flag(i, argc, argv, "max_repairs", &repairs_s)) continue;
    if (take_flag(i, argc, argv, "depthwise", &depthwise_s)) continue;
    if (take_flag(i, argc, argv, "stem", &stem_s)) continue;
    if (take_flag(i, argc, argv, "plan_cache", &plan_cache_s)) {
      if (plan_cache_s.empty()) throw UserError("--plan_cache needs a file name");
      continue;
    }
    if (take_flag(i, argc, argv, "se_fold", nullptr)) {
      se_fold = true;
      continue;
    }
    if (std::string(argv[i]) == "--breakdown") {
      breakdown_s = "-";
      continue;
    }
    if (take_flag(i, argc, argv, "breakdown", &breakdown_s)) continue;
    if (take_flag(i, argc, argv, "bisect_graph", nullptr)) {
      bisect = true;
      continue;
    }
    throw UserError(std::string("unknown flag '") + argv[i] + "' (see --help)");
  }
  if (network.empty()) throw UserError("--network is required (see --help)");
  network = find_network(network).name;  // an alias becomes the canonical name
  if (output_path.empty()) throw UserError("--output is required (see --help)");
  auto to_int = parse_count;
  const int batch = int(to_int(batch_s, "batch"));
  if (batch < 1) throw UserError("--batch must be at least 1");

  const int input_size = int(to_int(size_s, "input_size"));
  const int classes = int(to_int(classes_s, "num_classes"));
  const Graph g = build_network(network, input_size, classes);
  const uint64_t seed = uint64_t(to_int(seed_s, "seed"));
  const HostWeights w = weights_path.empty()
                            ? network_random_weights(network, input_size, classes, seed)
                            : network_file_weights(network, input_size, classes, weights_path);
  std::vector<float> input;
  if (!input_path.empty()) {
    const SafetensorsFile f = SafetensorsFile::load(input_path);
    const Dims d = g.node(g.input_id()).out;
    const std::vector<int64_t> want{batch, d.c, d.h, d.w};
    if (f.info("input").shape != want)
      throw UserError("input file " + input_path + ": tensor 'input' must have shape [" +
                      std::to_string(batch) + ", " + std::to_string(d.c) + ", " +
                      std::to_string(d.h) + ", " + std::to_string(d.w) + "]");
    input = f.to_float("input");
  }

  // Every flag is checked before the device is looked at, so a typo is named on any host.
  if (share_s != "true" && share_s != "false")
    throw UserError("--share_plans takes true or false, not '" + share_s + "'");
  if (pad_s != "true" && pad_s != "false")
    throw UserError("--pad_channels takes true or false, not '" + pad_s + "'");
  if (replays_s != "true" && replays_s != "false")
    throw UserError("--check_replays takes true or false, not '" + replays_s + "'");
  if (mode_b_s != "true" && mode_b_s != "false")
    throw UserError("--mode_b takes true or false, not '" + mode_b_s + "'");
  const double graph_tune_us = parse_graph_tune_us(graph_tune_s);
  const GraphEdges edges = parse_graph_edges(edges_s);
  std::vector<std::string> excluded = parse_engine_list(exclude_s);
  if (deterministic) excluded.push_back(kNondeterministic);
  const int build_threads = parse_build_threads(threads_s);
  const int max_repairs = int(to_int(repairs_s, "max_repairs"));
  const DepthwiseChoice depthwise = parse_depthwise_choice(depthwise_s);
  const StemChoice stem = parse_stem_choice(stem_s);
  if (!breakdown_s.empty() && breakdown_s != "-") {  // fail before measuring, not after
    std::ofstream probe(breakdown_s);
    if (!probe) throw UserError("--breakdown: cannot write '" + breakdown_s + "'");
  }
  std::unique_ptr<DiskPlanCache> plan_cache;  // read before the device is looked at
  if (!plan_cache_s.empty()) plan_cache = std::make_unique<DiskPlanCache>(plan_cache_s);
  require_cuda_device();
  GpuContext ctx;
  if (plan_cache) {
    const DeviceInfo dev = discover_device(0);
    plan_cache->set_scope(plan_cache_scope_device(dev), plan_cache_scope_library(dev),
                          plan_cache_search(mode_b_s == "true", graph_tune_us));
    ctx.disk_plans = plan_cache.get();
  }
  ctx.share_plans = share_s == "true";
  ctx.check_replays = replays_s == "true";
  ctx.heuristic_mode_b = mode_b_s == "true";
  ctx.graph_tune_below_us = graph_tune_us;
  ctx.graph_edges = edges;
  ctx.excluded = excluded;
  ctx.build_threads = build_threads;
  CompileOptions opt;
  opt.precision = parse_precision(precision);
  opt.batch = batch;
  opt.engine = parse_engine_mode(engine);
  opt.input_seed = seed + 1;
  opt.se_fold = se_fold;
  opt.pad_channels = pad_s == "true";
  opt.depthwise = depthwise;
  opt.stem = stem;
  auto make = [&] {
    auto m = std::make_unique<Model>(ctx, g, w, opt);
    if (!input.empty()) m->set_input(input);
    return m;
  };
  if (bisect) {
    auto m = make();
    for (const auto& [name, err] : m->graph_prefix_check())
      std::fprintf(stderr, "bisect %-24s graph vs eager rel_l2 %.2e%s\n", name.c_str(), err,
                   err > 1e-3 ? "  <- differs" : "");
  }
  std::unique_ptr<Model> model_p;
  std::unique_ptr<Runner> runner_p;
  std::vector<std::string> repairs;
  if (eager) {
    model_p = make();
    runner_p = std::make_unique<Runner>(*model_p, ctx);
  } else {
    build_and_capture(ctx, make, model_p, runner_p, repairs, nullptr, max_repairs);
  }
  if (plan_cache) {
    plan_cache->save();
    std::fprintf(stderr,
                 "cnnbench_infer: plan cache %s: %d hits (%d used, %d stale), %d outdated (tuned "
                 "again), %d misses\n",
                 plan_cache->path().c_str(), plan_cache->hits, plan_cache->used, plan_cache->stale,
                 plan_cache->outdated, plan_cache->misses);
  }
  Model& model = *model_p;
  Runner& runner = *runner_p;
  runner.launch(!eager);
  runner.sync();
  if (!eager)
    std::fprintf(stderr,
                 "cnnbench_infer: graph of %zu nodes, %zu edges, %zu programmatic, %zu made full "
                 "(graph_edges=%s), %zu engines banned for departing from eager; nodes: %s\n",
                 runner.graph_nodes(), runner.edges().total, runner.edges().programmatic,
                 runner.edges_made_full(), graph_edges_name(edges), repairs.size(),
                 runner.census().c_str());
  for (const std::string& r : repairs)
    std::fprintf(stderr, "cnnbench_infer: banned %s\n", r.c_str());
  const std::vector<float> out = model.output();
  // A classifier's logits [N, classes]; a network of several outputs (YOLOR's three heads) each
  // as output{k}, NCHW [N, C, H, W].
  std::vector<SafetensorOut> tensors;
  if (model.output_count() == 1 && model.output_dims().h * model.output_dims().w == 1) {
    const Dims od = model.output_dims();
    tensors.push_back({"logits", {od.n, od.c}, out});
  } else {  // several outputs, or a spatial one (a generator's image)
    for (size_t k = 0; k < model.output_count(); ++k) {
      const Dims od = model.output_dims(k);
      tensors.push_back(
          {"output" + std::to_string(k), {od.n, od.c, od.h, od.w}, k == 0 ? out : model.output(k)});
    }
  }
  save_safetensors(
      output_path, tensors,
      {{"network", network}, {"precision", precision}, {"mode", eager ? "eager" : "graph"}});
  int worst_failures = 0;
  if (!verify_s.empty()) {
    const int samples = int(to_int(verify_s, "verify"));
    const double tol = opt.precision == Precision::FP32   ? 1e-5
                       : opt.precision == Precision::TF32 ? 1e-3
                                                          : 1e-2;
    // The whole forward op by op against the graph replay that produced `out`.
    runner.launch(false);
    runner.sync();
    const std::vector<float> eager_out = model.output();
    const double graph_vs_eager = relative_l2(out, eager_out);
    std::fprintf(stderr, "verify graph replay vs eager: rel_l2 %.2e %s\n", graph_vs_eager,
                 graph_vs_eager <= tol ? "" : "FAIL");
    worst_failures += !(graph_vs_eager <= tol);
    const auto layers = model.layers();
    for (bool graph : {false, true}) {
      for (const auto& [name, err] : model.verify_layers(samples, seed + 7, graph)) {
        std::string engine;
        for (const LayerRecord& r : layers)
          if (r.name == name) engine = r.engine + (r.fused ? "" : " (unfused)");
        const bool bad = !(err <= tol);
        worst_failures += bad;
        std::fprintf(stderr, "verify %-5s %-24s rel_l2 %.2e %s %s\n", graph ? "graph" : "eager",
                     name.c_str(), err, engine.c_str(), bad ? "FAIL" : "");
      }
    }
  }
  if (!breakdown_s.empty()) {
    // The whole forward first (graph replay, or eager with --eager), then each layer alone; the
    // layers' repeated runs leave the buffers changed, so this comes after everything else.
    constexpr int kRuns = 20;
    Breakdown b;
    b.graph_us = runner.time_ms(!eager, kRuns) * 1000.0 / kRuns;
    b.ceilings.tflops = measure_gemm_tflops(opt.precision);
    b.ceilings.gbps = measure_copy_gbps();
    const std::vector<double> us = model.time_each_op(kRuns);
    const std::vector<LayerRecord> recs = model.layers();
    const std::vector<Model::OpCost>& costs = model.op_costs();
    for (size_t i = 0; i < recs.size(); ++i)
      b.layers.push_back({recs[i].name, recs[i].op, recs[i].engine, us.at(i), costs.at(i).flops,
                          costs.at(i).bytes});
    std::fputs(breakdown_table(b).c_str(), stdout);
    if (breakdown_s != "-") {
      std::ofstream f(breakdown_s);
      nlohmann::json j = breakdown_json(b);
      j["network"] = network, j["precision"] = precision, j["batch"] = batch;
      j["mode"] = eager ? "eager" : "graph";
      f << j.dump(1) << "\n";
      if (!f) throw UserError("--breakdown: writing '" + breakdown_s + "' failed");
    }
  }
  int fused = 0, convs = 0, in_graph = 0;
  std::map<std::string, int> sources;  // which heuristics list offered each shape's engine
  for (const LayerRecord& r : model.layers()) {
    if (r.op.rfind("conv", 0) == 0) ++convs, fused += r.fused;
    if (!r.heuristic_source.empty() && !r.plan_reused) ++sources[r.heuristic_source];
    if (r.tuned_in_graph && !r.plan_reused) ++in_graph;
    for (const std::string& tag : r.rejected)
      std::fprintf(stderr, "cnnbench_infer: %s: refused plan %s (its CUDA-graph replay differs)\n",
                   r.name.c_str(), tag.c_str());
  }
  std::string by_source;
  for (const auto& [source, n] : sources)
    by_source += (by_source.empty() ? "" : ", ") + source + " " + std::to_string(n);
  std::fprintf(stderr,
               "cnnbench_infer: %s %s batch %d: %d/%d convs fused, engines by heuristics list "
               "(one per shape): %s; %d shapes timed as CUDA-graph replays (the graph round, "
               "--graph_tune_us=%g, and the depthwise and stem races); "
               "logits written to %s\n",
               network.c_str(), precision.c_str(), batch, fused, convs,
               by_source.empty() ? "none" : by_source.c_str(), in_graph, graph_tune_us,
               output_path.c_str());
  if (worst_failures > 0) {
    std::fprintf(stderr, "cnnbench_infer: %d layers exceed the tolerance\n", worst_failures);
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench_infer", cnnbench::run, argc, argv);
}
