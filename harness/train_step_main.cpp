// cnnbench_train_step: one training step of a network on given weights and batch, for the
// cross-check against PyTorch (tools/train_step_crosscheck.py defines the contract). In: a
// torchvision-named state_dict (.safetensors), "input" float32 [N, 3, S, S] (NCHW) and "labels"
// integers [N]. Out: the state_dict after the step (parameters after the optimizer, BatchNorm
// running statistics after the forward) as F32, and a JSON report with the step's loss (before
// the update) and the L2 norm of every trainable parameter's gradient (before weight decay).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/breakdown.h"
#include "harness/ceilings.h"
#include "harness/check.h"
#include "harness/context.h"
#include "harness/safetensors.h"
#include "harness/session.h"
#include "kernels/timing.h"
#include "networks/registry.h"
#include "networks/train_cost.h"
#include "networks/train_model.h"
#include "networks/weights.h"

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench_train_step --network=NAME --weights=FILE --input=FILE --labels=FILE
                           --output=FILE --report=FILE [--batch=N] [--input_size=N]
                           [--num_classes=N] [--precision=fp32|tf32] [--optimizer=sgd|adam]
                           [--lr=X] [--momentum=X] [--weight_decay=X] [--engine=heuristic|autotune]
                           [--steps=N] [--reuse_memory=1|0] [--dropout=P] [--pad_channels=1|0]
                           [--relu_masks=1|0] [--bn_mask_from_input=1|0]
       cnnbench_train_step --network=NAME --breakdown=FILE --batch=N [--precision=P] [...]
  One training step (or --steps of them on the same batch; the report's loss is the first
  step's): the forward with BatchNorm in training mode, softmax cross-entropy (mean over the
  batch), the backward, then SGD (torch.optim.SGD, no dampening or Nesterov) or Adam
  (torch.optim.Adam, betas 0.9 and 0.999, eps 1e-8), from a fresh state.
  --reuse_memory=0  every activation and gradient in a buffer of its own (no memory plan), to
            tell a planning error from a numerical one
  --pad_channels=0  the 3-channel stem as it is, not padded with zero channels (tf32, fp16, bf16)
  --relu_masks=0  ResNet's block tails (BatchNorm + add + ReLU) keep no bit mask of the ReLU: the
            backward reads the block's output twice instead (for comparison)
  --bn_mask_from_input=0  a BatchNorm + ReLU with no residual reads its saved output for ReLU's
            mask in the backward instead of recomputing it from the input (for comparison)
  --stem=auto|cudnn|cnnbench  the padded stem's forward conv (fp16, bf16): auto races cuDNN's
            against our stem kernel under autotune (kernels/stem.h); cudnn or cnnbench alone
  --stem_wgrad=auto|cudnn|cnnbench  the padded stem's weight gradient: cnnbench (default; or
            CNNBENCH_STEM_WGRAD=1), our kernel from the input itself; cudnn (0), on the padded
            copy; auto (2), under autotune the faster of the two (kernels/stem_wgrad_op.h)
  --check_replays=0  no plan is replayed from a CUDA graph at build to check it gives what a
            direct run gives (each conv then runs there once less than three times; for the
            sanitizer runs, tools/sanitize_gpu.sh)
  --dropout=P  every dropout's probability set to P in [0, 1); 0 makes the step deterministic,
            to compare it with a framework's step with dropout off
  --output  the state_dict after the step(s), every floating-point tensor of --weights, F32
  --report  JSON: {"loss": the first step's loss, "losses": [...], "grad_norms": {name: L2 norm
            of dL/dp, the first step's}, "network", "precision", "batch", ...}
  --breakdown=FILE  where the step's time goes: the whole step captured in a CUDA graph and
            timed, then each of its launches alone (a graph of 10), written as JSON and printed
            as a table by kind. --weights, --input and --labels may then be left out (the
            suite's random weights, a uniform batch of --batch images, labels i % classes),
            --output and --report too, and any precision runs (fp16, bf16 as the suite does).
  --cost_model=TFLOPS,GBPS  no GPU: the step's work and memory traffic as the suite's kernels do
            it (networks/train_cost.h), by kind, and the step were every op at its roofline under
            those ceilings (needs --network, --batch and --precision only)
  --check_finite=N  with --breakdown: first N eager steps, each followed by the loss, the loss
            scale, the steps skipped so far and the trainable parameters whose gradient holds a
            non-finite value (a diagnosis of fp16's skipped steps); then it stops, timing nothing
)";

// --breakdown: the step's graph time, then each launch alone; JSON to `path`, a table to stdout.
int breakdown(const Graph& g, const TrainOptions& opt, const std::string& path, int check_steps,
              bool check_replays) {
  require_cuda_device();
  // Where the run's own time goes (a breakdown took about 95 s a run on an H100 in calls 107 and
  // 110, of a device call's 600): printed and kept in the JSON's "phases_s".
  using Clock = std::chrono::steady_clock;
  auto last = Clock::now();
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  auto phase = [&](const char* name) {
    const auto now = Clock::now();
    phases[name] = std::chrono::duration<double>(now - last).count();
    last = now;
  };
  GpuContext ctx;
  ctx.check_replays = check_replays;
  TrainModel m(ctx, g, random_weights(g, 1), opt);
  phase("build");
  for (int i = 0; i < check_steps; ++i) {
    m.step(ctx.stream);
    const float loss = m.loss();
    std::vector<std::string> bad;
    double largest = 0;
    std::string largest_name;
    for (const std::string& name : m.trainable_names()) {
      bool finite = true;
      for (float v : m.gradient(name)) {
        finite = finite && std::isfinite(v);
        if (std::isfinite(v) && std::abs(v) > largest) largest = std::abs(v), largest_name = name;
      }
      if (!finite) bad.push_back(name);
    }
    std::printf("check step %d: loss %.5f, loss scale %g, %d skipped, %zu non-finite gradients", i,
                loss, m.loss_scale(), m.skipped_steps(), bad.size());
    for (size_t k = 0; k < bad.size() && k < 6; ++k)
      std::printf("%s %s", k ? "," : ":", bad[k].c_str());
    std::printf("; largest |g| %.3g (%s)\n", largest, largest_name.c_str());
  }
  if (check_steps > 0) return 0;
  cudaStream_t s = nullptr;
  CNN_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double step_us = graph_us([&](cudaStream_t st) { m.step(st); }, s, 5);
  CNN_CHECK_CUDA(cudaStreamDestroy(s));
  const float loss = m.loss();
  phase("step_graph");
  const std::vector<TrainModel::LaunchTime> t = m.time_each_launch(10);
  phase("each_launch");
  // By kind: the label's first two words ("bwd-filter Conv", "fwd BatchNorm+relu").
  std::map<std::string, std::pair<double, int>> kinds;
  double sum = 0;
  nlohmann::ordered_json launches = nlohmann::ordered_json::array();
  for (const auto& l : t) {
    const size_t a = l.label.find(' '), b = a == std::string::npos ? a : l.label.find(' ', a + 1);
    auto& k = kinds[l.label.substr(0, b)];
    k.first += l.us, k.second += 1;
    sum += l.us;
    launches.push_back({{"label", l.label}, {"us", l.us}});
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> sorted(kinds.begin(), kinds.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("%s %s batch %d: step %.1f us (%.0f img/s), launches alone %.1f us, loss %.4f\n",
              g.name().c_str(), precision_name(opt.precision), opt.batch, step_us,
              opt.batch * 1e6 / step_us, sum, loss);
  nlohmann::ordered_json by_kind = nlohmann::ordered_json::object();
  for (const auto& [k, v] : sorted) {
    std::printf("  %-28s %5d launches %10.1f us %5.1f%%\n", k.c_str(), v.second, v.first,
                100.0 * v.first / sum);
    by_kind[k] = {{"launches", v.second}, {"us", v.first}};
  }
  // The roofline per op (issue 9): each op's launches summed, beside its work and traffic as the
  // suite's kernels do it (networks/train_cost.h), under the ceilings measured here; then the same
  // by kind, and the floor: the step were every op at its roofline.
  Breakdown rb;
  rb.graph_us = step_us;
  rb.ceilings.tflops = measure_gemm_tflops(opt.precision);
  rb.ceilings.gbps = measure_copy_gbps();
  phase("ceilings");
  const int elem = int(dtype_size(storage_type(opt.precision)));
  std::map<int, size_t> row_of;  // plan op -> its row
  for (const auto& l : t) {
    if (l.op < 0) {
      rb.layers.push_back({l.label, "optimizer", "", l.us, 0, 0});
      continue;
    }
    auto it = row_of.find(l.op);
    if (it != row_of.end()) {
      rb.layers[it->second].us += l.us;
      continue;
    }
    const TrainOpCost c = train_op_cost(g, m.plan().ops[size_t(l.op)], opt.batch, elem);
    row_of[l.op] = rb.layers.size();
    rb.layers.push_back({l.label, c.kind, "", l.us, c.flops, c.bytes});
  }
  const Breakdown kinds_rb = by_op(rb);
  const double floor_us = roofline_floor_us(rb);
  std::printf("\nroofline by kind (networks/train_cost.h's traffic model):\n%s",
              breakdown_table(kinds_rb).c_str());
  std::printf("every op at its roofline: %.1f us a step (%.0f img/s); measured %.1f us (%.0f%%)\n",
              floor_us, opt.batch * 1e6 / floor_us, step_us, 100.0 * floor_us / step_us);
  std::printf("this run: build %.1f s, step graph %.1f s, each launch %.1f s, ceilings %.1f s\n",
              phases["build"].get<double>(), phases["step_graph"].get<double>(),
              phases["each_launch"].get<double>(), phases["ceilings"].get<double>());
  nlohmann::ordered_json j;
  j["network"] = g.name();
  j["precision"] = precision_name(opt.precision);
  j["batch"] = opt.batch;
  j["engine"] = engine_mode_name(opt.engine);
  // The tails that kept ReLU's mask as bits (none under CNNBENCH_SCALAR_BN=1 or --relu_masks=0).
  int masks = 0;
  for (const TrainOp& op : m.plan().ops) masks += op.pass == TrainPass::Forward && op.relu_mask;
  j["relu_masks"] = opt.relu_masks;
  j["relu_mask_tails"] = masks;
  j["bn_mask_from_input"] = opt.bn_mask_from_input;
  j["pad_channels"] = opt.pad_channels;
  j["stem_wgrad"] = kernel_choice_name(opt.stem_wgrad);
  // The kernels' A/B switches set for this run (CNNBENCH_BN_EXACT_SILU=1 and the like).
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const auto& [k, v] : cnnbench_switches()) env[k] = v;
  j["cnnbench_env"] = env;
  j["step_us"] = step_us;
  j["launches_sum_us"] = sum;
  j["loss"] = loss;
  j["by_kind"] = by_kind;
  j["launches"] = launches;
  j["roofline_floor_us"] = floor_us;
  j["roofline_by_kind"] = breakdown_json(kinds_rb);
  j["roofline"] = breakdown_json(rb);
  j["phases_s"] = phases;
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) throw UserError("--breakdown: cannot write " + path);
  return 0;
}

int run(int argc, char** argv) {
  std::string network, weights_path, input_path, labels_path, output_path, report_path,
      batch_s = "0", size_s = "0", classes_s = "1000", precision = "fp32", optimizer = "sgd",
      lr_s = "0.1", momentum_s = "0.9", wd_s = "0", engine = "heuristic", steps_s = "1",
      reuse_s = "1", pad_s = "1", stem_s = "auto", wgrad_s, dropout_s, breakdown_path,
      check_s = "0", cost_model, masks_s = "1", from_input_s = "1", replays_s = "1";
  for (int i = 1; i < argc; ++i) {
    if (take_flag(i, argc, argv, "help", nullptr)) {
      std::cout << kUsage;
      return 0;
    }
    if (take_flag(i, argc, argv, "network", &network) ||
        take_flag(i, argc, argv, "weights", &weights_path) ||
        take_flag(i, argc, argv, "input", &input_path) ||
        take_flag(i, argc, argv, "labels", &labels_path) ||
        take_flag(i, argc, argv, "output", &output_path) ||
        take_flag(i, argc, argv, "report", &report_path) ||
        take_flag(i, argc, argv, "batch", &batch_s) ||
        take_flag(i, argc, argv, "input_size", &size_s) ||
        take_flag(i, argc, argv, "num_classes", &classes_s) ||
        take_flag(i, argc, argv, "precision", &precision) ||
        take_flag(i, argc, argv, "optimizer", &optimizer) ||
        take_flag(i, argc, argv, "lr", &lr_s) ||
        take_flag(i, argc, argv, "momentum", &momentum_s) ||
        take_flag(i, argc, argv, "weight_decay", &wd_s) ||
        take_flag(i, argc, argv, "engine", &engine) ||
        take_flag(i, argc, argv, "steps", &steps_s) ||
        take_flag(i, argc, argv, "reuse_memory", &reuse_s) ||
        take_flag(i, argc, argv, "pad_channels", &pad_s) ||
        take_flag(i, argc, argv, "relu_masks", &masks_s) ||
        take_flag(i, argc, argv, "bn_mask_from_input", &from_input_s) ||
        take_flag(i, argc, argv, "stem", &stem_s) ||
        take_flag(i, argc, argv, "stem_wgrad", &wgrad_s) ||
        take_flag(i, argc, argv, "dropout", &dropout_s) ||
        take_flag(i, argc, argv, "breakdown", &breakdown_path) ||
        take_flag(i, argc, argv, "check_finite", &check_s) ||
        take_flag(i, argc, argv, "cost_model", &cost_model) ||
        take_flag(i, argc, argv, "check_replays", &replays_s))
      continue;
    throw UserError(std::string("unknown flag '") + argv[i] + "' (see --help)");
  }
  if (masks_s != "0" && masks_s != "1")
    throw UserError("--relu_masks takes 1 or 0, not '" + masks_s + "'");
  const bool relu_masks = masks_s == "1";
  if (!cost_model.empty()) {  // no GPU: the plan's modelled work and traffic under two ceilings
    double tflops = 0, gbps = 0;
    char extra = 0;
    if (std::sscanf(cost_model.c_str(), "%lf,%lf%c", &tflops, &gbps, &extra) != 2 ||
        !(tflops > 0) || !(gbps > 0))
      throw UserError(
          "--cost_model takes TFLOPS,GBPS (two positive numbers, e.g. 900,4300), not '" +
          cost_model + "'");
    const long b = parse_count(batch_s, "batch");
    if (network.empty() || b < 1)
      throw UserError("--cost_model needs --network and --batch=N, N at least 1");
    const Graph g =
        build_training_network(find_network(network).name, int(parse_count(size_s, "input_size")),
                               int(parse_count(classes_s, "num_classes")));
    const int elem = int(dtype_size(storage_type(parse_precision(precision))));
    std::fputs(train_cost_table(g, plan_training(g, false, TrainOptions{}.fuse_bn_act, relu_masks),
                                int(b), elem, tflops, gbps)
                   .c_str(),
               stdout);
    return 0;
  }
  const bool profile = !breakdown_path.empty();
  if (!profile && check_s != "0")
    throw UserError("--check_finite goes with --breakdown (random weights and data)");
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"network", &network},
                                    {"weights", &weights_path},
                                    {"input", &input_path},
                                    {"labels", &labels_path},
                                    {"output", &output_path},
                                    {"report", &report_path}})
    if (value->empty() && (!profile || std::string(flag) == "network"))
      throw UserError(std::string("--") + flag + " is required (see --help)");
  if (profile) {
    if (!input_path.empty() || !labels_path.empty() || !weights_path.empty() ||
        !output_path.empty() || !report_path.empty())
      throw UserError(
          "--breakdown runs on random weights and data: leave out --weights, --input, "
          "--labels, --output and --report");
    std::ofstream probe(breakdown_path, std::ios::app);
    if (!probe) throw UserError("--breakdown: cannot write " + breakdown_path);
  }
  network = find_network(network).name;
  if (optimizer != "sgd" && optimizer != "adam")
    throw UserError("--optimizer takes sgd or adam, not '" + optimizer + "'");
  TrainOptions opt;
  opt.optimizer = optimizer == "adam" ? Optimizer::Adam : Optimizer::SGD;
  opt.precision = parse_precision(precision);
  if (!profile && opt.precision != Precision::FP32 && opt.precision != Precision::TF32)
    throw UserError(
        "--precision: this tool checks fp32 and tf32 steps (gradients unscaled), not '" +
        precision + "'");
  opt.lr = parse_number(lr_s, "lr");
  opt.momentum = parse_number(momentum_s, "momentum");
  opt.weight_decay = parse_number(wd_s, "weight_decay");
  opt.engine = parse_engine_mode(engine);
  if (reuse_s != "0" && reuse_s != "1")
    throw UserError("--reuse_memory takes 1 or 0, not '" + reuse_s + "'");
  opt.reuse_memory = reuse_s == "1";
  if (pad_s != "0" && pad_s != "1")
    throw UserError("--pad_channels takes 1 or 0, not '" + pad_s + "'");
  opt.pad_channels = pad_s == "1";
  opt.relu_masks = relu_masks;
  if (from_input_s != "0" && from_input_s != "1")
    throw UserError("--bn_mask_from_input takes 1 or 0, not '" + from_input_s + "'");
  opt.bn_mask_from_input = from_input_s == "1";
  opt.stem = parse_stem_choice(stem_s);
  if (!wgrad_s.empty()) opt.stem_wgrad = parse_kernel_choice(wgrad_s, "stem_wgrad");
  if (replays_s != "0" && replays_s != "1")
    throw UserError("--check_replays takes 1 or 0, not '" + replays_s + "'");
  const bool check_replays = replays_s == "1";
  const int steps = int(parse_count(steps_s, "steps"));
  if (steps < 1) throw UserError("--steps must be at least 1");

  Graph g = build_training_network(network, int(parse_count(size_s, "input_size")),
                                   int(parse_count(classes_s, "num_classes")));
  if (!dropout_s.empty()) {
    const double p = parse_number(dropout_s, "dropout");
    if (!(p >= 0 && p < 1)) throw UserError("--dropout must be in [0, 1), not '" + dropout_s + "'");
    if (g.set_dropout_p(p) == 0) throw UserError("--dropout: " + network + " has no dropout layer");
  }
  if (profile) {
    const long b = parse_count(batch_s, "batch");
    if (b < 1) throw UserError("--breakdown needs --batch=N, N at least 1");
    opt.batch = int(b);
    return breakdown(g, opt, breakdown_path, int(parse_count(check_s, "check_finite")),
                     check_replays);
  }
  const HostWeights w = load_weights(g, weights_path);
  const SafetensorsFile wf = SafetensorsFile::load(weights_path);

  // The batch: its size from the input file unless --batch says it (then they must agree).
  const SafetensorsFile xf = SafetensorsFile::load(input_path);
  const Dims d = g.node(g.input_id()).out;
  const std::vector<int64_t> xs = xf.info("input").shape;
  if (xs.size() != 4 || xs[1] != d.c || xs[2] != d.h || xs[3] != d.w || xs[0] < 1)
    throw UserError("input file " + input_path + ": tensor 'input' must have shape [N, " +
                    std::to_string(d.c) + ", " + std::to_string(d.h) + ", " + std::to_string(d.w) +
                    "] for " + network + " at this --input_size");
  opt.batch = int(xs[0]);
  const long batch_flag = parse_count(batch_s, "batch");
  if (batch_flag != 0 && batch_flag != opt.batch)
    throw UserError("--batch=" + batch_s + " but input file " + input_path + " holds " +
                    std::to_string(opt.batch) + " images");
  const std::vector<float> x = xf.to_float("input");
  const SafetensorsFile lf = SafetensorsFile::load(labels_path);
  const std::vector<int64_t> labels64 = lf.to_int64("labels");
  const int classes = g.node(g.output()).out.c;
  if (int64_t(labels64.size()) != opt.batch)
    throw UserError("labels file " + labels_path + ": 'labels' holds " +
                    std::to_string(labels64.size()) + " labels for a batch of " +
                    std::to_string(opt.batch));
  std::vector<int> labels;
  for (size_t i = 0; i < labels64.size(); ++i) {
    if (labels64[i] < 0 || labels64[i] >= classes)
      throw UserError("labels file " + labels_path + ": label " + std::to_string(i) + " is " +
                      std::to_string(labels64[i]) + ", outside [0, " + std::to_string(classes) +
                      ")");
    labels.push_back(int(labels64[i]));
  }

  require_cuda_device();
  GpuContext ctx;
  ctx.check_replays = check_replays;
  TrainModel m(ctx, g, w, opt);
  m.set_input(x);
  m.set_labels(labels);
  std::vector<double> losses;
  nlohmann::ordered_json norms = nlohmann::ordered_json::object();
  for (int s = 0; s < steps; ++s) {
    m.step(ctx.stream);
    losses.push_back(m.loss());  // synchronises
    if (s == 0)
      for (const std::string& name : m.trainable_names()) {
        double sum = 0;
        for (float v : m.gradient(name)) sum += double(v) * v;
        norms[name] = std::sqrt(sum);
      }
  }
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));

  // Every floating-point tensor of the weights file, after the step(s), in its own shape.
  std::vector<SafetensorOut> out;
  for (const auto& [name, info] : wf.tensors()) {
    if (name.size() >= 19 && name.compare(name.size() - 19, 19, "num_batches_tracked") == 0)
      continue;  // an integer counter; the contract lets it be left out
    out.push_back({name, info.shape, m.parameter(name)});
  }
  save_safetensors(output_path, out,
                   {{"network", network}, {"precision", precision}, {"steps", steps_s}});
  nlohmann::ordered_json report;
  report["network"] = network;
  report["precision"] = precision;
  report["batch"] = opt.batch;
  report["optimizer"] = optimizer;
  report["lr"] = opt.lr;
  report["momentum"] = opt.momentum;
  report["weight_decay"] = opt.weight_decay;
  report["steps"] = steps;
  report["loss"] = losses.front();
  report["losses"] = losses;
  report["grad_norms"] = norms;
  std::ofstream rf(report_path);
  rf << report.dump(2) << "\n";
  if (!rf) throw UserError("cannot write report file " + report_path);
  std::fprintf(stderr, "cnnbench_train_step: %s %s batch %d: loss %.6f, %zu gradients, wrote %s\n",
               network.c_str(), precision.c_str(), opt.batch, losses.front(), norms.size(),
               output_path.c_str());
  return 0;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench_train_step", cnnbench::run, argc, argv);
}
