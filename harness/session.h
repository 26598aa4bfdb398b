// What the benchmark binary and the infer tool share: the device check, network + weights
// resolution, and a compiled model with its runner for one (network, precision, batch).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/cli.h"
#include "harness/detect_post.h"
#include "harness/device.h"
#include "harness/runner.h"
#include "networks/compile.h"
#include "networks/registry.h"

namespace cnnbench {

// Throws UserError("no CUDA device: ...") when there is none.
void require_cuda_device();

struct Prepared {
  std::string key;  // "resnet50/fp16/batch:32"
  std::unique_ptr<Model> model;
  std::unique_ptr<Runner> runner;
  DevicePeak peak;
  uint64_t device_before = 0;    // the device's used memory before the model was built
  double single_forward_ms = 0;  // measured during warm-up (graph replay)
  double prepare_s = 0;          // wall time to build (autotune included), capture and warm it up
  std::vector<std::string> repairs;    // engines banned because the whole graph departed from eager
  std::unique_ptr<DetectPost> detect;  // a detector's decode + NMS (mode detect), freed first
};

// Builds a model with `make` and captures its CUDA graph. Where the replay departs from the eager
// forward, the first layer whose prefix graph departs has its engine banned (GpuContext::banned),
// and the model is rebuilt and captured again, at most `max_repairs` times; each ban is appended
// to `repairs` ("layer3.0.conv3: eng4{k24=23}+rtc"). `built` runs after every build, before its
// capture. Throws the last GraphMismatch where no ban cures it.
void build_and_capture(GpuContext& ctx, const std::function<std::unique_ptr<Model>()>& make,
                       std::unique_ptr<Model>& model, std::unique_ptr<Runner>& runner,
                       std::vector<std::string>& repairs, const std::function<void()>& built = {},
                       int max_repairs = 6);

// Compiles, captures and warms up one model. warmup_ms: replays before timing, at least 3.
// `built` is called once the model is compiled, before capture (so a model whose capture fails
// still shows which engines it had).
std::unique_ptr<Prepared> prepare_model(GpuContext& ctx, const Graph& g, const HostWeights& w,
                                        const CompileOptions& opt, double warmup_ms,
                                        const std::function<void(const Prepared&)>& built = {});

// --build_threads: 1 to 64; UserError otherwise.
int parse_build_threads(const std::string& s);

// --graph_tune_us (GpuContext::graph_tune_below_us): microseconds from 0 (the graph round off)
// to 100000; UserError otherwise.
double parse_graph_tune_us(const std::string& s);

// "eng4,eng8{k24=0}" -> {"eng4", "eng8{k24=0}"} (--exclude_engines); an empty string gives none.
// Each item must be an engine name (eng<N>) or a whole tag; otherwise UserError.
std::vector<std::string> parse_engine_list(const std::string& s);

}  // namespace cnnbench
