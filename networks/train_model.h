// One training step on the GPU (issue 4): Input, Conv (grouped and depthwise, with or without
// bias), BatchNorm, ReLU, SiLU, Sigmoid, Scale (squeeze-excitation's), Dropout, Add, MaxPool,
// GlobalAvgPool / AdaptiveAvgPool to 1x1, Flatten and Linear: the ResNet and EfficientNet
// families (EfficientNet without its stochastic depth, which the graph does not model), in fp32,
// tf32, fp16 and bf16, SGD or Adam. The step follows plan_training(g) op by op:
// the forward (BatchNorm in training mode, updating its running statistics), softmax cross-entropy
// on integer labels, the backward in the plan's order with its accumulate flags, then SGD on every
// trainable parameter. step() only enqueues work on a stream (no allocation, no host
// synchronisation), so it can be captured in a CUDA graph and replayed.
//
// Memory: parameters, their gradients and optimizer state, the image and the labels are
// persistent; values, their gradients and batch statistics follow plan_training_memory's plan
// (each live from its first write to its last read; buffers whose lives do not overlap share
// memory), so what the backward needs is kept and the rest reused. arena() reports both parts.
//
// Layouts: activations and their gradients NHWC in the precision's storage type; conv weights
// KRSC, linear weights [out][in]; BatchNorm's gamma, beta, running statistics fp32. Master
// weights are fp32: in fp32 and tf32 the convs and linears read them; in fp16 and bf16 they read
// a working copy in the storage type that the optimizer rewrites after each update (mixed
// precision as torch.autocast runs it). Parameter gradients are fp32 (a conv's weight gradient in
// the storage type where no cuDNN engine writes fp32). fp16 scales the loss as
// torch.amp.GradScaler does: the gradients come out multiplied by the scale, every one is
// checked for inf/NaN, an overflow skips the step and halves the scale, and 2000 good steps in a
// row double it; all of it on the device, inside the step. Parameters are read and written by their
// torchvision names in torchvision's layouts (OIHW for conv weights).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/arena.h"
#include "harness/check.h"
#include "kernels/op.h"
#include "kernels/stem.h"
#include "kernels/stem_wgrad.h"
#include "kernels/train_kernels.h"
#include "networks/graph.h"
#include "networks/train_plan.h"
#include "networks/weights.h"

namespace cnnbench {

struct TrainOptions {
  Precision precision = Precision::FP32;
  float initial_loss_scale = 65536.0f;  // fp16's GradScaler init_scale
  int batch = 4;
  // torch.optim.SGD without dampening or Nesterov (momentum), or torch.optim.Adam (betas, eps;
  // weight_decay is L2 added to the gradient, as both take it), each from a fresh state.
  Optimizer optimizer = Optimizer::SGD;
  double lr = 0.1, momentum = 0.9, weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  EngineMode engine = EngineMode::Heuristic;
  int top_k = 4;
  size_t tune_scratch_bytes = size_t(256) << 20;
  // Values, their gradients and batch statistics share memory by lifetime
  // (plan_training_memory); off: each its own buffer for the whole run (for comparison).
  bool reuse_memory = true;
  // Each BatchNorm runs fused with the ReLU or SiLU that alone reads it, or with the residual Add
  // and ReLU of a block's tail, forward and backward (plan_training's fuse_bn_act); off: an op
  // each, each way (for comparison).
  bool fuse_bn_act = true;
  // Conv weight gradients in fp32 wherever an engine writes them (fp16, bf16), chosen the same
  // way on every process: what data-parallel training needs (harness/data_parallel.h), and what
  // PyTorch's DDP all-reduces under autocast (fp32 .grad). Off: fp32 and the storage type timed.
  bool fp32_weight_gradients = false;
  // A 3-channel stem reads a copy of the input padded with zero channels, with zero-padded
  // weights, and its weight gradient is computed padded and narrowed (padded_channels,
  // networks/compile.h): tensor-core engines instead of cuDNN's 3-channel ones.
  bool pad_channels = true;
  // Such a padded stem's forward conv (fp16, bf16): auto races cuDNN's conv on the padded copy
  // against our stem kernel on the input itself under autotune (kernels/stem.h); the padded copy
  // is still written, for the weight gradient.
  StemChoice stem = StemChoice::Auto;
  // Such a padded stem's weight gradient: cnnbench, our kernel from the input itself (dW in
  // fp32); cudnn, cuDNN's on the padded copy, narrowed; auto, under autotune the faster of the two
  // (kernels/stem_wgrad_op.h; ours under heuristics, and where fp32_weight_gradients asks every
  // process to choose alike). The default from CNNBENCH_STEM_WGRAD (1: cnnbench, 0: cudnn, 2:
  // auto).
  KernelChoice stem_wgrad = stem_wgrad_choice_from_env();
  // A BatchNorm + ReLU with no residual recomputes ReLU's mask from its input in the backward
  // instead of reading the saved activation (bit for bit the same mask; two reads fewer).
  bool bn_mask_from_input = true;
  // A fused residual tail (BatchNorm + Add + ReLU) with a multiple of 8 channels writes ReLU's mask
  // as bits in its forward, and its backward reads those instead of the block's output twice
  // (plan_training's relu_masks); off: the output is read (for comparison).
  bool relu_masks = true;
  // A stem BatchNorm + ReLU read only by a max pool with places (ResNet's) runs inside the pool:
  // the BatchNorm writes its statistics, the pool applies them to the BatchNorm's input, and the
  // activation is never written (launch_bn_relu_maxpool_forward_places; the same bits). Off by
  // default until timed; CNNBENCH_STEM_POOL_FUSED=1 turns it on.
  bool stem_pool_fused = env_int_in("CNNBENCH_STEM_POOL_FUSED", 0, 0, 1) == 1;
  uint64_t dropout_seed = 0;  // dropout masks: a counter-based hash of (seed, element, step)
};

class TrainModel {
 public:
  // Throws UserError naming the first op kind this slice does not train.
  TrainModel(GpuContext& ctx, const Graph& g, const HostWeights& weights, const TrainOptions& opt);
  ~TrainModel();
  TrainModel(const TrainModel&) = delete;
  TrainModel& operator=(const TrainModel&) = delete;

  // One iteration on `stream`: forward, loss, backward, SGD. Enqueues only.
  void step(cudaStream_t stream);
  // The same step in two parts, for data-parallel training (harness/data_parallel.h): the
  // forward, loss and backward launches, calling after(i, stream) once launch i is enqueued; then
  // the optimizer (with fp16, its overflow check first), which reads the gradients as they are.
  void forward_backward(cudaStream_t stream,
                        const std::function<void(int launch, cudaStream_t)>& after = {});
  void update(cudaStream_t stream);
  // Max pools running their BatchNorm + ReLU inside (TrainOptions::stem_pool_fused).
  int stem_pools_fused() const { return stem_pools_fused_; }
  // Every trainable parameter's gradient buffer, in address order (the order the backward writes
  // them: they sit together in the arena), with the index of the forward_backward launch that
  // writes it (it is final once that launch has run) and its element type (a conv weight's may
  // be the storage type: dw_type()).
  struct GradientBuffer {
    std::string name;
    void* ptr = nullptr;
    int64_t count = 0;
    DType type = DType::F32;
    int ready = 0;
  };
  std::vector<GradientBuffer> gradient_buffers() const;
  int launch_count() const { return int(run_.size()); }

  // Host float NCHW images, as PyTorch holds them; class indices in [0, classes).
  void set_input(const std::vector<float>& nchw);
  void set_labels(const std::vector<int>& labels);

  // The last step's loss (the weighted sum over heads): synchronises ctx.stream, then downloads.
  float loss() const;
  // A trainable parameter, its gradient from the last step, or a BatchNorm running statistic,
  // by torchvision name, in torchvision's layout. Synchronise first. UserError on unknown names.
  // In fp16 the gradient is as the backward left it: multiplied by the loss scale of that step.
  std::vector<float> parameter(const std::string& name) const;
  std::vector<float> gradient(const std::string& name) const;

  // The names parameter() takes (trainable parameters and BatchNorm running statistics), and
  // those gradient() takes, each sorted.
  std::vector<std::string> tensor_names() const;
  std::vector<std::string> trainable_names() const;
  // fp16's loss scale now, and the steps skipped for an overflow so far (1 and 0 otherwise).
  float loss_scale() const;
  int skipped_steps() const;
  // Where the constructor's time went, in seconds, phase by phase ("plan and buffers", "ops",
  // "prepare on data", "optimizer"): a max-batch probe logs it.
  const std::vector<std::pair<std::string, double>>& build_phases() const { return phases_; }

  const Dims& input_dims() const { return input_dims_; }
  int classes() const { return classes_; }
  // The persistent arena's parameter side: weights (fp32 values and, in fp16/bf16, the working
  // copies), parameter gradients, optimizer state (momentum; Adam's m and v). The rest of the
  // arena is activations (the planned values, gradients and statistics, and the image, labels and
  // scratch) and the workspace. A padded stem's (TrainOptions::pad_channels) widened weights
  // count as weights and its widened weight gradient as gradients; its padded copy of the image
  // is with the activations.
  struct Footprint {
    size_t weights = 0, gradients = 0, optimizer_state = 0;
  };
  Footprint footprint() const;

  const TrainPlan& plan() const { return plan_; }
  const Arena& arena() const { return arena_; }
  std::vector<LayerRecord> layers() const;

  // Each launch of the step timed alone, in plan order (kernels/timing.h: `runs` launches in one
  // CUDA graph, the median replay), then the optimizer's launches as one entry. Labels name the
  // pass, the op and the layer ("bwd-filter conv layer1.0.conv1"). The sum is close to the step's
  // graph time; launches run back to back overlap their tails there. Changes the model's state
  // (running statistics, accumulated gradients): run set_input/parameter checks before, not after.
  struct LaunchTime {
    std::string label;
    double us = 0;
    int op = -1;  // its op's index in plan().ops; -1: the optimizer's
  };
  std::vector<LaunchTime> time_each_launch(int runs = 10);

 private:
  std::vector<std::pair<std::string, double>> phases_;
  struct Param {
    int64_t count = 0;
    int value = -1, grad = -1, momentum = -1;  // arena ids (grad, momentum: trainable only)
    int second = -1;                           // Adam's v (its m is `momentum`)
    int work = -1;                             // the working copy in the storage type (mixed)
    DType grad_t = DType::F32;                 // the gradient's type (a conv's: dw_type())
    bool krsc = false;  // a conv weight (or a spatial linear's): OIHW on the host, KRSC here
    Dims oihw;          // its dims as the host holds them
  };
  std::vector<float> download_param(const Param& p, int id, DType t) const;
  LossScaleState loss_scale_state() const;  // synchronises; the defaults without fp16
  float* fptr(int id) const { return static_cast<float*>(arena_.ptr(id)); }

  GpuContext& ctx_;
  TrainOptions opt_;
  TrainPlan plan_;
  Arena arena_;
  std::vector<std::unique_ptr<Op>> ops_;                // library ops (conv, linear, backward)
  std::vector<std::function<void(cudaStream_t)>> run_;  // the step's launches, in plan order
  std::vector<std::string> labels_;                     // run_[i]'s, for time_each_launch
  std::vector<int> launch_op_;                          // run_[i]'s op in plan_.ops
  std::vector<std::function<void(cudaStream_t)>> optimizer_;
  std::map<std::string, Param> params_;
  std::map<std::string, int> grad_writer_;  // a parameter's name: the launch writing its gradient
  Dims input_dims_;
  int classes_ = 0;
  int stem_pools_fused_ = 0;
  int input_buf_ = -1, labels_buf_ = -1, loss_scale_buf_ = -1, step_buf_ = -1;
  std::vector<int> padded_w_, padded_dw_;  // the padded stems' weights and weight gradients
  std::vector<int> loss_bufs_;
};

}  // namespace cnnbench
