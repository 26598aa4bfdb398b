// The padded stem's weight gradient in the training step as one op, for the race under autotune
// (networks/train_model.cpp, TrainOptions::stem_wgrad = auto): cuDNN's weight gradient on the
// padded copy of the input, then its first C channels into the parameter's gradient, against our
// kernel from the image itself (kernels/stem_wgrad.h, dW in fp32). Both are timed as CUDA graphs
// of 20 launches after cuDNN's plan is chosen, and the faster is kept.
//
// Why a race: on an H100 (call 127, ResNet-50 fp16 at 256) ours took 481 us against cuDNN's 877,
// the only batch timed; a smaller batch gives our fixed 396 blocks fewer tiles each.
//
// The choice decides the gradient's type (dw_type(): fp32 for ours, cuDNN's type otherwise) and
// whether the forward must write the padded copy at all (runs_ours(): false until prepare has
// chosen, so that cuDNN's candidates are built and checked on a real copy). The training step
// does not race where every process must choose alike (fp32_weight_gradients, data-parallel).
#pragma once

#include <memory>
#include <string>

#include "kernels/conv_backward.h"
#include "kernels/op.h"
#include "kernels/stem_wgrad.h"

namespace cnnbench {

class StemWgradOp : public Op {
 public:
  struct Ours {
    DType t = DType::F16;
    const void* image = nullptr;  // the input itself, spec.x.c channels
    const void* dy = nullptr;
    float* dw = nullptr;      // the parameter's gradient, KRSC
    void* scratch = nullptr;  // stem_wgrad_geometry(spec).scratch bytes
    StemWgradSpec spec;
  };
  struct Cudnn {
    ConvBackwardSpec spec;        // the padded conv's (x.c the padded channels)
    ConvBackwardBuffers buffers;  // x the padded copy, dy, dw the padded gradient
    int channels = 3;             // the parameter's own C
    int64_t rows = 0;             // K * R * S
    void* dw = nullptr;           // the parameter's gradient (narrowed into, in dw_type())
  };
  StemWgradOp(const Ours& ours, const Cudnn& cudnn);
  ~StemWgradOp() override;
  // Builds cuDNN's plan (as ConvBackwardOp does), then under autotune times both and keeps the
  // faster; without autotune it keeps ours (the training step builds this op only to race).
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override;
  size_t workspace_bytes() const override;
  void bind_workspace(void* workspace, size_t bytes) override;
  void run(cudaStream_t stream) override;
  bool runs_ours() const { return chosen_ && ours_; }
  DType dw_type() const;  // after prepare

 private:
  void run_ours(cudaStream_t stream) const;
  void run_cudnn(cudaStream_t stream);
  Ours o_;
  Cudnn c_;
  std::unique_ptr<ConvBackwardOp> conv_;
  bool chosen_ = false, ours_ = false;
  double ours_us_ = 0, cudnn_us_ = 0;
};

// The race's verdict, host only: ours where it ran faster than cuDNN's path (both timed, > 0);
// ties and a missing time keep cuDNN's, whose plan was built and checked.
inline bool stem_wgrad_ours_wins(double ours_us, double cudnn_us) {
  return ours_us > 0 && cudnn_us > 0 && ours_us < cudnn_us;
}

}  // namespace cnnbench
