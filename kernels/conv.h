// Convolution for inference through the cuDNN graph API, fused with its epilogue:
//   y = act( conv(x, w) + bias + z? ),  act: none, ReLU, SiLU (swish) or sigmoid
//   or y = act( conv(x, w) + bias ) + z  (residual_after_act)
// BatchNorm is folded into w and bias beforehand. Where no engine builds the fused graph, the op
// runs the convolution alone and our pointwise kernel applies the epilogue; the record says so.
#pragma once

#include <memory>
#include <string>

#include "kernels/cudnn_backend.h"
#include "kernels/op.h"
#include "kernels/pointwise.h"

namespace cnnbench {

struct CachedPlan;  // harness/plan_cache.h

struct OpGraph;  // a cuDNN operation graph and the descriptors it refers to (conv.cpp)
struct PrefetchedCandidates;

struct ConvSpec {
  std::string name;
  Dims x, y;  // batch included
  // kernel and pad are the height's; kernel_w and pad_w the width's (0: the same as the height).
  int kernel = 1, kernel_w = 0, stride = 1, pad = 0, pad_w = -1, dilation = 1, groups = 1;
  Precision precision = Precision::FP32;
  bool residual = false;            // adds z, shaped like y
  bool residual_after_act = false;  // y = act(conv + bias) + z (YOLOR) instead of act(... + z)
  Act act = Act::None;
  // y's channel stride: 0 or y.c when packed; wider when y is a slice of a concat buffer.
  int ld_y = 0;
  int kw() const { return kernel_w > 0 ? kernel_w : kernel; }
  int pw() const { return pad_w >= 0 ? pad_w : pad; }
  int ldy() const { return ld_y > 0 ? ld_y : y.c; }
  std::string signature() const;
  std::string op_name() const;  // "conv+bias+add+relu"
};

// Buffers of one conv: x, w (KRSC), bias [K], z (or null), y.
struct ConvBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
};

// Whether an engine's numerics fit a precision: fp32 refuses tensor-core (TF32), FFT and Winograd
// engines, tf32 refuses those that down-convert inputs to half, and no precision takes
// reduced-precision accumulation.
bool engine_fits_precision(const EngineInfo& e, Precision p);

// Whether an engine tag ("eng4{k24=23}+rtc") is one of `excluded`, each an engine name ("eng4",
// any knobs) or a whole tag.
bool engine_excluded(const std::string& tag, const std::vector<std::string>& excluded);
// The same for an engine config, where `excluded` may also hold the class "nondeterministic"
// (--deterministic): every engine whose numerical notes say its result may change from run to
// run (atomics in a reduction).
bool engine_excluded(const EngineInfo& info, const std::vector<std::string>& excluded);

// A plan that built for one engine config, and which heuristics list offered the config.
struct EngineCandidate {
  BackendDesc plan;
  EngineInfo engine;
  size_t workspace = 0;
  BackendDesc config;              // the engine config the plan was built from
  cudnnHandle_t handle = nullptr;  // the handle it was built on
  const char* source = "A";        // "A", "B" or "fallback" (RankedConfig)
};

// How many candidates engine_candidates takes from each heuristics list: up to `limit` from A
// and fallback together, and up to `extra` from B (configs A did not offer).
struct CandidateQuota {
  size_t limit = 1, extra = 0, taken = 0, from_b = 0;
  CandidateQuota(size_t limit_, bool with_mode_b)
      : limit(limit_), extra(with_mode_b && limit_ > 1 ? limit_ / 2 : 0) {}
  bool wants(const std::string& source) const {
    return source == "B" ? from_b < extra : taken - from_b < limit;
  }
  void took(const std::string& source) { ++taken, from_b += source == "B"; }
};

// The plans autotune times (limit > 1) or heuristics take (limit 1) for an operation graph, in
// ranked_configs' order: configs that fit the precision, are not excluded (engine_excluded), build
// and need at most max_workspace bytes; at most `limit` from modes A and fallback, and under
// autotune (with_mode_b) up to limit / 2 more that only mode B offers; at most one compiled at run
// time (NVRTC takes 0.3 to 1 s for each, against milliseconds for a precompiled engine). `why`: the
// last refusal.
std::vector<EngineCandidate> engine_candidates(cudnnHandle_t h, const BackendDesc& op_graph,
                                               Precision p, size_t limit, size_t max_workspace,
                                               const std::vector<std::string>& excluded,
                                               bool with_mode_b, std::string* why = nullptr);

class ConvOp : public Op {
 public:
  ConvOp(const ConvSpec& spec, const ConvBuffers& buffers);
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  size_t workspace_bytes() const override;
  void bind_workspace(void* workspace, size_t bytes) override;
  void run(cudaStream_t stream) override;
  double verify(int samples, uint64_t seed) const override;
  bool fused() const;
  std::string ban_engine(GpuContext& ctx) override;
  // The key of this layer's plan in ctx.plans: shape, output alignment and engine mode.
  std::string plan_key(EngineMode mode) const;
  // The candidate plans prepare() would build for the packed output, built on `handle`: safe to
  // call from several threads at once, each with a handle of its own.
  std::shared_ptr<PrefetchedCandidates> build_candidates(cudnnHandle_t handle, bool fused,
                                                         size_t limit, size_t max_workspace,
                                                         const std::vector<std::string>& skip,
                                                         const std::vector<std::string>& excluded,
                                                         bool mode_b) const;

 private:
  void epilogue(void* y, int ld, cudaStream_t stream);
  void unstage(cudaStream_t stream);
  ConvBuffers target_buffers() const;  // buf_, with y the staging buffer when staged
  // Bytes from y's first element to one past its last (the span of a strided slice).
  size_t y_span() const;
  bool execute(cudnnHandle_t handle, const BackendDesc& plan, const BackendDesc& vp, bool fused,
               cudaStream_t stream);
  // Runs a plan directly, then captured in a CUDA graph and replayed on a dirty workspace and a
  // poisoned output: true when both give the same output.
  bool graph_safe(GpuContext& ctx, cudnnHandle_t handle, const BackendDesc& plan, bool fused,
                  const TuneScratch& scratch);
  // A plan's time per launch replayed from a CUDA graph of kGraphTuneRuns launches (graph_us):
  // autotune's second round. Negative where the plan cannot be captured.
  double replay_us(GpuContext& ctx, cudnnHandle_t handle, const BackendDesc& plan, bool fused,
                   const TuneScratch& scratch);
  // --plan_cache: builds the cached engine `c` alone into `entry` (the replay check included);
  // false where heuristics no longer offer it, it is banned, excluded or refused.
  bool from_cache(GpuContext& ctx, const CachedPlan& c, const std::vector<std::string>& unsafe,
                  bool strided, int align, const TuneScratch& scratch, PlanCacheEntry& entry);
  ConvSpec spec_;
  ConvBuffers buf_;
  cudnnHandle_t handle_ = nullptr;
  std::shared_ptr<PlanCacheEntry> plan_;
  std::string plan_key_;  // ctx.plans' key of this layer's shape, alignment and engine mode
  std::shared_ptr<OpGraph> own_graph_;  // the operation graph own_plan_ was built for
  BackendDesc own_plan_;  // this layer's own plan of the shared engine (share_plans off)
  const BackendDesc& plan() const;
  BackendDesc variant_pack_;
  // Where no engine writes the strided slice, the conv writes a packed staging buffer at the
  // start of the workspace, and a copy kernel moves it into the slice.
  bool staged_ = false;
  void* stage_ = nullptr;
  size_t stage_bytes() const;
};

// Builds the candidate plans of every conv whose shape has no plan yet on ctx.build_threads host
// threads, each with a cuDNN handle of its own (ctx.helper_cudnn), into ctx.prefetched: NVRTC
// compiles the run-time-compiled engines in parallel, and prepare() then only times and checks.
// A build that fails there is left to prepare(). Nothing is done with fewer than two threads.
void prefetch_conv_plans(GpuContext& ctx, const std::vector<const ConvOp*>& convs, EngineMode mode,
                         int top_k, size_t max_workspace);

// An op with a kernel of ours beside cuDNN's conv (DepthwiseOp, StemConvOp): the ConvOp it owns
// and which of the two runs. The workspace, its binding and engine bans are the ConvOp's while it
// runs, none otherwise.
class ConvWithAlternative : public Op {
 public:
  ~ConvWithAlternative() override;
  size_t workspace_bytes() const override;
  void bind_workspace(void* workspace, size_t bytes) override;
  std::string ban_engine(GpuContext& ctx) override;
  bool runs_cudnn() const { return use_cudnn_; }

 protected:
  ConvWithAlternative(const ConvSpec& spec, const ConvBuffers& buffers);
  // The race's time of the path kept, measured as a CUDA graph's replay (no eager time).
  static void set_raced_time(LayerRecord& r, double graph_us) {
    r.tuned_us = graph_us, r.tuned_in_graph = true, r.tuned_eager_us = 0;
  }
  std::unique_ptr<ConvOp> conv_;
  bool conv_prepared_ = false;
  bool use_cudnn_ = false;
};

}  // namespace cnnbench
