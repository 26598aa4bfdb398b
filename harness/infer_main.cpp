// cnnbench_infer: one forward of a network on given weights and input, for cross-checks against
// PyTorch. Input and output are .safetensors files: "input" float32 [N, 3, H, W] (NCHW, as
// PyTorch holds it) in, "logits" float32 [N, classes] out. The forward runs through the same
// compiled model and CUDA-graph replay as the benchmark (or op by op with --eager).
#include <cstdio>
#include <iostream>

#include "harness/check.h"
#include "harness/safetensors.h"
#include "harness/session.h"

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench_infer --network=NAME [--precision=fp32|tf32|fp16|bf16] [--batch=N]
                      [--weights=FILE] [--input=FILE] --output=FILE [--engine=heuristic|autotune]
                      [--eager] [--seed=N] [--input_size=N]
)";

int run(int argc, char** argv) {
  std::string network, precision = "fp32", batch_s = "1", weights_path, input_path, output_path,
                       engine = "heuristic", seed_s = "0", size_s = "0";
  bool eager = false;
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
        take_flag(i, argc, argv, "input_size", &size_s))
      continue;
    if (take_flag(i, argc, argv, "eager", nullptr)) {
      eager = true;
      continue;
    }
    throw UserError(std::string("unknown flag '") + argv[i] + "' (see --help)");
  }
  if (network.empty()) throw UserError("--network is required (see --help)");
  if (output_path.empty()) throw UserError("--output is required (see --help)");
  auto to_int = [](const std::string& s, const char* what) {
    try {
      size_t used = 0;
      const long v = std::stol(s, &used);
      if (used == s.size() && v >= 0) return v;
    } catch (const std::exception&) {
    }
    throw UserError(std::string("--") + what + " must be a non-negative integer, not '" + s + "'");
  };
  const int batch = int(to_int(batch_s, "batch"));
  if (batch < 1) throw UserError("--batch must be at least 1");

  const Graph g = build_network(network, int(to_int(size_s, "input_size")));
  const uint64_t seed = uint64_t(to_int(seed_s, "seed"));
  const HostWeights w =
      weights_path.empty() ? random_weights(g, seed) : load_weights(g, weights_path);
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

  require_cuda_device();
  GpuContext ctx;
  CompileOptions opt;
  opt.precision = parse_precision(precision);
  opt.batch = batch;
  opt.engine = parse_engine_mode(engine);
  opt.input_seed = seed + 1;
  Model model(ctx, g, w, opt);
  if (!input.empty()) model.set_input(input);
  Runner runner(model, ctx);
  runner.launch(!eager);
  runner.sync();
  const std::vector<float> out = model.output();
  const Dims od = model.output_dims();
  save_safetensors(
      output_path, {{"logits", {od.n, od.c}, out}},
      {{"network", network}, {"precision", precision}, {"mode", eager ? "eager" : "graph"}});
  int fused = 0, convs = 0;
  for (const LayerRecord& r : model.layers())
    if (r.op.rfind("conv", 0) == 0) ++convs, fused += r.fused;
  std::fprintf(stderr, "cnnbench_infer: %s %s batch %d: %d/%d convs fused, logits written to %s\n",
               network.c_str(), precision.c_str(), batch, fused, convs, output_path.c_str());
  return 0;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  try {
    return cnnbench::run(argc, argv);
  } catch (const cnnbench::UserError& e) {
    std::fprintf(stderr, "cnnbench_infer: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnnbench_infer: %s\n", e.what());
    return 1;
  }
}
