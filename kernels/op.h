// The interface every executable op shares, the GPU context they run in, and what each op
// records about itself (the engine cuDNN or cuBLAS picked, whether it fused, its workspace).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/graph_edges.h"
#include "kernels/tensor.h"

namespace cnnbench {

enum class EngineMode { Heuristic, Autotune };
EngineMode parse_engine_mode(const std::string& s);  // UserError on others
const char* engine_mode_name(EngineMode m);

// The engine class --deterministic excludes (GpuContext::excluded), and the note that marks it.
inline constexpr const char* kNondeterministic = "nondeterministic";

struct LayerRecord {
  std::string name;          // parameter path, e.g. "layer3.2.conv2"
  std::string op;            // "conv+bias+add+relu", "maxpool", "linear+bias", ...
  std::string shape;         // "in NxCxHxW -> out NxCxHxW"
  std::string engine;        // "eng12{k2=1}+rtc", "cublasLt algo 6", "cnnbench kernel"
  std::string engine_notes;  // cuDNN's numerical and behavior notes of that engine
  bool fused = true;         // false when a cuDNN graph fell back to conv + our epilogue kernel
  size_t workspace_bytes = 0;
  double tuned_us = 0;           // autotune: the winner's time; 0 under heuristics
  int candidates = 0;            // plans that built (and, under autotune, were timed)
  double build_ms = 0;           // host time to choose and build the plan
  bool plan_reused = false;      // shared with an earlier layer of the same shape
  bool from_plan_cache = false;  // autotune's choice read from --plan_cache, not timed again
  // tuned_us is a CUDA-graph replay's time per launch (GpuContext::graph_tune_below_us), not
  // an eager launch's; tuned_eager_us is the same plan's eager time (tuned_us where not in graph).
  bool tuned_in_graph = false;
  double tuned_eager_us = 0;
  // Which heuristics list offered the engine (kernels/cudnn_backend.h, RankedConfig): "A", "B"
  // or "fallback"; "plan cache" where --plan_cache gave it (cuBLASLt's classifier too); empty for
  // other libraries' ops.
  std::string heuristic_source;
  // Plans refused because their CUDA-graph replay disagreed with a direct run.
  std::vector<std::string> rejected;
};

// Layers whose engine cuDNN marks nondeterministic (their result may change from run to run).
int nondeterministic_layers(const std::vector<LayerRecord>& layers);

// The default of --build_threads: the host's cores, at most 16.
int default_build_threads();

struct PlanCacheEntry;        // defined by the conv op
class DiskPlanCache;          // harness/plan_cache.h
struct PrefetchedCandidates;  // likewise

// Handles and the stream, shared by all ops of a process.
struct GpuContext {
  GpuContext();
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudaStream_t stream = nullptr;
  // Execution plans by op signature, so layers of one shape share one plan (and one tuning).
  std::map<std::string, std::shared_ptr<PlanCacheEntry>> plans;
  // false: a layer of an already tuned shape still takes that engine and its knobs, but in an
  // execution plan of its own.
  bool share_plans = true;
  // The captured graph's dependency edges: as captured, or all made full-completion ones.
  GraphEdges graph_edges = GraphEdges::Captured;
  // Engines banned per plan key after a whole-graph replay departed from eager at a layer that
  // ran them (see prepare_model): a rebuilt layer of that key picks among the others.
  std::map<std::string, std::vector<std::string>> banned;
  // Engines the user excluded (--exclude_engines): names ("eng4") or whole tags.
  std::vector<std::string> excluded;
  // Autotune also times up to top_k / 2 engine configs that only heuristics mode B offers
  // (engine_candidates); --mode_b=false: modes A and fallback alone, as before 2026-12-05.
  bool heuristic_mode_b = true;
  // Autotune's second round (--graph_tune_us): where a conv's fastest candidate, each launched
  // eagerly between two events, took under this many microseconds, the fastest eight are timed
  // again as the benchmark replays them, 20 launches back to back in one CUDA graph, and the
  // fastest there is kept. An eager launch carries the host's cost of cudnnBackendExecute (a few
  // microseconds, different by engine), which the replay does not: at batch 1 it was most of
  // what eager timing measured (ResNet-50, call 53: the layers' eager times summed 898 us, the
  // graph 364). 0: eager times alone, as before 2026-12-05. Off for work that runs eagerly (the
  // StyleGAN trainer).
  double graph_tune_below_us = 100;
  // Whether a conv plan (forward or backward) must give the same output replayed from a CUDA
  // graph as run directly before it is taken. Off only for the untimed builds of a max-batch
  // search, whose check downloads every output twice (seconds per probe at thousands of images);
  // the context is dropped after the search so no unchecked plan is timed.
  bool check_replays = true;
  // --plan_cache: autotune's earlier choices by plan key (forward convs), read before tuning and
  // written after; nullptr: none.
  DiskPlanCache* disk_plans = nullptr;
  // Host threads that build conv plans ahead of tuning (--build_threads; 1: none), their cuDNN
  // handles, and what they built, by plan key (prefetch_conv_plans).
  int build_threads = default_build_threads();
  std::vector<cudnnHandle_t> helper_cudnn;
  std::map<std::string, std::shared_ptr<PrefetchedCandidates>> prefetched;
};

// Scratch memory an op may use while choosing its engine (autotune), before the arena's
// workspace is sized.
struct TuneScratch {
  void* ptr = nullptr;
  size_t bytes = 0;
};

class Op {
 public:
  virtual ~Op() = default;
  // Picks engines and plans; may run the op (autotune) on its bound buffers.
  virtual void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) {
    (void)ctx, (void)mode, (void)top_k, (void)scratch;
  }
  virtual size_t workspace_bytes() const { return 0; }
  // Called once the arena's workspace exists.
  virtual void bind_workspace(void* workspace, size_t bytes) { (void)workspace, (void)bytes; }
  virtual void run(cudaStream_t stream) = 0;
  // After run(): recomputes `samples` random outputs on the host in double from the op's actual
  // device inputs and returns their relative L2 error; negative where the op has no check.
  virtual double verify(int samples, uint64_t seed) const {
    (void)samples, (void)seed;
    return -1;
  }
  const LayerRecord& record() const { return record_; }
  // Bans the engine this op runs for every later build of ops like it (ctx.banned) and forgets
  // its cached plan: the engine's tag, or "" where the op has no engine to choose.
  virtual std::string ban_engine(GpuContext& ctx) {
    (void)ctx;
    return "";
  }
  // The buffer the op writes, for poisoning before checks: output_bytes() from output() when
  // packed; rows of out_row_bytes_ every out_pitch_ bytes when the op writes a concat slice.
  void* output() const { return out_; }
  size_t output_bytes() const { return out_bytes_; }
  // Fills exactly the bytes the op writes with 0xFF (NaN in every storage type).
  void poison_output(cudaStream_t stream) const;

 protected:
  // The op writes `rows` rows of `row_bytes` every `pitch` bytes (a slice of a wider buffer).
  void set_strided_output(size_t rows, size_t row_bytes, size_t pitch) {
    out_rows_ = rows, out_row_bytes_ = row_bytes, out_pitch_ = pitch;
  }
  LayerRecord record_;
  void* out_ = nullptr;
  size_t out_bytes_ = 0;
  size_t out_rows_ = 0, out_row_bytes_ = 0, out_pitch_ = 0;
};

}  // namespace cnnbench
