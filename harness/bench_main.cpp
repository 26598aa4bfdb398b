// cnnbench: registers one Google Benchmark for each (network, precision, mode, batch) of a YAML
// sweep, times CUDA-graph replays (or eager launches) with CUDA events, and writes counters and
// the device/version context as JSON (--benchmark_out). The engine each layer got is written
// beside it (--layers_out, by default <benchmark_out>.layers.json).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/ceilings.h"
#include "harness/check.h"
#include "harness/config.h"
#include "harness/gpus.h"
#include "harness/jsonl.h"
#include "harness/layer_json.h"
#include "harness/max_batch.h"
#include "harness/plan_cache.h"
#include "harness/resume.h"
#include "harness/session.h"
#include "kernels/depthwise.h"
#include "kernels/fault.h"
#include "kernels/storage.h"
#include "kernels/timing.h"
#include "networks/train_model.h"

namespace cnnbench {
namespace {

const char* kUsage =
    R"(usage: cnnbench [--config=FILE] [--weights=FILE.safetensors] [--engine=heuristic|autotune]
                [--eager] [--layers_out=FILE] [Google Benchmark flags, e.g. --benchmark_out=FILE]
  --config      YAML sweep (default configs/default.yaml)
  --weights     torchvision-named state_dict for the (single) network of the sweep; random otherwise
  --engine      override the config's engine choice
  --eager       also time op-by-op launches beside graph replays
  --layers_out  where to write the per-layer engine table (JSON)
  --share_plans=false  every layer builds its own cuDNN plan (layers of one shape share by default)
  --mode_b=false       autotune times heuristics mode A's top_k (and fallback) only, not also up
                       to top_k / 2 configs that only mode B offers
  --graph_tune_us=100  autotune times the fastest 8 candidates of a conv under this many
                       microseconds again, replayed from a CUDA graph (as the benchmark runs
                       them), and keeps the fastest there; 0: eager launches alone
  --exclude_engines=eng4,eng8{k24=0}  cuDNN engines never to use: a name takes any knobs;
                       'nondeterministic' every engine cuDNN marks so
  --deterministic  only engines cuDNN does not mark nondeterministic (the same as adding
                       'nondeterministic' to --exclude_engines): the same output from run to run.
                       Every benchmark counts its nondeterministic layers (nondeterministic_layers)
  --plan_cache=FILE  autotune's choice per conv shape (and the classifier's cuBLASLt algorithm,
                       keyed also by the cuBLAS version) kept on disk, keyed by GPU, cuDNN version,
                       shape and precision: a later run builds that engine alone instead of
                       timing the top-k (a replay check still applies; an engine no longer
                       offered is tuned again). Written after every model
  --build_threads=N  host threads that build cuDNN plans (NVRTC compiles) ahead of tuning;
                       default the host's cores, at most 16; 1 builds them one by one
  --graph_edges=captured|full  the CUDA graph's programmatic (PDL) edges: kept (default), or
                       made full-completion dependencies
  --memory_limit=16|A100|...  behave as a card of that memory: the rest of the device is held
                       while the suite runs (GiB, or a card of --gpus); the CUDA context and the
                       libraries count toward it
  --max_batch   also search, per (network, precision, mode), the largest batch that fits: one row
                       each (largest_batch, first_failed), beside the throughput rows
  --max_batch_cap=N    the search's largest batch (default 4096)
  --detect_capacity=N  mode detect: the most candidates (box, class) over conf 0.25 an image may
                       have before NMS (default 65536); an image with more fails its row
  --profile=N          per benchmark, after its warm-up, exactly N forwards between
                       cudaProfilerStart and cudaProfilerStop, each in an NVTX range "profile" of
                       the "cnnbench" domain (ncu --profile-from-start off; nsys
                       --capture-range=cudaProfilerApi); the timing runs after, outside the range
  --resume=FILE        skip the benchmarks FILE (a partial results JSON or .jsonl) already holds
                       with every repetition and no error; write the rest to a new file
  --results_lines=FILE each finished run also appended to FILE as one JSON line, flushed at once
                       (default: beside --benchmark_out, .jsonl), so a killed sweep keeps its
                       results; SIGINT finishes the benchmark under way and skips the rest
  --gemm_ceiling       first, the machine's matrix-multiply ceiling: one cuBLASLt GEMM of
                       8192^3 per precision (fp16, bf16, tf32; autotuned, replayed from a CUDA
                       graph), rows gemm/<precision>/ceiling/m:8192 with their TFLOP/s, which
                       tools/report.py divides each network's TFLOP/s by
  --soak=N      the whole sweep N times in this one process (a soak run): each benchmark's name
                       gains /pass:K, and after each pass a row soak/pass:K frees every model and
                       records the device's used memory and the process's resident memory
                       (device_used_mib, host_rss_mib) and the pass's wall seconds (pass_s);
                       tools/check_soak.py judges the run
  --gpus=FILE   the card table for --memory_limit (default configs/gpus.yaml)
  --se_fold     at batch 1, fold each squeeze-excitation's gates into the 1x1 conv after it
                       (that conv's weights scaled per input channel) instead of scaling the
                       activations
  --pad_channels=false  the 3-channel stems read the image as it is, not a copy padded with zero
                       channels to 8 (fp16, bf16) or 4 (tf32) with zero weights to match
  --depthwise=auto|cudnn|cnnbench  who computes depthwise convs: auto (default) times cuDNN
                       against our kernel per layer under autotune and keeps the faster, and
                       takes ours under heuristics; cudnn or cnnbench alone
  --stem=auto|cudnn|cnnbench  who computes a padded stem (the image's conv, fp16 and bf16): auto
                       (default) times the pad op plus cuDNN's conv against our stem kernel
                       under autotune and keeps the faster, and takes cuDNN's under
                       heuristics; cudnn or cnnbench alone
  --list        print the networks (name, input size, parameters, GMACs) and exit
)";

struct Job {
  std::string network;
  Precision precision;
  int batch;
  int input_size;
  int num_classes;
  bool graph;
  bool train;               // mode train: one training step, captured whole in a CUDA graph
  TrainSettings settings;   // where train
  bool max_batch = false;   // the largest-batch search of (network, precision, mode)
  int search_start = 1;     // its first batch
  std::string search_name;  // its benchmark's name, for its attempt lines
  bool detect = false;      // mode detect: the network's replay, then decode + NMS (graph too)
  int video_frames = 0;     // mode video (detect too): this many frames from the host
};

// A training step captured once in a CUDA graph on its own stream, replayed for timing.
struct TrainPrepared {
  std::string key;
  std::unique_ptr<TrainModel> model;
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  DevicePeak peak;
  uint64_t device_before = 0;  // used before the model was built
  double single_step_ms = 0;
  double flops_per_image = 0;
  ~TrainPrepared() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
  // Device time of `steps` replays of the step, between one pair of events.
  double time_ms(int steps) {
    CNN_CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < steps; ++i) CNN_CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CNN_CHECK_CUDA(cudaEventRecord(stop, stream));
    CNN_CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

struct Options {
  SweepConfig config;
  EngineMode engine = EngineMode::Autotune;
  std::string weights_path;
  std::string layers_out;
  bool share_plans = true;
  bool mode_b = true;          // --mode_b
  double graph_tune_us = 100;  // --graph_tune_us (GpuContext::graph_tune_below_us)
  GraphEdges graph_edges = GraphEdges::Captured;
  std::vector<std::string> exclude_engines;
  int build_threads = default_build_threads();
  MemoryLimit memory_limit;
  int max_batch_cap = 4096;
  int detect_capacity = 65536;  // mode detect: the most NMS candidates an image may have
  bool se_fold = false;
  bool pad_channels = true;  // --pad_channels
  DepthwiseChoice depthwise = DepthwiseChoice::Auto;
  StemChoice stem = StemChoice::Auto;
  int profile_forwards = 0;  // --profile=N: N forwards under cudaProfilerStart/Stop per benchmark
  DiskPlanCache* plan_cache = nullptr;  // --plan_cache
};

class Session {
 public:
  explicit Session(const Options& o) : opt_(o) {}

  Prepared& get(const Job& job) {
    const std::string key = job.network + "/" + precision_name(job.precision) +
                            "/batch:" + std::to_string(job.batch) + "/" +
                            std::to_string(job.input_size) + "/" + std::to_string(job.num_classes);
    if (current_ && key_ == key) return *current_;
    drop();  // free the previous model before building the next
    if (!ctx_) make_context();
    const Graph& g = graph(job);
    CompileOptions c;
    c.precision = job.precision;
    c.batch = job.batch;
    c.engine = opt_.engine;
    c.top_k = opt_.config.autotune_top_k;
    c.input_seed = opt_.config.seed + 1;
    c.se_fold = opt_.se_fold;
    c.pad_channels = opt_.pad_channels;
    c.depthwise = opt_.depthwise;
    c.stem = opt_.stem;
    const auto t0 = std::chrono::steady_clock::now();
    if (opt_.plan_cache) cache_before_ = cache_counts();  // the layer table gives this model's
    current_ = prepare_model(*ctx_, g, weights(job), c, opt_.config.warmup_ms,
                             [&](const Prepared& p) { log_layers(job, g, p, false); });
    current_->prepare_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opt_.plan_cache) opt_.plan_cache->save();  // a run cut short keeps what it tuned
    key_ = key;
    log_layers(job, g, *current_, true);
    return *current_;
  }

  // The training step of `job`, built and captured (the previous model, inference or training,
  // freed first).
  TrainPrepared& get_train(const Job& job) {
    const std::string key = job.network + "/" + precision_name(job.precision) +
                            "/train/batch:" + std::to_string(job.batch) + "/" +
                            std::to_string(job.input_size) + "/" + std::to_string(job.num_classes);
    if (train_ && train_->key == key) return *train_;
    drop();
    if (!ctx_) make_context();
    const std::string gk = "train:" + graph_key(job);
    auto it = graphs_.find(gk);
    if (it == graphs_.end())
      it = graphs_.emplace(gk, build_training_network(job.network, job.input_size, job.num_classes))
               .first;
    const Graph& g = it->second;
    auto wt = weights_.find(gk);
    if (wt == weights_.end()) wt = weights_.emplace(gk, random_weights(g, opt_.config.seed)).first;
    TrainOptions t;
    t.optimizer = job.settings.optimizer == "adam" ? Optimizer::Adam : Optimizer::SGD;
    t.precision = job.precision;
    t.batch = job.batch;
    t.lr = job.settings.lr;
    t.momentum = job.settings.momentum;
    t.weight_decay = job.settings.weight_decay;
    t.engine = opt_.engine;
    t.top_k = opt_.config.autotune_top_k;
    t.pad_channels = opt_.pad_channels;
    t.stem = opt_.stem;
    auto p = std::make_unique<TrainPrepared>();
    p->key = key;
    p->device_before = p->peak.sample();
    p->model = std::make_unique<TrainModel>(*ctx_, g, wt->second, t);
    if (opt_.plan_cache) opt_.plan_cache->save();
    p->flops_per_image = 2.0 * double(training_macs(g, p->model->plan()).total());
    CNN_CHECK_CUDA(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
    CNN_CHECK_CUDA(cudaEventCreate(&p->start));
    CNN_CHECK_CUDA(cudaEventCreate(&p->stop));
    capture_graph([&](cudaStream_t s) { p->model->step(s); }, p->stream, &p->graph, &p->exec);
    // Warm-up: at least three steps and about warmup_ms; the last gives the step's time.
    double spent = 0;
    for (int i = 0; i < 3 || spent < opt_.config.warmup_ms; ++i) {
      p->single_step_ms = p->time_ms(1);
      spent += p->single_step_ms;
      p->peak.sample();
    }
    log_train(job, g, *p);
    train_ = std::move(p);
    return *train_;
  }

  void drop() {
    current_.reset(), key_.clear();
    train_.reset();
  }
  bool quiet = false;  // no layer-table entries (the models a max-batch search builds)
  void finish() {
    drop();
    ctx_.reset();
  }
  // A max-batch search's probes: plans taken without their replay check (GpuContext::
  // check_replays), in a context of their own that is dropped after the search.
  void begin_search() {
    finish();
    make_context();
    ctx_->check_replays = false;
  }
  void end_search() { finish(); }

 private:
  void make_context() {
    ctx_ = std::make_unique<GpuContext>();
    ctx_->share_plans = opt_.share_plans;
    ctx_->heuristic_mode_b = opt_.mode_b;
    ctx_->graph_tune_below_us = opt_.graph_tune_us;
    ctx_->graph_edges = opt_.graph_edges;
    ctx_->excluded = opt_.exclude_engines;
    ctx_->disk_plans = opt_.plan_cache;
    ctx_->build_threads = opt_.build_threads;
  }

  // The plan cache's counters (hits, used, stale, outdated, misses), process-wide; a model's own
  // are the difference across its build (call 70's layer table showed the running totals).
  std::array<int, 5> cache_counts() const {
    const DiskPlanCache& c = *opt_.plan_cache;
    return {c.hits, c.used, c.stale, c.outdated, c.misses};
  }
  nlohmann::json model_cache_json() const {
    const std::array<int, 5> now = cache_counts();
    static const char* names[5] = {"hits", "used", "stale", "outdated", "misses"};
    nlohmann::json j = nlohmann::json::object();
    for (int i = 0; i < 5; ++i) j[names[i]] = now[i] - cache_before_[i];
    return j;
  }

  // A training model's entry in the layer table: its library ops (convs forward and backward,
  // linears) and the step's memory.
  void log_train(const Job& job, const Graph& g, const TrainPrepared& p) {
    if (opt_.layers_out.empty() || quiet) return;
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerRecord& r : p.model->layers()) layers.push_back(layer_record_json(r));
    log_.push_back(
        {{"model", p.key},
         {"mode", "train"},
         {"network", g.name()},
         {"precision", precision_name(job.precision)},
         {"batch", job.batch},
         {"optimizer", job.settings.optimizer},
         {"engine_choice", engine_mode_name(opt_.engine)},
         {"arena",
          {{"persistent_bytes", p.model->arena().bytes(MemKind::Weights)},
           {"activations_bytes", p.model->arena().bytes(MemKind::Activations)},
           {"activations_without_reuse_bytes", p.model->arena().activations_unplanned_bytes()},
           {"workspace_bytes", p.model->arena().bytes(MemKind::Workspace)}}},
         {"layers", layers}});
    std::ofstream out(opt_.layers_out);
    out << nlohmann::json{{"models", log_}}.dump(1) << "\n";
  }

  static std::string graph_key(const Job& job) {
    return job.network + "@" + std::to_string(job.input_size) + "/" +
           std::to_string(job.num_classes);
  }

  const Graph& graph(const Job& job) {
    const std::string key = graph_key(job);
    auto it = graphs_.find(key);
    if (it == graphs_.end())
      it = graphs_.emplace(key, build_network(job.network, job.input_size, job.num_classes)).first;
    return it->second;
  }

  const HostWeights& weights(const Job& job) {
    const std::string key = graph_key(job);
    auto it = weights_.find(key);
    if (it == weights_.end())
      it = weights_
               .emplace(key, opt_.weights_path.empty()
                                 ? network_random_weights(job.network, job.input_size,
                                                          job.num_classes, opt_.config.seed)
                                 : network_file_weights(job.network, job.input_size,
                                                        job.num_classes, opt_.weights_path))
               .first;
    return it->second;
  }

  // Written once the model is compiled (captured: false) and again once its graph is captured
  // and checked, so a model whose capture fails still shows its engines.
  void log_layers(const Job& job, const Graph& g, const Prepared& p, bool captured) {
    if (opt_.layers_out.empty() || quiet) return;
    const Model& m = *p.model;
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerRecord& r : m.layers()) layers.push_back(layer_record_json(r));
    const Arena& a = m.arena();
    if (!log_.empty() && log_.back()["model"] == p.key) log_.erase(log_.size() - 1);
    log_.push_back({{"model", p.key},
                    {"captured", captured},
                    {"network", g.name()},
                    {"precision", precision_name(job.precision)},
                    {"batch", job.batch},
                    {"engine_choice", engine_mode_name(opt_.engine)},
                    {"compile_ms", m.compile_ms()},
                    {"ops", m.op_count()},
                    {"graph_nodes", p.runner->graph_nodes()},
                    {"graph_vs_eager_rel_l2", p.runner->graph_vs_eager()},
                    {"graph_edges", p.runner->edges().total},
                    {"programmatic_edges", p.runner->edges().programmatic},
                    {"edges_made_full", p.runner->edges_made_full()},
                    {"graph_census", p.runner->census()},
                    {"graph_repairs", p.repairs},
                    {"plan_cache", opt_.plan_cache ? model_cache_json() : nlohmann::json()},
                    {"arena",
                     {{"weights_bytes", a.bytes(MemKind::Weights)},
                      {"activations_bytes", a.bytes(MemKind::Activations)},
                      {"activations_without_reuse_bytes", a.activations_unplanned_bytes()},
                      {"workspace_bytes", a.bytes(MemKind::Workspace)}}},
                    {"layers", layers}});
    // Rewritten whole after every model, so a run that dies keeps what it built.
    std::ofstream out(opt_.layers_out);
    out << nlohmann::json{{"models", log_}}.dump(1) << "\n";
  }

  const Options& opt_;
  std::unique_ptr<GpuContext> ctx_;
  std::unique_ptr<Prepared> current_;
  std::string key_;
  std::unique_ptr<TrainPrepared> train_;
  std::array<int, 5> cache_before_{};  // the plan cache's counters when this model's build began
  std::map<std::string, Graph> graphs_;
  std::map<std::string, HostWeights> weights_;
  nlohmann::json log_ = nlohmann::json::array();
};

Session* g_session = nullptr;
const Options* g_options = nullptr;
JsonLinesTee* g_lines = nullptr;  // the results lines, where written

// Training steps per event pair: enough for about 20 ms.
void run_train(benchmark::State& state, const Job& job) {
  TrainPrepared& p = g_session->get_train(job);
  const int chunk = std::max(1, int(std::ceil(20.0 / std::max(p.single_step_ms, 1e-3))));
  p.time_ms(1);  // warm this repetition
  Measurement m;
  m.batch = job.batch;
  m.replays_per_timing = chunk;
  while (state.KeepRunningBatch(chunk)) {
    const double ms = p.time_ms(chunk);
    state.SetIterationTime(ms * 1e-3);
    m.total_ms += ms;
    m.forwards += chunk;
  }
  p.peak.sample();
  m.flops_per_image = p.flops_per_image;
  const Arena& a = p.model->arena();
  const TrainModel::Footprint f = p.model->footprint();
  m.weights_bytes = f.weights;
  m.gradients_bytes = f.gradients;
  m.optimizer_state_bytes = f.optimizer_state;
  // Everything else: the planned values, their gradients and statistics, the image and labels,
  // and a padded stem's copy of the image.
  m.activations_bytes = a.bytes(MemKind::Weights) + a.bytes(MemKind::Activations) - f.weights -
                        f.gradients - f.optimizer_state;
  m.workspace_bytes = a.bytes(MemKind::Workspace);
  m.device_before_bytes = p.device_before;
  m.device_peak_bytes = p.peak.peak();
  const auto counters = counters_for(m);
  for (const auto& kv : counters) state.counters[kv.first] = kv.second;
  const double img_s = counters.at("img_per_s");
  state.counters["epoch_s"] = img_s > 0 ? job.settings.epoch_images / img_s : 0.0;
  // The same batch every step: the loss after the timed steps says the step still learns.
  const float loss = p.model->loss();
  if (!std::isfinite(loss)) throw std::runtime_error("training loss is not finite after timing");
  state.counters["loss"] = loss;
  state.counters["nondeterministic_layers"] = nondeterministic_layers(p.model->layers());
  if (job.precision == Precision::FP16) {  // GradScaler's state, over the whole run so far
    state.counters["skipped_steps"] = p.model->skipped_steps();
    state.counters["loss_scale"] = p.model->loss_scale();
  }
  state.SetLabel("train " + job.settings.optimizer + " lr " + std::to_string(job.settings.lr) +
                 ", " + std::to_string(p.model->layers().size()) + " library ops");
}

// The largest batch that fits: each batch tried is built, captured and run as its benchmark would
// be, then freed; an out-of-memory is an outcome, any other error stops the search. Each attempt
// is logged and written to the results lines as it ends, so a search cut off by a time limit
// still leaves its bracket. The search guesses from the memory each batch used against the
// memory limit (or the device's size).
void run_max_batch(benchmark::State& state, const Job& job, int cap) {
  const double mib = 1.0 / (1 << 20);
  g_session->begin_search();
  g_session->quiet = true;
  uint64_t baseline = 0;  // free memory after the first attempt (lazily loaded kernels settled)
  double drift_mib = 0;   // the most free memory missing after a later attempt
  MaxBatch r;
  size_t free_b = 0, total_b = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
  const double limit_mib =
      (g_options->memory_limit.bytes ? std::min<uint64_t>(g_options->memory_limit.bytes, total_b)
                                     : total_b) *
      mib;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    r = search_max_batch(
        [&](int b) {
          const auto ta = std::chrono::steady_clock::now();
          Attempt a;
          a.batch = b;
          Job j = job;
          j.batch = b;
          std::vector<std::pair<std::string, double>> phases;  // a training model's build
          try {
            if (job.train) {
              TrainPrepared& p = g_session->get_train(j);
              phases = p.model->build_phases();
              p.time_ms(1);
              p.peak.sample();
              a.peak_mib = p.peak.peak() * mib;
            } else {
              Prepared& p = g_session->get(j);
              p.peak.sample();
              a.peak_mib = p.peak.peak() * mib;
            }
          } catch (const std::exception& e) {
            a.fit = is_out_of_memory(e) ? Fit::OutOfMemory : Fit::Error;
            a.message = e.what();
          }
          g_session->drop();
          if (a.fit != Fit::Error) {
            CNN_CHECK_CUDA(cudaDeviceSynchronize());
            const uint64_t free_now = device_free_bytes();
            if (baseline == 0)
              baseline = free_now;
            else
              drift_mib = std::max(drift_mib, (double(baseline) - double(free_now)) * mib);
          }
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - ta).count();
          std::string where;  // "; model: plan and buffers 0.4 s, ops 2.0 s, ..."
          nlohmann::json build_s = nlohmann::json::object();
          for (const auto& [phase, s] : phases) {
            char buf[96];
            std::snprintf(buf, sizeof buf, "%s %s %.1f s", where.empty() ? "; model:" : ",",
                          phase.c_str(), s);
            where += buf;
            build_s[phase] = s;
          }
          std::fprintf(stderr, "cnnbench: max batch %s/%s/%s: batch %d %s (%.1f s%s)%s\n",
                       job.network.c_str(), precision_name(job.precision),
                       job.train ? "train" : "graph", b, fit_name(a.fit), seconds, where.c_str(),
                       a.fit == Fit::Fits ? "" : (": " + a.message.substr(0, 160)).c_str());
          if (g_lines)
            g_lines->note({{"max_batch_attempt",
                            {{"search", job.search_name},
                             {"batch", b},
                             {"fit", fit_name(a.fit)},
                             {"peak_mib", a.peak_mib},
                             {"limit_mib", limit_mib},
                             {"seconds", seconds},
                             {"model_build_s", build_s},
                             {"message", a.message}}}});
          return a;
        },
        job.search_start, cap, limit_mib);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  g_session->quiet = false;
  g_session->end_search();
  if (!r.error.empty()) {
    state.SkipWithError(("max-batch search stopped by an error at " + r.error).c_str());
    return;
  }
  state.counters["largest_batch"] = r.largest;
  state.counters["first_failed"] = r.first_failed;
  state.counters["capped"] = r.capped ? 1 : 0;
  state.counters["attempts"] = double(r.attempts.size());
  state.counters["peak_mib_at_largest"] = r.peak_mib_at_largest;
  state.counters["limit_mib"] = limit_mib;
  state.counters["free_drift_mib"] = drift_mib;
  std::string tried;
  for (const Attempt& a : r.attempts)
    tried += (tried.empty() ? "" : " ") + std::to_string(a.batch) +
             (a.fit == Fit::Fits          ? ""
              : a.fit == Fit::OutOfMemory ? "(oom)"
                                          : "(error)");
  state.SetLabel("largest " + std::to_string(r.largest) +
                 (r.capped ? " (the cap)" : ", first failing " + std::to_string(r.first_failed)) +
                 "; tried " + tried);
}

volatile std::sig_atomic_t g_interrupted = 0;

// A sticky CUDA error (an illegal address and the like: harness/check.h) leaves the process's
// context unusable: every later call fails the same way. The run then stops: each benchmark
// after it is skipped with an error row naming the error, the JSON is written whole, and the
// process exits 3 with a sentence saying so. g_last_error: the last benchmark's failure, which
// names the call that met the sticky error.
std::string g_lost_context, g_last_error;
constexpr int kExitContextLost = 3;

bool skip_if_stopped(benchmark::State& state) {
  if (g_interrupted) {
    state.SkipWithError("not run: interrupted (SIGINT)");
    return true;
  }
  if (!g_lost_context.empty()) {
    state.SkipWithError(
        ("not run: the CUDA context was lost to an earlier error (" + g_lost_context + ")")
            .c_str());
    return true;
  }
  return false;
}

// Every benchmark function runs through here: skipped once the run is stopped, and followed by
// a look at the context (a failure's own code may hide a sticky cause; a max-batch search keeps
// its errors as text).
template <auto Body, class Arg>
void guarded(benchmark::State& state, Arg arg) {
  if (skip_if_stopped(state)) return;
  g_last_error.clear();
  try {
    Body(state, arg);
  } catch (const std::exception& e) {  // the bodies catch their own; a checkpoint's may escape
    g_last_error = e.what();
    state.SkipWithError(e.what());
  }
  if (g_lost_context.empty()) {
    const std::string sticky = sticky_error_now();
    if (!sticky.empty()) g_lost_context = g_last_error.empty() ? sticky : g_last_error;
  }
}

// CNNBENCH_FAULT=KIND@TEXT, for the fault tests (tests/fault_test.sh): the first inference
// benchmark whose id holds TEXT meets a real failure once its model is built. KIND oom: a
// cudaMalloc of 1 PiB (CUDA's out-of-memory, which the run survives); illegal_address: a kernel
// that stores to address 16 (sticky: the run stops).
void inject_fault(const std::string& id) {
  static const char* spec = std::getenv("CNNBENCH_FAULT");
  static bool done = false;
  if (!spec || done) return;
  const std::string s = spec;
  const size_t at = s.find('@');
  if (at == std::string::npos || id.find(s.substr(at + 1)) == std::string::npos) return;
  done = true;
  const std::string kind = s.substr(0, at);
  if (kind == "oom") {
    void* p = nullptr;
    CNN_CHECK_CUDA(cudaMalloc(&p, size_t(1) << 50));
    cudaFree(p);
  } else if (kind == "illegal_address") {
    launch_store_to_address(16, nullptr);  // kernels/fault.h
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
  } else {
    throw UserError("CNNBENCH_FAULT: unknown kind '" + kind + "' (oom or illegal_address)");
  }
}

// Mode detect (issue 6): frames to final boxes. Each timed batch is the network's CUDA-graph
// replay, then the heads' decode and confidence filtering with class-aware NMS (DetectPost, a
// CUDA graph of its own), back to back on one stream; img_per_s counts frames through both. The
// post-processing alone is timed too (post_ms, a batch), and the last batch's candidates and
// detections per frame are reported: NMS's cost depends on them. An image with more candidates
// than --detect_capacity fails the row (its detections would be incomplete).
Prepared& prepare_detect(const Job& job) {
  Prepared& p = g_session->get(job);
  if (!p.detect) {
    const cudaStream_t s = p.runner->stream();
    NmsOptions o;  // conf 0.25 (the article's), IoU 0.5, at most 300 boxes
    p.detect = std::make_unique<DetectPost>(*p.model, yolor_heads(), job.num_classes, o,
                                            g_options->detect_capacity);
    p.runner->launch(true);
    p.detect->launch(s);  // captured here
    CNN_CHECK_CUDA(cudaStreamSynchronize(s));
    p.peak.sample();
  }
  return p;
}

// The last batch's candidates and detections per image (NMS's cost depends on them); an image
// over --detect_capacity fails the row, its detections being incomplete.
void count_detections(benchmark::State& state, const DetectPost::Result& r) {
  double candidates = 0, detections = 0;
  for (size_t n = 0; n < r.detections.size(); ++n)
    candidates += r.candidates[n], detections += double(r.detections[n].size());
  state.counters["candidates_per_image"] = candidates / double(r.detections.size());
  state.counters["detections_per_image"] = detections / double(r.detections.size());
  if (r.overflow)
    throw UserError("an image had " + std::to_string(r.overflow) +
                    " candidates over conf 0.25, more than --detect_capacity=" +
                    std::to_string(g_options->detect_capacity));
}

void run_detect(benchmark::State& state, const Job& job) {
  Prepared& p = prepare_detect(job);
  const cudaStream_t s = p.runner->stream();
  cudaEvent_t start = nullptr, stop = nullptr;
  CNN_CHECK_CUDA(cudaEventCreate(&start));
  CNN_CHECK_CUDA(cudaEventCreate(&stop));
  auto timed = [&](int count, bool network) {
    CNN_CHECK_CUDA(cudaEventRecord(start, s));
    for (int i = 0; i < count; ++i) {
      if (network) p.runner->launch(true);
      p.detect->launch(s);
    }
    CNN_CHECK_CUDA(cudaEventRecord(stop, s));
    CNN_CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return double(ms);
  };
  try {
    const int chunk = std::max(1, int(std::ceil(2.0 / std::max(p.single_forward_ms, 1e-3))));
    timed(chunk, true);  // warm
    const double post_ms = timed(chunk, false) / chunk;
    state.counters["prepare_s"] = p.prepare_s;
    Measurement m;
    m.batch = job.batch;
    m.replays_per_timing = chunk;
    while (state.KeepRunningBatch(chunk)) {
      const double ms = timed(chunk, true);
      state.SetIterationTime(ms * 1e-3);
      m.total_ms += ms;
      m.forwards += chunk;
    }
    const DetectPost::Result r = p.detect->download(s);
    p.peak.sample();
    const Model& model = *p.model;
    m.flops_per_image = model.flops_per_image();
    m.weights_bytes = model.arena().bytes(MemKind::Weights);
    m.activations_bytes = model.arena().bytes(MemKind::Activations);
    m.workspace_bytes = model.arena().bytes(MemKind::Workspace) + p.detect->device_bytes();
    m.device_peak_bytes = p.peak.peak();
    m.device_before_bytes = p.device_before;
    for (const auto& kv : counters_for(m)) state.counters[kv.first] = kv.second;
    state.counters["post_ms"] = post_ms;
    state.counters["network_ms"] = m.total_ms / double(m.forwards) - post_ms;
    count_detections(state, r);
  } catch (...) {
    cudaEventDestroy(start), cudaEventDestroy(stop);
    throw;
  }
  CNN_CHECK_CUDA(cudaEventDestroy(start));
  CNN_CHECK_CUDA(cudaEventDestroy(stop));
}

// Mode video (issue 6; the article's YOLOR metric): video_frames frames, uint8 RGB as a decoder
// hands them over, through everything a detection pipeline does on the GPU, at the job's batch:
// the frames' copy from pinned host memory, their conversion into the network's input (x / 255),
// the network's CUDA-graph replay, the decode and NMS, and the boxes' copy back. One pass is one
// iteration; its time, from the first copy to the last boxes on the host, is the time to
// completion, and frames_per_s = video_frames / that. A last partial batch runs whole and counts
// only its frames. The frames are synthetic (a pool of two batches' worth, cycled: the content
// does not change the work, the copies are real). Decoding the video and letterboxing on the
// host, as YOLOR's detect.py does on the CPU, are not in it.
void run_video(benchmark::State& state, const Job& job) {
  Prepared& p = prepare_detect(job);
  const cudaStream_t s = p.runner->stream();
  Model& model = *p.model;
  const Dims in = model.input_dims();
  const size_t frame_bytes = size_t(in.h) * in.w * in.c;
  const size_t batch_bytes = frame_bytes * job.batch;
  const int max_det = NmsOptions{}.max_det;
  uint8_t* host_frames = nullptr;
  uint8_t* dev_frames = nullptr;
  void* host_boxes = nullptr;
  const size_t boxes_bytes = size_t(job.batch) * max_det * sizeof(Detection);
  cudaEvent_t start = nullptr, stop = nullptr;
  auto release = [&] {
    cudaFreeHost(host_frames), cudaFree(dev_frames), cudaFreeHost(host_boxes);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  };
  try {
    CNN_CHECK_CUDA(cudaMallocHost(&host_frames, 2 * batch_bytes));
    CNN_CHECK_CUDA(cudaMalloc(&dev_frames, batch_bytes));
    CNN_CHECK_CUDA(cudaMallocHost(&host_boxes, boxes_bytes));
    CNN_CHECK_CUDA(cudaEventCreate(&start));
    CNN_CHECK_CUDA(cudaEventCreate(&stop));
    uint64_t z = 0x9E3779B97F4A7C15ull;  // the pool: noise, as a decoder's output would be bytes
    for (size_t i = 0; i < 2 * batch_bytes; ++i) {
      z ^= z << 13, z ^= z >> 7, z ^= z << 17;
      host_frames[i] = uint8_t(z >> 56);
    }
    const DType t = storage_type(job.precision);
    const int batches = (job.video_frames + job.batch - 1) / job.batch;
    auto one_batch = [&](int b) {
      CNN_CHECK_CUDA(cudaMemcpyAsync(dev_frames, host_frames + (b % 2) * batch_bytes, batch_bytes,
                                     cudaMemcpyHostToDevice, s));
      frames_to_input(dev_frames, in, t, model.input_ptr(), s);
      p.runner->launch(true);
      p.detect->launch(s);
      CNN_CHECK_CUDA(cudaMemcpyAsync(host_boxes, p.detect->detections_ptr(), boxes_bytes,
                                     cudaMemcpyDeviceToHost, s));
    };
    one_batch(0);  // warm
    CNN_CHECK_CUDA(cudaStreamSynchronize(s));
    state.counters["prepare_s"] = p.prepare_s;
    double total_s = 0;
    int passes = 0;
    for (auto _ : state) {
      CNN_CHECK_CUDA(cudaEventRecord(start, s));
      for (int b = 0; b < batches; ++b) one_batch(b);
      CNN_CHECK_CUDA(cudaEventRecord(stop, s));
      CNN_CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      state.SetIterationTime(ms * 1e-3);
      total_s += ms * 1e-3, ++passes;
    }
    const DetectPost::Result r = p.detect->download(s);
    p.peak.sample();
    const double pass_s = total_s / std::max(passes, 1);
    state.counters["frames"] = job.video_frames;
    state.counters["time_to_completion_s"] = pass_s;
    state.counters["frames_per_s"] = job.video_frames / pass_s;
    state.counters["img_per_s"] = job.video_frames / pass_s;
    state.counters["batches_run"] = batches;
    state.counters["device_peak_mib"] = double(p.peak.peak()) / (1 << 20);
    count_detections(state, r);
  } catch (...) {
    release();
    throw;
  }
  release();
}

void run_benchmark(benchmark::State& state, Job job) {
  // A job that failed once fails its later repetitions the same way, at once.
  static std::map<std::string, std::string> failed;
  const std::string id = job.network + "/" + precision_name(job.precision) + "/" +
                         (job.train ? "train/" : "") + (job.detect ? "detect/" : "") +
                         (job.video_frames ? "video/" : "") + (job.graph ? "graph/" : "eager/") +
                         std::to_string(job.batch) + "/" + std::to_string(job.input_size) + "/" +
                         std::to_string(job.num_classes);
  if (failed.count(id)) {
    state.SkipWithError(failed[id].c_str());
    return;
  }
  if (job.max_batch) {
    try {
      run_max_batch(state, job, g_options->max_batch_cap);
    } catch (const std::exception& e) {
      g_session->drop();
      g_session->quiet = false;
      g_last_error = e.what();
      state.SkipWithError(e.what());
    }
    return;
  }
  if (job.detect) {
    try {
      if (job.video_frames)
        run_video(state, job);
      else
        run_detect(state, job);
    } catch (const std::exception& e) {
      g_session->drop();
      failed[id] = g_last_error = e.what();
      state.SkipWithError(failed[id].c_str());
    }
    return;
  }
  if (job.train) {
    try {
      run_train(state, job);
    } catch (const std::exception& e) {
      g_session->drop();
      failed[id] = g_last_error = e.what();
      state.SkipWithError(failed[id].c_str());
    }
    return;
  }
  try {
    Prepared& p = g_session->get(job);
    inject_fault(id);  // after the build: the failure must free the model
    // Forwards per event pair: enough for about 2 ms, so event and launch latency stay small.
    const int chunk = std::max(1, int(std::ceil(2.0 / std::max(p.single_forward_ms, 1e-3))));
    p.runner->time_ms(job.graph, chunk);  // warm this repetition (and eager's first launch)
    if (g_options->profile_forwards > 0) {
      // For a profiler: exactly N forwards after warm-up, once per benchmark. Google Benchmark
      // calls this function several times a benchmark (its iteration-count trials, then each
      // repetition): profiling in each call gave ncu three launches of a layer for --profile=1
      // (device call 60).
      // The counter is the benchmark's total, so a second profiling would show in the JSON
      // (tests/smoke_benchmark.sh checks it).
      static std::map<std::string, double> profiled;
      double& total = profiled[id];
      if (total == 0) total += p.runner->profile(job.graph, g_options->profile_forwards);
      state.counters["profiled_forwards"] = total;
    }
    // Time to the first result: plan building and autotuning dominate a sweep's wall time
    // (EfficientNet-B4 at 128 took over 45 s in device call 18).
    state.counters["prepare_s"] = p.prepare_s;
    Measurement m;
    m.batch = job.batch;
    m.replays_per_timing = chunk;
    while (state.KeepRunningBatch(chunk)) {
      const double ms = p.runner->time_ms(job.graph, chunk);
      state.SetIterationTime(ms * 1e-3);
      m.total_ms += ms;
      m.forwards += chunk;
    }
    p.peak.sample();
    const Model& model = *p.model;
    m.flops_per_image = model.flops_per_image();
    m.weights_bytes = model.arena().bytes(MemKind::Weights);
    m.activations_bytes = model.arena().bytes(MemKind::Activations);
    m.workspace_bytes = model.arena().bytes(MemKind::Workspace);
    m.device_peak_bytes = p.peak.peak();
    m.device_before_bytes = p.device_before;
    for (const auto& kv : counters_for(m)) state.counters[kv.first] = kv.second;
    state.counters["nondeterministic_layers"] = nondeterministic_layers(model.layers());
    int convs = 0, fused = 0;
    for (const LayerRecord& r : model.layers())
      if (r.op.rfind("conv", 0) == 0) ++convs, fused += r.fused;
    state.SetLabel(std::to_string(fused) + "/" + std::to_string(convs) + " convs fused, " +
                   std::to_string(model.op_count()) + " ops");
  } catch (const std::exception& e) {
    g_session->drop();
    failed[id] = g_last_error = e.what();
    state.SkipWithError(failed[id].c_str());
  }
}

// When the current soak pass began: the sweep's start, then each checkpoint's end.
std::chrono::steady_clock::time_point g_pass_began = std::chrono::steady_clock::now();

// After pass `pass` of a soak run: every model freed (the context and its libraries kept), then
// the device's used memory, the process's resident set and the pass's wall seconds (pass_s).
void run_soak_checkpoint(benchmark::State& state, int pass) {
  const double pass_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_pass_began).count();
  g_session->drop();
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  size_t free_b = 0, total_b = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
  for (auto _ : state) state.SetIterationTime(1e-6);
  state.counters["pass"] = pass;
  state.counters["device_used_mib"] = double(total_b - free_b) / (1 << 20);
  state.counters["host_rss_mib"] = double(host_rss_bytes()) / (1 << 20);
  state.counters["pass_s"] = pass_s;
  g_pass_began = std::chrono::steady_clock::now();
}

// The matrix-multiply ceiling (--gemm_ceiling): harness/ceilings.h's GEMM of kGemmSize^3, each
// timing one replay of its graph.
constexpr int kGemmSize = 8192;

void run_gemm_ceiling(benchmark::State& state, Precision p) {
  g_session->drop();
  try {
    GemmCeiling gemm(p, kGemmSize);
    double best_ms = 1e30, total_ms = 0;
    int64_t timed = 0;
    for (auto _ : state) {
      const double ms = gemm.run_ms();
      best_ms = std::min(best_ms, ms);
      total_ms += ms, ++timed;
      state.SetIterationTime(ms / 1000.0);
    }
    state.counters["tflops"] = gemm.tflops(total_ms / double(timed));  // at the mean time
    state.counters["best_tflops"] = gemm.tflops(best_ms);
    state.SetLabel(gemm.engine());
  } catch (const std::exception& e) {
    g_last_error = e.what();
    state.SkipWithError(e.what());
  }
}

bool user_set(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--" + flag, 0) == 0) return true;
  return false;
}

int run(int argc_in, char** argv_in) {
  Options opt;
  std::string config_path = "configs/default.yaml", plan_cache_path, engine, benchmark_out,
              memory_limit, lines_out, resume_path, gpus_path = "configs/gpus.yaml";
  bool eager = false, max_batch = false, gemm_ceiling = false;
  int soak = 0;  // --soak=N: passes of the whole sweep; 0: one, without soak rows
  for (int i = 1; i < argc_in; ++i) {
    const std::string a = argv_in[i];
    if (a.rfind("--benchmark_out=", 0) == 0) benchmark_out = a.substr(16);
    if (a.rfind("--config=", 0) == 0) config_path = a.substr(9);
    if (a == "--config" && i + 1 < argc_in) config_path = argv_in[i + 1];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--list") {
      std::cout << network_table();
      return 0;
    }
  }
  opt.config = parse_config_file(config_path, config_schema());
  // The config's repetitions and minimum time become Google Benchmark's flags (so they stay out
  // of the benchmark names); flags given on the command line win.
  std::vector<std::string> extra;
  if (!user_set(argc_in, argv_in, "benchmark_repetitions"))
    extra.push_back("--benchmark_repetitions=" + std::to_string(opt.config.repetitions));
  if (!user_set(argc_in, argv_in, "benchmark_min_time"))
    extra.push_back("--benchmark_min_time=" + std::to_string(opt.config.min_time_s));
  std::vector<char*> args(argv_in, argv_in + argc_in);
  for (std::string& e : extra) args.push_back(e.data());
  int argc = int(args.size());
  char** argv = args.data();
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (take_flag(i, argc, argv, "config", &v)) {
      continue;  // read above
    } else if (take_flag(i, argc, argv, "weights", &v)) {
      opt.weights_path = v;
    } else if (take_flag(i, argc, argv, "engine", &v)) {
      engine = v;
    } else if (take_flag(i, argc, argv, "layers_out", &v)) {
      opt.layers_out = v;
    } else if (take_flag(i, argc, argv, "share_plans", &v)) {
      if (v != "true" && v != "false")
        throw UserError("--share_plans takes true or false, not '" + v + "'");
      opt.share_plans = v == "true";
    } else if (take_flag(i, argc, argv, "mode_b", &v)) {
      if (v != "true" && v != "false")
        throw UserError("--mode_b takes true or false, not '" + v + "'");
      opt.mode_b = v == "true";
    } else if (take_flag(i, argc, argv, "graph_tune_us", &v)) {
      opt.graph_tune_us = parse_graph_tune_us(v);
    } else if (take_flag(i, argc, argv, "graph_edges", &v)) {
      opt.graph_edges = parse_graph_edges(v);
    } else if (take_flag(i, argc, argv, "exclude_engines", &v)) {
      for (const std::string& e : parse_engine_list(v)) opt.exclude_engines.push_back(e);
    } else if (take_flag(i, argc, argv, "deterministic", nullptr)) {
      opt.exclude_engines.push_back(kNondeterministic);
    } else if (take_flag(i, argc, argv, "build_threads", &v)) {
      opt.build_threads = parse_build_threads(v);
    } else if (take_flag(i, argc, argv, "memory_limit", &v) ||
               take_flag(i, argc, argv, "memory-limit", &v)) {
      memory_limit = v;
    } else if (take_flag(i, argc, argv, "gpus", &v)) {
      gpus_path = v;
    } else if (take_flag(i, argc, argv, "detect_capacity", &v)) {
      opt.detect_capacity = int(parse_count(v, "detect_capacity"));
      if (opt.detect_capacity < 1) throw UserError("--detect_capacity must be at least 1");
    } else if (take_flag(i, argc, argv, "max_batch_cap", &v)) {
      opt.max_batch_cap = int(parse_count(v, "max_batch_cap"));
      if (opt.max_batch_cap < 1) throw UserError("--max_batch_cap must be at least 1");
    } else if (take_flag(i, argc, argv, "max_batch", nullptr)) {
      max_batch = true;
    } else if (take_flag(i, argc, argv, "results_lines", &v)) {
      lines_out = v;
    } else if (take_flag(i, argc, argv, "resume", &v)) {
      resume_path = v;
    } else if (take_flag(i, argc, argv, "gemm_ceiling", nullptr)) {
      gemm_ceiling = true;
    } else if (take_flag(i, argc, argv, "soak", &v)) {
      soak = int(parse_count(v, "soak"));
      if (soak < 1) throw UserError("--soak takes a number of passes, 1 or more, not '" + v + "'");
    } else if (take_flag(i, argc, argv, "profile", &v)) {
      opt.profile_forwards = int(parse_count(v, "profile"));
      if (opt.profile_forwards < 1)
        throw UserError("--profile takes a count of forwards, 1 or more");
    } else if (take_flag(i, argc, argv, "se_fold", nullptr)) {
      opt.se_fold = true;
    } else if (take_flag(i, argc, argv, "pad_channels", &v)) {
      if (v != "true" && v != "false")
        throw UserError("--pad_channels takes true or false, not '" + v + "'");
      opt.pad_channels = v == "true";
    } else if (take_flag(i, argc, argv, "depthwise", &v)) {
      opt.depthwise = parse_depthwise_choice(v);
    } else if (take_flag(i, argc, argv, "stem", &v)) {
      opt.stem = parse_stem_choice(v);
    } else if (take_flag(i, argc, argv, "eager", nullptr)) {
      eager = true;
    } else if (take_flag(i, argc, argv, "plan_cache", &v)) {
      plan_cache_path = v;
      if (v.empty()) throw UserError("--plan_cache needs a file name");
    } else {
      throw UserError(std::string("unknown flag '") + argv[i] + "' (see --help)");
    }
  }
  opt.engine = parse_engine_mode(engine.empty() ? opt.config.engine : engine);
  if (opt.layers_out.empty() && !benchmark_out.empty()) {
    const size_t dot = benchmark_out.rfind(".json");
    opt.layers_out =
        (dot != std::string::npos ? benchmark_out.substr(0, dot) : benchmark_out) + ".layers.json";
  }
  if (!opt.layers_out.empty() && !std::ofstream(opt.layers_out, std::ios::app))
    throw UserError("cannot write the layer table to '" + opt.layers_out + "'");
  // The results lines (harness/jsonl.h): each finished run appended and flushed, so a killed
  // sweep keeps what it measured.
  if (lines_out.empty() && !benchmark_out.empty()) {
    const size_t dot = benchmark_out.rfind(".json");
    lines_out =
        (dot != std::string::npos ? benchmark_out.substr(0, dot) : benchmark_out) + ".jsonl";
  }
  if (!lines_out.empty() && !std::ofstream(lines_out, std::ios::app))
    throw UserError("cannot write the results lines to '" + lines_out + "'");
  if (!opt.weights_path.empty()) {
    std::string nets;
    for (const BenchmarkEntry& e : opt.config.benchmarks) {
      if (nets.find(e.network) == std::string::npos) nets += (nets.empty() ? "" : ", ") + e.network;
      network_file_weights(e.network, e.input_size, e.num_classes,
                           opt.weights_path);  // fail early
    }
    if (nets.find(',') != std::string::npos)
      throw UserError("--weights names one file but the sweep has several networks (" + nets + ")");
  }

  if (!memory_limit.empty())
    opt.memory_limit = parse_memory_limit(memory_limit, load_gpu_table(gpus_path));

  // --resume: what a partial results file holds whole is not registered again (read before
  // the device is looked at, so a bad file is named on any host).
  const std::set<std::string> resumed =
      resume_path.empty() ? std::set<std::string>{} : completed_benchmarks(resume_path);
  // --plan_cache: read (and checked writable) before the device is looked at.
  std::unique_ptr<DiskPlanCache> plan_cache;
  if (!plan_cache_path.empty()) plan_cache = std::make_unique<DiskPlanCache>(plan_cache_path);
  require_cuda_device();
  const DeviceInfo dev = discover_device(0);
  if (plan_cache) {
    plan_cache->set_scope(plan_cache_scope_device(dev), plan_cache_scope_library(dev),
                          plan_cache_search(opt.mode_b, opt.graph_tune_us));
    opt.plan_cache = plan_cache.get();
  }
  // The cap, once the CUDA context exists (it counts toward the limit, as on a real card).
  std::unique_ptr<DeviceMemoryCap> cap;
  if (opt.memory_limit.bytes) {
    CNN_CHECK_CUDA(cudaFree(nullptr));
    cap = std::make_unique<DeviceMemoryCap>(opt.memory_limit.bytes);
  }
  // Every context entry goes to Google Benchmark's JSON and to the results lines' first line.
  nlohmann::json lines_context = {{"cnnbench_schema", "results lines 1"}};
  auto add_context = [&](const std::string& key, const std::string& value) {
    benchmark::AddCustomContext(key, value);
    lines_context[key] = value;
  };
  add_context("memory_limit", opt.memory_limit.bytes ? opt.memory_limit.label : "none");
  add_context("memory_limit_mib",
              std::to_string(opt.memory_limit.bytes ? opt.memory_limit.bytes >> 20 : 0));
  add_context("memory_ballast_mib", std::to_string(cap ? cap->ballast_bytes() >> 20 : 0));
  for (const auto& kv : context_entries(dev)) add_context(kv.first, kv.second);
  add_context("config", config_path);
  add_context("engine_choice", engine_mode_name(opt.engine));
  add_context("share_plans", opt.share_plans ? "true" : "false");
  add_context("heuristic_mode_b", opt.mode_b ? "true" : "false");
  {
    char us[32];
    std::snprintf(us, sizeof us, "%g", opt.graph_tune_us);
    add_context("graph_tune_us", us);
  }
  add_context("graph_edges", graph_edges_name(opt.graph_edges));
  std::string excluded;
  for (const std::string& e : opt.exclude_engines) excluded += (excluded.empty() ? "" : ",") + e;
  add_context("exclude_engines", excluded.empty() ? "none" : excluded);
  add_context("deterministic", std::find(opt.exclude_engines.begin(), opt.exclude_engines.end(),
                                         kNondeterministic) != opt.exclude_engines.end()
                                   ? "true"
                                   : "false");
  add_context("build_threads", std::to_string(opt.build_threads));
  add_context("se_fold", opt.se_fold ? "true" : "false");
  add_context("pad_channels", opt.pad_channels ? "true" : "false");
  add_context("depthwise", depthwise_choice_name(opt.depthwise));
  add_context("stem", stem_choice_name(opt.stem));
  add_context("stem_wgrad", kernel_choice_name(stem_wgrad_choice_from_env()));  // training
  add_context("plan_cache", plan_cache ? plan_cache->path() : "none");
  add_context("weights", opt.weights_path.empty()
                             ? "random, seed " + std::to_string(opt.config.seed)
                             : opt.weights_path);

  int skipped = 0;
  auto already = [&](const std::string& name) {
    const bool hit = resumed.count(name + "/manual_time") ||
                     resumed.count(name + "/iterations:1/repeats:1/manual_time");
    skipped += hit;
    return hit;
  };
  if (gemm_ceiling)
    for (Precision p : {Precision::FP16, Precision::BF16, Precision::TF32}) {
      const std::string name =
          std::string("gemm/") + precision_name(p) + "/ceiling/m:" + std::to_string(kGemmSize);
      if (already(name)) continue;
      benchmark::RegisterBenchmark(name.c_str(), guarded<run_gemm_ceiling, Precision>, p)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  for (int pass = 1; pass <= std::max(soak, 1); ++pass) {
    const std::string pass_suffix = soak > 0 ? "/pass:" + std::to_string(pass) : "";
    // What follows (network, precision, mode, batch) in a name: a size or class count other than
    // the network's defaults, and the soak pass.
    auto tail = [&](const BenchmarkEntry& e) {
      std::string t;
      if (e.input_size != find_network(e.network).limits.default_input_size)
        t += "/size:" + std::to_string(e.input_size);
      if (e.num_classes != find_network(e.network).limits.default_classes)
        t += "/classes:" + std::to_string(e.num_classes);
      return t + pass_suffix;
    };
    for (const BenchmarkEntry& e : opt.config.benchmarks) {
      std::vector<std::string> modes = e.modes;
      if (eager && std::find(modes.begin(), modes.end(), "eager") == modes.end())
        modes.push_back("eager");
      for (const std::string& prec : e.precisions)
        for (int batch : e.batches)
          for (const std::string& mode : modes) {
            Job job{e.network,     parse_precision(prec), batch,           e.input_size,
                    e.num_classes, mode == "graph",       mode == "train", e.train};
            job.detect = mode == "detect" || mode == "video";
            job.graph = job.graph || job.detect;
            if (mode == "video") job.video_frames = e.video_frames;
            std::string name =
                e.network + "/" + prec + "/" + mode + "/batch:" + std::to_string(batch);
            name += tail(e);
            if (mode == "video") name += "/frames:" + std::to_string(e.video_frames);
            if (already(name)) continue;
            auto* b = benchmark::RegisterBenchmark(name.c_str(), guarded<run_benchmark, Job>, job);
            b->UseManualTime()->Unit(benchmark::kMillisecond);
            if (mode == "video") b->Iterations(1);  // one pass over the video a repetition
          }
      // One largest-batch search per (precision, mode), after the entry's throughput rows.
      if (max_batch)
        for (const std::string& prec : e.precisions)
          for (const std::string& mode : e.modes) {
            if (mode != "graph" && mode != "train") continue;
            Job job{e.network,       parse_precision(prec), 0,      e.input_size, e.num_classes,
                    mode == "graph", mode == "train",       e.train};
            job.max_batch = true;
            job.search_start = *std::max_element(e.batches.begin(), e.batches.end());
            std::string name = e.network + "/" + prec + "/" + mode + "/max_batch";
            name += tail(e);
            if (already(name)) continue;
            job.search_name = name;
            auto* b = benchmark::RegisterBenchmark(name.c_str(), guarded<run_benchmark, Job>, job);
            b->UseManualTime()->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(1);
          }
    }
    if (soak > 0) {
      const std::string name = "soak/pass:" + std::to_string(pass);
      if (!already(name))
        benchmark::RegisterBenchmark(name.c_str(), guarded<run_soak_checkpoint, int>, pass)
            ->UseManualTime()
            ->Iterations(1)
            ->Repetitions(1);
    }
  }

  if (!resume_path.empty())
    std::fprintf(stderr, "cnnbench: --resume: %d benchmarks already whole in %s are skipped\n",
                 skipped, resume_path.c_str());
  Session session(opt);
  g_session = &session;
  g_options = &opt;
  // SIGINT: the benchmark under way finishes, the rest are skipped, the JSON is written whole.
  std::signal(SIGINT, [](int) { g_interrupted = 1; });
  g_pass_began = std::chrono::steady_clock::now();
  if (!lines_out.empty()) {
    JsonLinesTee tee(lines_out, lines_context);
    g_lines = &tee;
    benchmark::RunSpecifiedBenchmarks(&tee);
    g_lines = nullptr;
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  session.finish();
  benchmark::Shutdown();
  if (!g_lost_context.empty()) {
    std::fprintf(stderr,
                 "cnnbench: stopped: %s left the device's CUDA context unusable; every benchmark "
                 "after it was skipped with an error row, and the results written are complete\n",
                 g_lost_context.c_str());
    return kExitContextLost;
  }
  if (g_interrupted) {
    std::fprintf(stderr,
                 "cnnbench: interrupted (SIGINT): the benchmarks after the one under way "
                 "were skipped; the results written are complete\n");
    return 130;
  }
  return 0;
}

}  // namespace
}  // namespace cnnbench

int main(int argc, char** argv) {
  return cnnbench::run_main("cnnbench", cnnbench::run, argc, argv);
}
