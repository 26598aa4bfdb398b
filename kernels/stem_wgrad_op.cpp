#include "kernels/stem_wgrad_op.h"

#include <chrono>
#include <exception>
#include <string>

#include "harness/check.h"
#include "kernels/pointwise.h"
#include "kernels/timing.h"

namespace cnnbench {

KernelChoice stem_wgrad_choice(int env_value) {
  return env_value == 0   ? KernelChoice::Cudnn
         : env_value == 2 ? KernelChoice::Auto
                          : KernelChoice::Cnnbench;
}

KernelChoice stem_wgrad_choice_from_env() {
  static const KernelChoice c = stem_wgrad_choice(env_int_in("CNNBENCH_STEM_WGRAD", 1, 0, 2));
  return c;
}

StemWgradOp::StemWgradOp(const Ours& ours, const Cudnn& cudnn)
    : o_(ours),
      c_(cudnn),
      conv_(std::make_unique<ConvBackwardOp>(cudnn.spec, ConvGrad::Filter, cudnn.buffers)) {
  if (!o_.image || !o_.dy || !o_.dw || !o_.scratch || !c_.dw)
    throw std::logic_error("stem weight gradient: a buffer is missing in " + c_.spec.name);
  record_ = conv_->record();
}

StemWgradOp::~StemWgradOp() = default;

void StemWgradOp::run_ours(cudaStream_t stream) const {
  launch_stem_wgrad(o_.t, o_.image, o_.dy, o_.dw, o_.spec, o_.scratch, stream);
}

void StemWgradOp::run_cudnn(cudaStream_t stream) {
  conv_->run(stream);
  launch_copy_channels(conv_->dw_type(), c_.dw, c_.channels, c_.buffers.dw, c_.spec.x.c, c_.rows,
                       c_.channels, stream);
}

void StemWgradOp::prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) {
  const auto t0 = std::chrono::steady_clock::now();
  conv_->prepare(ctx, mode, top_k, scratch);
  const LayerRecord conv = conv_->record();
  std::string refused;
  if (mode == EngineMode::Autotune) {
    // cuDNN's path on the tuning scratch where its workspace fits, else on one of its own while
    // it is timed (the step binds the real one after prepare).
    void* own = nullptr;
    TuneScratch ws = scratch;
    if (conv_->workspace_bytes() > ws.bytes) {
      CNN_CHECK_CUDA(cudaMalloc(&own, conv_->workspace_bytes()));
      ws = TuneScratch{own, conv_->workspace_bytes()};
    }
    try {
      conv_->bind_workspace(ws.ptr, ws.bytes);
      cudnn_us_ = graph_us([&](cudaStream_t s) { run_cudnn(s); }, ctx.stream);
      try {
        ours_us_ = graph_us([&](cudaStream_t s) { run_ours(s); }, ctx.stream);
      } catch (const std::exception& e) {  // a launch that fails: cuDNN's path stays
        cudaGetLastError();
        ours_us_ = 0;
        refused = std::string("cnnbench stem weight gradient: ") + e.what();
      }
    } catch (...) {
      if (own) cudaFree(own);
      throw;
    }
    if (own) CNN_CHECK_CUDA(cudaFree(own));
    ours_ = stem_wgrad_ours_wins(ours_us_, cudnn_us_);
  } else {
    ours_ = true;
  }
  chosen_ = true;
  record_ = conv;  // op and shape the padded conv's (tools read a conv's cost from them)
  const std::string times = "cudnn " + conv.engine + " " + us_text(cudnn_us_) +
                            " (with the copy of C channels), ours " +
                            (ours_us_ > 0 ? us_text(ours_us_) : std::string("refused"));
  if (ours_) {
    record_.engine = "cnnbench stem weight gradient";
    record_.workspace_bytes = 0;
    record_.tuned_us = ours_us_;
    record_.tuned_in_graph = ours_us_ > 0;
    record_.tuned_eager_us = 0;
    record_.heuristic_source.clear();
    record_.plan_reused = false;
    record_.from_plan_cache = false;
    record_.engine_notes = mode == EngineMode::Autotune ? times : "ours (not raced)";
  } else {
    record_.tuned_us = cudnn_us_;
    record_.tuned_in_graph = true;
    record_.engine_notes =
        times + (conv.engine_notes.empty() ? std::string() : "; " + conv.engine_notes);
  }
  record_.candidates = conv.candidates + 1;
  if (!refused.empty()) record_.rejected.push_back(refused);
  record_.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

size_t StemWgradOp::workspace_bytes() const {
  return chosen_ && ours_ ? 0 : conv_->workspace_bytes();
}

void StemWgradOp::bind_workspace(void* workspace, size_t bytes) {
  if (!(chosen_ && ours_)) conv_->bind_workspace(workspace, bytes);
}

void StemWgradOp::run(cudaStream_t stream) {
  if (!chosen_) throw std::logic_error("stem weight gradient: run before prepare");
  if (ours_)
    run_ours(stream);
  else
    run_cudnn(stream);
}

DType StemWgradOp::dw_type() const {
  return ours_ ? DType::F32 : conv_->dw_type();
}

}  // namespace cnnbench
