// The compile step: a Graph plus weights becomes a Model of executable ops for one precision and
// batch. BatchNorm folds into the preceding conv; conv + bias + residual add + ReLU become one
// cuDNN graph; every buffer is planned in one arena before the first launch; each layer's engine
// is chosen by heuristics or by timing the top candidates; nothing allocates after that.
#pragma once

#include <memory>
#include <vector>

#include "harness/arena.h"
#include "kernels/depthwise.h"
#include "kernels/op.h"
#include "kernels/pointwise.h"
#include "kernels/stem.h"
#include "kernels/storage.h"
#include "networks/graph.h"
#include "networks/weights.h"

namespace cnnbench {

// The activation a graph op applies: ReLU, SiLU or sigmoid, None for any other kind.
inline Act act_of(OpKind k) {
  switch (k) {
    case OpKind::ReLU:
      return Act::ReLU;
    case OpKind::SiLU:
      return Act::SiLU;
    case OpKind::Sigmoid:
      return Act::Sigmoid;
    default:
      return Act::None;
  }
}

struct CompileOptions {
  Precision precision = Precision::FP32;
  int batch = 1;
  EngineMode engine = EngineMode::Heuristic;
  int top_k = 8;
  size_t tune_scratch_bytes = size_t(256) << 20;  // autotune's workspace cap per candidate
  uint64_t input_seed = 0;                        // the input drawn before autotune
  // At batch 1: fold each squeeze-excitation's gates into the 1x1 conv that alone reads its
  // output (conv(x * g, W) = conv(x, W * g)), skipping the pass that scales the activations.
  bool se_fold = false;
  // Depthwise convs (EfficientNet's): auto times cuDNN against our kernel per layer under
  // autotune and keeps the faster, and takes cuDNN under heuristics (it won every fp16 layer at
  // batch 1 on the H200); cudnn and cnnbench force one.
  DepthwiseChoice depthwise = DepthwiseChoice::Auto;
  // Convs whose input has fewer channels than tensor-core engines take (an image's 3) read a
  // copy padded with zero channels, and zero-padded weights (padded_channels).
  bool pad_channels = true;
  // Such a padded conv (the image's, fp16 and bf16): auto times the pad op plus cuDNN's conv
  // against our stem kernel on the image itself under autotune and keeps the faster (heuristics
  // take cuDNN's); cudnn and cnnbench force one (kernels/stem.h).
  StemChoice stem = StemChoice::Auto;
};

// The channel count a conv's input (groups 1) is padded to with zeros: 8 in fp16 and bf16, 4 in
// tf32, for inputs narrower than that (the 3-channel stems: in call 16 cuDNN ran ResNet-50's at
// 13x its roofline bound, 1.53 of 8.66 ms at batch 256); 0 where nothing is padded (fp32, whose
// engines do not use tensor cores, and every wider input).
int padded_channels(int channels, int groups, Precision p);

class Model {
 public:
  Model(GpuContext& ctx, const Graph& g, const HostWeights& weights, const CompileOptions& opt);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // One forward pass, op by op, with an NVTX range per layer (graph capture records these ops).
  void forward(cudaStream_t stream);

  // Runs the forward op by op and checks each op that can be checked against a host recompute
  // of `samples` of its outputs from its actual inputs: (layer name, relative L2 error).
  // With `graph`, each op runs as a CUDA graph of its own, so capture problems show per layer.
  std::vector<std::pair<std::string, double>> verify_layers(int samples, uint64_t seed,
                                                            bool graph = false);

  // Where does a whole-graph replay first part from eager execution? For k = 1..ops, runs the
  // first k ops eagerly, then the same k ops captured as one graph (on a dirty workspace), and
  // compares op k's output: (layer name, relative L2 between the two).
  std::vector<std::pair<std::string, double>> graph_prefix_check();
  // The first op whose prefix graph departs from eager (relative L2 above 1e-3, or not finite)
  // bans its engine (Op::ban_engine): "layer: engine", or "" where none departs or the op has
  // no engine to ban. The model must then be rebuilt.
  std::string ban_first_departing_engine();

  // Host float NCHW in, as PyTorch holds it; converted to NHWC in the storage type.
  void set_input(const std::vector<float>& nchw);
  // The input's device buffer, NHWC in the storage type (what a captured forward reads).
  void* input_ptr() { return arena_.ptr(input_buf_); }
  // The output as host float, [N, classes] (NCHW order for a spatial output).
  std::vector<float> output() const { return output(0); }
  // Output k: 0 the graph's output(), then its extra_outputs() in order (a detector's heads).
  std::vector<float> output(size_t k) const;
  size_t output_count() const { return outputs_.size(); }
  const Dims& output_dims(size_t k) const { return outputs_.at(k).dims; }
  // Output k's device buffer, NHWC in the storage type (what the YOLO decode reads).
  const void* output_ptr(size_t k) const;

  const Dims& input_dims() const { return input_dims_; }
  const Dims& output_dims() const { return outputs_.at(0).dims; }
  Precision precision() const { return opt_.precision; }
  int batch() const { return opt_.batch; }
  std::vector<LayerRecord> layers() const;
  const Arena& arena() const { return arena_; }
  double flops_per_image() const { return flops_per_image_; }
  double compile_ms() const { return compile_ms_; }
  size_t op_count() const { return ops_.size(); }
  // Per op, in run order (the per-layer breakdown): 2 x the MACs of its convs and linears and
  // the bytes of its inputs, output and weights, whole batch; and each op alone, captured as a
  // CUDA graph of `runs` launches and replayed five times: the median microseconds per launch.
  struct OpCost {
    double flops = 0, bytes = 0;
  };
  const std::vector<OpCost>& op_costs() const { return op_costs_; }
  std::vector<double> time_each_op(int runs = 20);

 private:
  // (op index, relative L2) per prefix; with stop_at_first, up to the first that departs.
  std::vector<std::pair<size_t, double>> graph_prefix_check(bool stop_at_first);
  GpuContext& ctx_;
  CompileOptions opt_;
  Arena arena_;
  std::vector<std::unique_ptr<Op>> ops_;
  struct Output {
    int buf = -1;
    Dims dims;
  };
  Dims input_dims_;
  int input_buf_ = -1;
  std::vector<Output> outputs_;  // output(), then extra_outputs()
  double flops_per_image_ = 0, compile_ms_ = 0;
  std::vector<OpCost> op_costs_;
};

}  // namespace cnnbench
