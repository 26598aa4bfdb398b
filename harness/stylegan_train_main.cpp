// cnnbench_stylegan_train: StyleGAN3-T's training step with the StyleGAN2 discriminator
// (issue 6; networks/stylegan_train.h).
//   --check=DIR --output=F: the phases Gmain, Dmain and Dreg, each from the weights of a case
//     written by tools/stylegan3_train_reference.py write-case (DIR/g.safetensors,
//     d.safetensors, inputs.safetensors), their gradients and values into F for that tool's
//     compare.
//   --batches=4,8,16 --json=F: the benchmark. NVlabs' iteration (Gmain + Adam, Dmain + Adam, Dreg
//     + Adam every 16th, G_ema) on random weights, timed with CUDA events over --iters
//     iterations (a multiple of the R1 interval) after --warmup: img/s, ms per iteration, the time
//     for 5 kimg, device memory; --max_batch: the largest batch that builds and runs (doubling
//     from the largest of --batches, then bisection: harness/max_batch.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/check.h"
#include "harness/context.h"
#include "harness/device.h"
#include "harness/layer_json.h"
#include "harness/max_batch.h"
#include "harness/safetensors.h"
#include "harness/session.h"
#include "networks/registry.h"
#include "networks/stylegan_train.h"
#include "networks/zoo.h"

namespace cnnbench {
namespace {

const char* kUsage =
    "usage: cnnbench_stylegan_train --check=DIR --output=FILE [--precision=fp32|tf32] "
    "[--gamma=2]\n"
    "       cnnbench_stylegan_train --batches=4,8,16 [--resolution=256] [--precision=fp32|tf32]\n"
    "           [--iters=16] [--warmup=2] [--repetitions=2] [--gamma=2] [--max_batch] "
    "[--json=FILE]\n"
    "           [--engine=heuristic|autotune] [--sections] [--workspace_mib=2048]\n"
    "  --engine=autotune  each conv's engine timed among cuDNN's top 4 (default: heuristics)\n"
    "  --sections         after timing, each phase once with events between its steps: where\n"
    "                     the time goes, by layer and step (JSON rows' sections_ms)\n"
    "  --workspace_mib=N  the largest conv workspace an engine may take (default 2048)\n";

bool take(const std::string& arg, const char* name, std::string* value) {
  const std::string prefix = std::string("--") + name;
  if (arg == prefix && !value) return true;
  if (value && arg.rfind(prefix + "=", 0) == 0) {
    *value = arg.substr(prefix.size() + 1);
    return true;
  }
  return false;
}

Precision precision_of(const std::string& s) {
  if (s == "fp32") return Precision::FP32;
  if (s == "tf32") return Precision::TF32;
  throw UserError("--precision must be fp32 or tf32 (the training step is float32), not '" + s +
                  "'");
}

std::vector<int> parse_batches(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const long b = parse_count(item, "batches");
    if (b < 1 || b > 65536)
      throw UserError("--batches: each batch must be 1 to 65536, not " + item);
    out.push_back(int(b));
  }
  if (out.empty()) throw UserError("--batches: no batch given");
  return out;
}

HostWeights read_weights(const std::string& path) {
  const SafetensorsFile f = SafetensorsFile::load(path);
  HostWeights w;
  for (const auto& [name, info] : f.tensors()) w[name] = f.to_float(name);
  return w;
}

std::vector<float> randn(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The case's hyper-parameters (case.json, as tools/stylegan3_train_reference.py write-case writes
// it) into `opt`: gamma, the R1 interval, the mbstd group size, D's channels and clamp. A case
// whose generator clamp is not the graph's 256 is refused (G's clamp is part of its graph).
void apply_case(const std::string& dir, SgTrainOptions& opt) {
  const std::string path = dir + "/case.json";
  std::ifstream f(path);
  if (!f) throw UserError("cannot read " + path);
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(f);
    opt.gamma = c.at("gamma").get<float>();
    opt.r1_interval = c.at("d_reg_interval").get<int>();
    opt.mbstd_group = c.at("mbstd_group_size").get<int>();
    const auto& d = c.at("discriminator");
    opt.d_channel_base = d.at("channel_base").get<int>();
    opt.d_channel_max = d.at("channel_max").get<int>();
    if (d.at("conv_clamp").is_null())
      throw UserError(path + ": D without a conv_clamp is not supported (ours clamps at a value)");
    opt.conv_clamp = d.at("conv_clamp").get<float>();
    const auto& gc = c.at("generator").at("conv_clamp");
    if (gc.is_null() || gc.get<float>() != 256.f)
      throw UserError(path +
                      ": the generator's conv_clamp must be 256 (stylegan3_t's graph), not " +
                      gc.dump());
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": " + e.what());
  }
  if (opt.r1_interval < 1 || opt.mbstd_group < 1 || !(opt.gamma >= 0))
    throw UserError(path + ": gamma, d_reg_interval or mbstd_group_size out of range");
}

int run_check(const std::string& dir, const std::string& output, SgTrainOptions opt) {
  apply_case(dir, opt);
  const SafetensorsFile in = SafetensorsFile::load(dir + "/inputs.safetensors");
  const std::vector<int64_t> rs = in.info("reals").shape;
  if (rs.size() != 4 || rs[1] != 3 || rs[2] != rs[3])
    throw UserError(dir + "/inputs.safetensors: 'reals' must be [N, 3, R, R]");
  opt.batch = int(rs[0]), opt.resolution = int(rs[2]);
  const HostWeights g = read_weights(dir + "/g.safetensors");
  const HostWeights d = read_weights(dir + "/d.safetensors");
  require_cuda_device();
  GpuContext ctx;
  std::vector<SafetensorOut> out;
  for (const char* phase : {"Gmain", "Dmain", "Dreg"}) {
    StyleganTrainer t(ctx, opt, g, d);  // each phase from the case's weights
    t.set_inputs(in.to_float("z_gmain"), in.to_float("z_dmain"), in.to_float("reals"));
    const std::string p = phase;
    if (p == "Gmain") t.gmain(ctx.stream);
    if (p == "Dmain") t.dmain(ctx.stream);
    if (p == "Dreg") t.dreg(ctx.stream);
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    for (SafetensorOut& o : t.results(p)) out.push_back(std::move(o));
    std::fprintf(stderr, "cnnbench_stylegan_train: %s done (G %lld, D %lld parameters)\n", phase,
                 static_cast<long long>(t.g_params()), static_cast<long long>(t.d_params()));
  }
  save_safetensors(output, out,
                   {{"precision", opt.precision == Precision::TF32 ? "tf32" : "fp32"}});
  std::fprintf(stderr, "cnnbench_stylegan_train: wrote %zu tensors to %s\n", out.size(),
               output.c_str());
  return 0;
}

struct BenchRow {
  int batch = 0;
  bool fits = false;
  bool out_of_memory = false;  // where it did not fit: an allocation failed (not another error)
  std::string error;
  double ms_median = 0, ms_min = 0, ms_max = 0;
  std::vector<double> reps;
  size_t trainer_bytes = 0, device_used_bytes = 0;
  size_t workspace_limit_bytes = 0;  // StyleganTrainer::workspace_limit
  double build_s = 0;
  double phase_ms[3] = {0, 0, 0};                        // Gmain, Dmain, Dreg, each once
  std::vector<std::pair<std::string, double>> sections;  // --sections
  std::vector<LayerRecord> layers;                       // the convs' engines
};

// --sections: the sums by step (the layer name dropped), then the largest sections; 16 of each.
void print_sections(int batch, const std::vector<std::pair<std::string, double>>& sections) {
  auto print_largest = [](auto&& labelled_ms) {
    std::vector<std::pair<double, std::string>> v;
    for (const auto& [label, ms] : labelled_ms) v.push_back({ms, label});
    std::sort(v.rbegin(), v.rend());
    for (size_t i = 0; i < v.size() && i < 16; ++i)
      std::fprintf(stderr, "  %8.2f ms  %s\n", v[i].first, v[i].second.c_str());
  };
  std::map<std::string, double> by_step;
  double total = 0;
  for (const auto& [label, ms] : sections) {
    by_step[label.substr(0, label.find(" | "))] += ms;
    total += ms;
  }
  std::fprintf(stderr, "batch %d: sections, %.1f ms in all; by step:\n", batch, total);
  print_largest(by_step);
  std::fprintf(stderr, "batch %d: the largest sections:\n", batch);
  print_largest(sections);
}

BenchRow bench_one(GpuContext& ctx, SgTrainOptions opt, int batch, int iters, int warmup,
                   int repetitions, bool sections = false) {
  if (repetitions < 1) repetitions = 1;
  BenchRow row;
  row.batch = batch;
  opt.batch = batch;
  opt.fresh_latents = true;  // new z each iteration, as NVlabs' loop draws them
  opt.latent_seed = uint64_t(1234 + batch);
  const int R = opt.resolution;
  try {
    std::mt19937_64 rng(1234 + batch);
    HostWeights g = network_random_weights("stylegan3_t", R, 0, 7);
    const HostWeights d =
        stylegan2_discriminator_random(R, 11, opt.d_channel_base, opt.d_channel_max);
    const auto t0 = std::chrono::steady_clock::now();
    StyleganTrainer t(ctx, opt, g, d);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> reals(size_t(batch) * 3 * R * R);
    for (float& x : reals) x = u(rng);
    t.set_inputs(randn(size_t(batch) * 512, rng), randn(size_t(batch) * 512, rng), reals);
    std::fprintf(stderr, "batch %d: built in %.1f s (%.0f MiB)\n", batch,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 t.device_bytes() / 1048576.0);
    row.workspace_limit_bytes = t.workspace_limit();
    if (t.workspace_limit() < opt.workspace_bytes)
      std::fprintf(stderr,
                   "batch %d: conv engines chosen within %zu MiB of workspace, not %zu: no more "
                   "was free beside the trainer\n",
                   batch, t.workspace_limit() >> 20, opt.workspace_bytes >> 20);
    int index = 0;
    for (int i = 0; i < warmup; ++i) t.iteration(index++, ctx.stream);
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    row.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cudaEvent_t a, b;
    CNN_CHECK_CUDA(cudaEventCreate(&a));
    CNN_CHECK_CUDA(cudaEventCreate(&b));
    // Each phase once on its own (no optimizer), for the breakdown.
    for (int p = 0; p < 3; ++p) {
      CNN_CHECK_CUDA(cudaEventRecord(a, ctx.stream));
      if (p == 0) t.gmain(ctx.stream);
      if (p == 1) t.dmain(ctx.stream);
      if (p == 2) t.dreg(ctx.stream);
      CNN_CHECK_CUDA(cudaEventRecord(b, ctx.stream));
      CNN_CHECK_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
      row.phase_ms[p] = ms;
    }
    std::fprintf(stderr, "batch %d: Gmain %.1f ms, Dmain %.1f ms, Dreg %.1f ms\n", batch,
                 row.phase_ms[0], row.phase_ms[1], row.phase_ms[2]);
    for (int r = 0; r < repetitions; ++r) {
      index = 0;  // each window starts where Dreg runs: iters / interval of them
      CNN_CHECK_CUDA(cudaEventRecord(a, ctx.stream));
      for (int i = 0; i < iters; ++i) t.iteration(index++, ctx.stream);
      CNN_CHECK_CUDA(cudaEventRecord(b, ctx.stream));
      CNN_CHECK_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
      row.reps.push_back(ms / iters);
      std::fprintf(stderr, "batch %d: repetition %d of %d: %.2f ms per iteration\n", batch, r + 1,
                   repetitions, ms / iters);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    size_t free_b = 0, total_b = 0;
    CNN_CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    row.device_used_bytes = total_b - free_b;
    row.trainer_bytes = t.device_bytes();
    std::vector<double> s = row.reps;
    std::sort(s.begin(), s.end());
    row.ms_median = s[s.size() / 2], row.ms_min = s.front(), row.ms_max = s.back();
    row.layers = t.layers();
    if (sections) {
      try {  // a failure here keeps the row's timing
        row.sections = t.profile_sections(ctx.stream);
        print_sections(batch, row.sections);
      } catch (const LibraryError& e) {
        std::fprintf(stderr, "batch %d: --sections failed: %s\n", batch, e.what());
        cudaGetLastError();
      }
    }
    row.fits = true;
  } catch (const LibraryError& e) {
    row.error = e.what();
    row.out_of_memory = is_out_of_memory(e);
    cudaGetLastError();  // an allocation failure is not sticky
  }
  return row;
}

int run_bench(const std::vector<int>& batches, SgTrainOptions opt, int iters, int warmup,
              int repetitions, bool max_batch, bool sections, const std::string& json_path) {
  if (iters % opt.r1_interval)
    throw UserError("--iters must be a multiple of the R1 interval (" +
                    std::to_string(opt.r1_interval) + ")");
  require_cuda_device();
  const DeviceInfo dev = discover_device();
  GpuContext ctx;
  nlohmann::ordered_json doc;
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  for (const auto& [k, v] : context_entries(dev)) context[k] = v;
  doc["context"] = context;
  doc["settings"] = {
      {"network", "stylegan3_t"},
      {"discriminator", "stylegan2 resnet, cbase " + std::to_string(opt.d_channel_base) +
                            ", cmax " + std::to_string(opt.d_channel_max)},
      {"resolution", opt.resolution},
      {"precision", opt.precision == Precision::TF32 ? "tf32" : "fp32"},
      {"gamma", opt.gamma},
      {"r1_interval", opt.r1_interval},
      {"iters_per_rep", iters},
      {"warmup_iters", warmup},
      {"iteration", "Gmain+Adam(G), Dmain+Adam(D), every 16th Dreg+Adam(D), G_ema"},
      {"engines",
       opt.engine == EngineMode::Autotune ? "cuDNN autotune (top 4 timed)" : "cuDNN heuristics"},
      {"workspace_limit_mib", opt.workspace_bytes >> 20},
      {"inputs", "fresh latents each iteration (kernels/randn.cuh); one fixed batch of reals"}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  auto add = [&](const BenchRow& r) {
    nlohmann::ordered_json j;
    j["batch"] = r.batch;
    j["fits"] = r.fits;
    if (!r.fits) {
      j["error"] = r.error;
    } else {
      const double img_s = r.batch * 1000.0 / r.ms_median;
      j["ms"] = r.ms_median, j["ms_min"] = r.ms_min, j["ms_max"] = r.ms_max;
      j["img_s"] = img_s;
      j["s_per_5kimg"] = 5000.0 / img_s;
      j["reps"] = r.reps;
      j["trainer_mib"] = r.trainer_bytes / 1048576.0;
      j["workspace_limit_mib"] = r.workspace_limit_bytes >> 20;
      j["device_used_mib"] = r.device_used_bytes / 1048576.0;
      j["build_and_warmup_s"] = r.build_s;
      j["phase_ms"] = {{"Gmain", r.phase_ms[0]}, {"Dmain", r.phase_ms[1]}, {"Dreg", r.phase_ms[2]}};
      if (!r.sections.empty()) {
        nlohmann::ordered_json s = nlohmann::ordered_json::object();
        for (const auto& [label, ms] : r.sections) s[label] = ms;
        j["sections_ms"] = s;
      }
      nlohmann::ordered_json layers = nlohmann::ordered_json::array();
      for (const LayerRecord& l : r.layers)
        layers.push_back(layer_record_json<nlohmann::ordered_json>(l));
      j["layers"] = layers;
      std::printf(
          "stylegan3_t train %d px batch %d: %.2f ms/iter (%.2f-%.2f), %.1f img/s, %.0f s "
          "per 5 kimg, %.0f MiB allocated\n",
          opt.resolution, r.batch, r.ms_median, r.ms_min, r.ms_max, img_s, 5000.0 / img_s,
          r.trainer_bytes / 1048576.0);
    }
    rows.push_back(j);
    doc["rows"] = rows;
    if (!json_path.empty()) {  // after every row: a killed run keeps what it measured
      std::ofstream f(json_path);
      f << doc.dump(2) << "\n";
      if (!f) throw UserError("cannot write " + json_path);
    }
  };
  std::map<int, BenchRow> measured;  // by batch, for --max_batch
  for (int b : batches)
    add(measured[b] = bench_one(ctx, opt, b, iters, warmup, repetitions, sections));
  if (max_batch) {
    // harness/max_batch.h's search from the largest batch asked: doubling until a batch does
    // not fit, then bisection to the boundary. A batch asked above is not run again; the others
    // run one repetition of one R1 interval.
    // The discriminator's minibatch-stddev layer groups the batch by mbstd_group_size (4), and a
    // batch of 4 or more must divide by it (as in the reference): the search runs over multiples
    // of the group (call 68 guessed batch 9 and stopped on that refusal).
    const int step = opt.mbstd_group;
    size_t free_b = 0, total_b = 0;
    CNN_CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    auto try_batch = [&](int b) {
      auto it = measured.find(b);
      if (it == measured.end()) {
        it = measured.emplace(b, bench_one(ctx, opt, b, opt.r1_interval, 2, 1)).first;
        add(it->second);
      }
      const BenchRow& r = it->second;
      Attempt a;
      a.batch = b;
      a.fit = r.fits ? Fit::Fits : r.out_of_memory ? Fit::OutOfMemory : Fit::Error;
      a.message = r.error;
      a.peak_mib = r.device_used_bytes / 1048576.0;
      return a;
    };
    const int largest_asked = *std::max_element(batches.begin(), batches.end());
    const MaxBatch m = search_max_batch(try_batch, largest_asked, 4096, total_b / 1048576.0, step);
    nlohmann::ordered_json tried = nlohmann::ordered_json::array();
    for (const Attempt& a : m.attempts)
      tried.push_back({{"batch", a.batch}, {"fit", fit_name(a.fit)}});
    doc["max_batch"] = {{"largest", m.largest},
                        {"first_failed", m.first_failed},
                        {"step", step},
                        {"capped", m.capped},
                        {"error", m.error},
                        {"attempts", tried},
                        {"device_used_mib_at_largest", m.peak_mib_at_largest}};
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << doc.dump(2) << "\n";
    }
    if (!m.error.empty()) throw UserError("--max_batch stopped: " + m.error);
    std::printf(
        "largest batch that fits: %d (batch %d did not; %zu batches tried, in steps of the mbstd "
        "group, %d)\n",
        m.largest, m.first_failed, m.attempts.size(), step);
  }
  return 0;
}

int run(int argc, char** argv) {
  std::string check, output, batches_s, json, precision = "fp32", res_s = "256";
  std::string iters_s = "16", warmup_s = "2", gamma_s = "2", reps_s = "2", engine = "heuristic",
              ws_s = "2048";
  bool max_batch = false, sections = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (take(a, "check", &check) || take(a, "output", &output) || take(a, "batches", &batches_s) ||
        take(a, "json", &json) || take(a, "precision", &precision) ||
        take(a, "resolution", &res_s) || take(a, "iters", &iters_s) ||
        take(a, "warmup", &warmup_s) || take(a, "gamma", &gamma_s) ||
        take(a, "repetitions", &reps_s) || take(a, "engine", &engine) ||
        take(a, "workspace_mib", &ws_s))
      continue;
    if (take(a, "max_batch", nullptr)) {
      max_batch = true;
      continue;
    }
    if (take(a, "sections", nullptr)) {
      sections = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    throw UserError("unknown argument '" + a + "'\n" + kUsage);
  }
  SgTrainOptions opt;
  opt.precision = precision_of(precision);
  opt.engine = parse_engine_mode(engine);
  const long ws_mib = parse_count(ws_s, "workspace_mib");
  if (ws_mib < 1 || ws_mib > (1 << 20))
    throw UserError("--workspace_mib must be 1 to 1048576, not " + ws_s);
  opt.workspace_bytes = size_t(ws_mib) << 20;
  opt.resolution = int(parse_count(res_s, "resolution"));
  if (opt.resolution < 16 || opt.resolution > 1024 || (opt.resolution & (opt.resolution - 1)))
    throw UserError("--resolution must be a power of two from 16 to 1024, not " + res_s);
  char* end = nullptr;
  opt.gamma = std::strtof(gamma_s.c_str(), &end);
  if (end == gamma_s.c_str() || *end || !(opt.gamma >= 0))
    throw UserError("--gamma must be a number >= 0, not '" + gamma_s + "'");
  if (!check.empty()) {
    if (output.empty()) throw UserError("--check needs --output=FILE\n" + std::string(kUsage));
    return run_check(check, output, opt);
  }
  if (batches_s.empty()) throw UserError(std::string("nothing to do\n") + kUsage);
  return run_bench(parse_batches(batches_s), opt, int(parse_count(iters_s, "iters")),
                   int(parse_count(warmup_s, "warmup")), int(parse_count(reps_s, "repetitions")),
                   max_batch, sections, json);
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench_stylegan_train", cnnbench::run, argc, argv);
}
