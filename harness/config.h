// The YAML sweep configuration (configs/*.yaml).
//
//   seed: 0                      # weights and inputs are deterministic random from this seed
//   repetitions: 5               # Google Benchmark repetitions: median and spread are reported
//   min_time_s: 0.2              # timed seconds per repetition, at least
//   warmup_ms: 50                # untimed graph replays before timing, at least this long
//   engine: autotune             # heuristic | autotune
//   autotune_top_k: 8            # candidates timed per layer when engine is autotune
//   modes: [graph]               # graph | eager (eager launches op by op) | train (one SGD/Adam
//   step) benchmarks:
//     - network: resnet50
//       precisions: [fp16, bf16, tf32, fp32]
//       batches: [1, 2, 4, 8, 16, 32, 64, 128, 256]
//       input_size: 224          # optional; the network's default otherwise
//       num_classes: 1000        # optional; the classifier's width
//       video_frames: 1000       # mode video only: frames per run (a detector's; see below)
//
// A detector (yolor_csp_x) also takes mode `detect` (frames to final boxes: the network, then
// the heads' decode, confidence filtering and class-aware NMS) and mode `video` (video_frames
// uint8 frames from pinned host memory through copy, conversion, network, NMS and the boxes'
// copy back, at each batch: frames/s and the time to completion).
//
// With `train` among the modes, the training step's settings (at the top level as defaults, or in
// the entry):
//   optimizer: sgd               # sgd | adam (torch.optim's; Adam with betas 0.9, 0.999, eps 1e-8)
//   lr: 0.1                      # > 0
//   momentum: 0.9                # sgd only, 0 <= momentum < 1 (default 0: no momentum buffer)
//   weight_decay: 1e-4           # >= 0, L2 added to the gradient as torch.optim does (default 0)
//   epoch_images: 1281167        # images per epoch, for the time per epoch (default: ImageNet-1k)
// optimizer and lr have no default. An entry that gives a training setting must train.
//
// Top-level keys other than `benchmarks` are defaults; an entry of `benchmarks` may override
// `modes` and the training settings. Any problem throws UserError with one sentence naming the
// file, the key (and line where yaml-cpp gives one), the bad value and what would be valid; an
// unknown key suggests the nearest valid one ("unknown key 'batchs' ... did you mean 'batches'?").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cnnbench {

struct NetworkLimits {
  int default_input_size = 224;
  int min_input_size = 32;
  int default_classes = 1000;  // the width of its classifier or detection heads' classes
  bool trains = true;          // false: inference only (no `train` mode)
  bool detects = false;  // a YOLO detector: modes `detect` (network + decode + NMS) and `video`
};

// What the config may name: filled by the caller from the network registry so that the parser
// does not depend on it.
struct ConfigSchema {
  std::map<std::string, NetworkLimits> networks;
  // Accepted spellings, lower case without '-', '_' or ' ', to the canonical name.
  std::map<std::string, std::string> aliases;
  std::vector<std::string> precisions{"fp32", "tf32", "fp16", "bf16"};
  std::vector<std::string> modes{"graph", "eager", "train", "detect", "video"};
};

// The training step of a `train` mode.
struct TrainSettings {
  std::string optimizer;  // "sgd" or "adam"; empty where no entry trains
  double lr = 0;
  double momentum = 0;
  double weight_decay = 0;
  int epoch_images = 1281167;  // ImageNet-1k's training set
};

struct BenchmarkEntry {
  std::string network;
  std::vector<std::string> precisions;
  std::vector<int> batches;
  int input_size = 0;      // resolved: the network default when the config leaves it out
  int num_classes = 1000;  // resolved: the network default when the config leaves it out
  std::vector<std::string> modes;
  TrainSettings train;      // set where modes holds "train"
  int video_frames = 1000;  // mode video: the frames of the "video", run through at each batch
  bool trains() const;
};

struct SweepConfig {
  std::string source;  // the file it came from
  uint64_t seed = 0;
  int repetitions = 5;
  double min_time_s = 0.2;
  double warmup_ms = 50;
  std::string engine = "autotune";
  int autotune_top_k = 8;
  std::vector<std::string> modes{"graph"};
  std::vector<BenchmarkEntry> benchmarks;  // each with the top-level training settings merged in
};

SweepConfig parse_config_file(const std::string& path, const ConfigSchema& schema);
SweepConfig parse_config_text(const std::string& text, const std::string& source,
                              const ConfigSchema& schema);

// Edit distance, for "did you mean" suggestions (also used by the CLI).
std::string nearest_word(const std::string& word, const std::vector<std::string>& choices);

}  // namespace cnnbench
