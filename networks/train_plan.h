// One training step on the host (issue 4): from a Graph, the ops of the step (the forward with
// BatchNorm in training mode and no folding, softmax cross-entropy on integer labels, the
// backward in reverse), what each backward op needs saved from the forward, where every value
// and gradient lives, the step's memory plan and its multiply-accumulates. No CUDA: every piece
// is tested on a CPU before any training kernel exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "networks/graph.h"
#include "networks/schedule.h"

namespace cnnbench {

// The weight of an auxiliary classifier's loss (Inception-v3's AuxLogits): total loss =
// main + 0.4 * aux, as PyTorch's fine-tuning tutorial trains torchvision's Inception-v3.
constexpr double kAuxLossWeight = 0.4;

enum class TrainPass { Forward, Loss, Backward };
// Conv and linear backward run as two ops: filter (dW and db, from the saved input and dy) and
// data (dx, from the weights and dy; left out where the input needs no gradient, as the image
// does). Every other backward op is whole.
enum class BackwardPart { Whole, Filter, Data };

// A forward result a backward op needs: a value (a node's output, aliases resolved), a
// BatchNorm's batch statistics (mean and 1/sqrt(var + eps) per channel, fp32), a dropout's
// mask (one byte per element), or a fused residual tail's ReLU mask (TrainOp::relu_mask; node:
// the ReLU).
enum class SavedKind { Value, BnStats, DropoutMask, ReluMask };
struct SavedRef {
  int node = -1;
  SavedKind kind = SavedKind::Value;
  bool operator==(const SavedRef& o) const { return node == o.node && kind == o.kind; }
};

struct TrainOp {
  TrainPass pass = TrainPass::Forward;
  BackwardPart part = BackwardPart::Whole;
  int node = -1;                // the graph node it runs; Loss: the head whose logits it reads
  std::vector<int> reads;       // Forward and Loss: the values read (aliases resolved)
  std::vector<SavedRef> saved;  // Backward: the forward results it needs kept
  std::vector<int> grad_reads;  // gradients read: dy of `node` (Backward)
  // Gradients written: of the inputs (Backward, aliases resolved) or of the head's logits (Loss).
  // A value read by several ops gets the sum of their gradients: `accumulate` marks the writes
  // that add to what an earlier op wrote.
  std::vector<int> grad_writes;
  std::vector<bool> accumulate;
  // A BatchNorm's forward and backward with what follows it fused in (plan_training's fuse):
  // the activation (ReLU or SiLU) that alone reads it, or the residual Add that alone reads it and
  // the ReLU that alone reads that Add. The forward writes the activation's value,
  // y = act(bn(x) [+ z]), z the Add's other input (`residual`), at the Add's place in the
  // schedule; the backward reads the activation's gradient (ReLU: masked by its saved value;
  // SiLU: through its derivative at bn(x), recomputed from x) and, with a residual, also writes
  // z's gradient (the Add's), at the activation's place. The fused ops run nothing of their own,
  // and the BatchNorm's own value and gradient (and the Add's) exist nowhere. -1: none.
  int fused_act = -1;
  int fused_add = -1;
  int residual = -1;
  // A fused residual tail (BatchNorm -> Add -> ReLU) whose forward also writes ReLU's mask, a bit
  // per element (y > 0), and whose backward reads that instead of y twice (plan_training's
  // relu_masks): on both of its ops.
  bool relu_mask = false;
  int value_written() const { return fused_act >= 0 ? fused_act : node; }  // Forward
  bool param_grads = false;                 // writes the gradients of `node`'s trainable parameters
  double loss_weight = 0;                   // Loss
  std::string label(const Graph& g) const;  // "backward.filter conv layer1.0.conv1"
};

struct TrainPlan {
  // Forward ops in node order, then one loss per head, then backward ops in reverse node order.
  std::vector<TrainOp> ops;
  int forward_ops = 0, loss_ops = 0;
  std::vector<int> heads;  // the network's output, then auxiliary classifiers
  std::vector<double> head_weight;
  // Per node: a head depends on it (every node of a training graph, AuxLogits included); the value
  // it stands for (itself, but for Flatten and an identity adaptive pool: their input's); whether
  // the step computes its gradient (not the image's, nor anything computed from it alone).
  std::vector<bool> active;
  std::vector<int> source;
  std::vector<bool> needs_grad;
  // Where each value lives (indexed by source): a concat's inputs read only by it sit in their
  // channel slice of its buffer, as at inference (so the concat runs nothing), and their gradients
  // likewise in the slice of its gradient; root -1 for no value. `slice_of` is the concat whose
  // buffer holds a value directly, -1 where it owns its buffer.
  std::vector<ValueView> view;
  std::vector<int> slice_of;
  int64_t trainable_params = 0;  // of the nodes whose backward writes parameter gradients
};

// Every sink of the graph other than its output is an auxiliary classifier (a linear layer
// of the output's width) and gets the loss weight kAuxLossWeight; logic_error otherwise.
// concat_views: a concat's inputs that only it reads are written into slices of its buffer (no
// copies; their gradients are slices of its gradient). Off: every input has its own buffer, the
// concat copies them in (a forward op reading them all) and its backward copies the slices of its
// gradient out (a backward op writing each input's gradient).
// fuse_bn_act: a BatchNorm whose only consumer is a ReLU or a SiLU runs with it as one op each way
// (see TrainOp::fused_act), where the two ops are adjacent in both passes (as every conv-BN-ReLU
// and conv-BN-SiLU is); and a BatchNorm whose only consumer is a residual Add whose only consumer
// is a ReLU (ResNet's block tail) runs with both. This saves the fused ops' passes over memory and
// the intermediate values and gradients.
// relu_masks (with fuse_bn_act): a fused residual tail whose output has a multiple of 8 channels
// keeps ReLU's mask as bits (TrainOp::relu_mask, a SavedKind::ReluMask of the ReLU) instead of
// its backward reading the saved output twice: 1/16 of the output's bytes in fp16.
TrainPlan plan_training(const Graph& g, bool concat_views = true, bool fuse_bn_act = false,
                        bool relu_masks = false);

// The bytes of a ReLU mask over `elements` values of `elem_bytes` each: a byte per 16-byte pack
// of channels (8 values of fp16 or bf16, 4 of fp32), bit k for the pack's value k.
inline size_t relu_mask_bytes(int64_t elements, size_t elem_bytes) {
  return size_t(elements) * elem_bytes / 16;
}

// Memory of one step. Storage types follow the precision: fp32 and tf32 keep everything in fp32;
// fp16 and bf16 keep working weights, activations and all gradients in 16 bits plus fp32 master
// weights for the optimizer (fp16 also scales the loss dynamically: a scalar, not counted).
enum class Optimizer { SGD, Adam };
const char* optimizer_name(Optimizer o);

struct TrainMemoryOptions {
  int batch = 32;
  Precision precision = Precision::FP16;
  Optimizer optimizer = Optimizer::SGD;
  bool sgd_momentum = true;  // torch.optim.SGD keeps no momentum buffer when momentum is 0
};

enum class TrainBufferKind { Value, Gradient, BnStats, DropoutMask, Labels, ReluMask };

// One buffer of the activation arena, live from op `first` to op `last` inclusive (steps are
// indices into TrainPlan::ops): a value from its write to its last read, forward or backward
// (the image for the whole step); a gradient from its first write to its last read; statistics
// and masks from their forward op to their backward op (a ReLU mask's node: the ReLU).
struct TrainBuffer {
  TrainBufferKind kind = TrainBufferKind::Value;
  int node = -1;     // the buffer's root node (BnStats, DropoutMask: the BatchNorm / Dropout)
  size_t bytes = 0;  // rounded up to the arena's 256-byte alignment
  int first = 0, last = 0;
  bool saved = false;  // a backward op needs it (saved activations); transient otherwise
  size_t offset = 0;   // in the arena, from plan_offsets
};

struct TrainMemory {
  std::vector<TrainBuffer> buffers;
  int steps = 0;  // ops; the optimizer runs after the last, on parameter tensors only
  int64_t trainable_params = 0;
  // Persistent, never reused:
  size_t weights_bytes = 0;          // trainable parameters in the storage type
  size_t running_stats_bytes = 0;    // BatchNorm running mean and var (fp32), counters (int64)
  size_t master_weights_bytes = 0;   // fp32 copies, fp16 and bf16 only
  size_t param_grad_bytes = 0;       // one gradient per trainable parameter, storage type
  size_t optimizer_state_bytes = 0;  // SGD momentum: 4 B per parameter; Adam (m, v): 8 B
  // The arena (the buffers above), planned greedily:
  size_t arena_bytes = 0;              // the plan's peak
  size_t unplanned_bytes = 0;          // the buffers' sum, without reuse
  size_t live_peak_bytes = 0;          // the most bytes live at one step: no plan does better
  size_t saved_peak_bytes = 0;         // the most bytes of saved buffers live at one step
  size_t transient_peak_bytes = 0;     // the most bytes of the other buffers live at one step
  size_t saved_at_backward_bytes = 0;  // saved buffers live at the first loss op
  size_t persistent_bytes() const {
    return weights_bytes + running_stats_bytes + master_weights_bytes + param_grad_bytes +
           optimizer_state_bytes;
  }
  size_t total_bytes() const { return persistent_bytes() + arena_bytes; }  // no workspace
};

TrainMemory plan_training_memory(const Graph& g, const TrainPlan& p, const TrainMemoryOptions& o);

// Multiply-accumulates of one step per image, counted as Graph::macs() counts them (conv and
// linear only): the forward, plus per conv / linear the backward-data (dx: the forward's MACs,
// but none for a layer whose input needs no gradient) and backward-filter (dW: the forward's).
// Training FLOPs per image are 2 * total().
struct TrainMacs {
  int64_t forward = 0, backward_data = 0, backward_filter = 0;
  int64_t total() const { return forward + backward_data + backward_filter; }
};
TrainMacs training_macs(const Graph& g, const TrainPlan& p);

}  // namespace cnnbench
