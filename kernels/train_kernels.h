// CUDA kernels of a training step (issue 4), checked against kernels/train_refs.h: BatchNorm in
// training mode and its backward, softmax cross-entropy, the activations' and pools' backward,
// squeeze-excitation's scale backward, dropout, gradient sums, the bias gradient, SGD and Adam on
// fp32 master weights, and what mixed precision needs (an inf/NaN check, a skippable step and a
// dynamic loss scale kept on the device).
//
// Every launcher only enqueues kernels on `stream`: no allocation, no synchronisation and no
// host read of device memory, so a whole step can be captured in a CUDA graph and replayed.
// Whatever changes from step to step (the loss scale, whether the step is skipped, the step
// count, dropout's offset) is read from device memory, never baked in as a kernel argument.
//
// Layouts as at inference: activations and their gradients are NHWC rows of `channels` values in
// the storage type t (fp32, fp16 or bf16), optionally strided (a channel slice of a concat
// buffer; ld 0 means packed); every sum is accumulated in fp32. BatchNorm's gamma, beta, batch
// statistics and parameter gradients are fp32, like the optimizers' master weights and state.
// The per-channel reductions are deterministic (partial sums per block in a fixed order, no
// float atomics), so a run repeats bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/lrn.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/tensor.h"
#include "kernels/train_refs.h"

namespace cnnbench {

// Scratch (bytes) that the per-channel reductions below need: BatchNorm forward and backward over
// `rows` rows of `channels`, the bias gradient likewise, and the scale backward with segments =
// N images of rows = H * W each. Needs no initialisation.
size_t channel_reduce_scratch_bytes(int64_t rows, int channels, int segments = 1);

// ---- BatchNorm in training mode ----------------------------------------------------------------

struct BnTrainSpec {
  int64_t rows = 0;  // N * H * W
  int channels = 0;
  double eps = 1e-5;
  double momentum = 0.1;  // of the running statistics, PyTorch's default
  // The activation after the BatchNorm (after the residual, when one is added): None, ReLU or SiLU.
  Act act = Act::None;
  int ld_x = 0, ld_y = 0;  // channel strides of x and dx, of y and dy; 0: packed
  int ld_z = 0;            // of the residual z and its gradient dz; 0: packed
};

// Batch mean and invstd = 1 / sqrt(biased var + eps) per channel (Welford per thread, combined
// across rows and blocks with Chan's formula), then y = act(gamma * (x - mean) * invstd + beta +
// z), z the residual (null: none). gamma and beta may be null (1 and 0). When running_mean and
// running_var are given they are updated as bn_running_update_ref: r = (1 - momentum) r +
// momentum * batch, with the unbiased variance. `scratch`: channel_reduce_scratch_bytes(s.rows,
// s.channels) bytes. Packed, 16-byte aligned tensors whose channels the 16-byte pack divides take
// vectorised kernels (kernels/batchnorm_train.cu).
// With `relu_mask` (ReLU only, the vectorised kernels: bn_relu_masks_available and packed,
// aligned rows whose channels the pack divides, else invalid_argument), the forward also writes
// ReLU's mask as bits: byte r * (C / V) + k, V = 16 / sizeof(t), holds bit q set where y[r, k * V
// + q], as stored, is positive (relu_mask_bytes in networks/train_plan.h).
// With y null, the statistics alone (mean, invstd, the running statistics), for a consumer that
// applies them itself (launch_bn_relu_maxpool_forward_places); no z or mask then.
void launch_bn_forward_train(DType t, const void* x, const void* z, void* y, const float* gamma,
                             const float* beta, float* mean, float* invstd, float* running_mean,
                             float* running_var, const BnTrainSpec& s, void* scratch,
                             cudaStream_t stream, uint8_t* relu_mask = nullptr);
// The order in which BatchNorm's vectorised passes walk their rows, which decides what the L2
// still holds when a pass starts (a pass that starts where the one before ended finds its last
// tens of MB there): bits of CNNBENCH_BN_SWEEP, or set_bn_sweep. kBnSweepStats: the forward's
// statistics pass takes its chunks from the last; kBnSweepApply: the forward's apply pass walks
// its rows from the last; kBnSweepSums and kBnSweepDx: the backward's sums and dx passes likewise;
// kBnSweepOneWave: the apply and dx passes launch no more blocks than are resident at once, so
// that their grid-stride loop is one front instead of one sweep a wave. None changes a result bit:
// each row's arithmetic is its own, and every chunk's partial sums keep their place and their
// order in the finalize (GpuTrain.BatchNormSweepOrdersChangeNoBit). The default, kBnSweepDefault
// (21: the two sums passes from the end, the apply and dx passes in one wave), was the fastest of
// six on an H100 (calls 132 and 135, ResNet-50 fp16 training at 256: 38.05 against 38.64 ms and
// 38.61 against 39.20 with every pass forward, 0; EfficientNet-B0 60.94 against 61.44, call 136);
// CNNBENCH_BN_SWEEP=0 gives the order before. A value outside 0 to kBnSweepAll in the environment
// is reported on stderr and leaves the default; set_bn_sweep throws invalid_argument on one and
// returns the bits before.
enum BnSweep : int {
  kBnSweepStats = 1,
  kBnSweepApply = 2,
  kBnSweepSums = 4,
  kBnSweepDx = 8,
  kBnSweepOneWave = 16,
  kBnSweepAll = 31,
  kBnSweepDefault = kBnSweepStats | kBnSweepSums | kBnSweepOneWave,
};
int bn_sweep();
int set_bn_sweep(int bits);

// Whether the ReLU masks can be used: the vectorised kernels are not switched off
// (CNNBENCH_SCALAR_BN=1).
bool bn_relu_masks_available();
// The test the BatchNorm backward makes when it recomputes ReLU's mask from x: whether v, rounded
// to t, is positive (a compare against half the type's smallest subnormal; see stored_positive in
// kernels/batchnorm_train.cu). On the host, for a test against the round trip.
bool bn_stored_positive(DType t, float v);

// From the saved input x, the batch statistics and dy (the gradient of the forward's output y):
// d = dy through the activation (ReLU: dy where y > 0, else 0, as relu_backward_ref; with y null
// and no residual, y > 0 is recomputed from x in the forward's arithmetic, bit for bit; SiLU: dy
// times SiLU's derivative at v = gamma * xhat + beta, recomputed from x, so y is unused; None:
// dy), then dbeta = sum d, dgamma = sum d * xhat, dx = gamma * invstd / rows * (rows * d - dbeta -
// xhat * dgamma) (bn_backward_ref), where xhat = (x - mean) * invstd. dx += instead of = when
// `accumulate`. The residual's gradient, where dz is given, is d itself (dz += with
// accumulate_dz); not with SiLU. gamma and beta may be null (1 and 0); dgamma and dbeta are
// required (dx needs them). Scratch as the forward. With `relu_mask` (the forward's bits, under
// the forward's conditions), ReLU's mask is read from it instead of y (y may then be null, a
// residual or not), bit for bit the same result.
void launch_bn_backward(DType t, const void* x, const void* y, const void* dy, void* dx,
                        const float* gamma, const float* beta, const float* mean,
                        const float* invstd, float* dgamma, float* dbeta, const BnTrainSpec& s,
                        bool accumulate, void* dz, bool accumulate_dz, void* scratch,
                        cudaStream_t stream, const uint8_t* relu_mask = nullptr);

// ---- Softmax cross-entropy ---------------------------------------------------------------------

// Bytes of scratch launch_softmax_xent needs; zero it once before the first launch (the kernel
// leaves its counter at zero again, so repeated runs and graph replays need no reset).
size_t xent_scratch_bytes(int batch);
// logits [batch][classes] in type t, labels in [0, classes) on the device. Writes *loss =
// weight * mean over the batch of (logsumexp(z) - z[label]) in fp32 and dlogits = weight * scale *
// (softmax - onehot) / batch in type t, scale = *loss_scale when given (the mixed-precision loss
// scale; the loss itself is left unscaled), else 1. One kernel: a warp per row, and the last
// block to finish sums the rows' losses in a fixed order. A label out of range makes the loss NaN.
void launch_softmax_xent(DType t, const void* logits, const int* labels, int batch, int classes,
                         double weight, const float* loss_scale, float* loss, void* dlogits,
                         void* scratch, cudaStream_t stream);

// ---- Elementwise backward and gradient sums ----------------------------------------------------

struct GradLayout {
  int64_t rows = 0;  // N * H * W (or any row count)
  int channels = 0;
  int ld_dx = 0, ld_saved = 0, ld_dy = 0;  // channel strides; 0: packed
};

// dx = dy * act'(saved) (relu_backward_ref, sigmoid_backward_ref, silu_backward_ref): `saved` is
// the forward's output for ReLU and sigmoid, its input for SiLU; Act::None copies dy. dx += instead
// of = when `accumulate`. dx may alias dy when both have the same layout.
void launch_act_backward(DType t, Act act, const void* saved, const void* dy, void* dx,
                         const GradLayout& l, bool accumulate, cudaStream_t stream);

// dst += src over rows of `channels` (a residual's or a branch's gradient joining another).
void launch_grad_add(DType t, void* dst, int ld_dst, const void* src, int ld_src, int64_t rows,
                     int channels, cudaStream_t stream);

// db[c] = sum over rows of dy[row, c] (bias_backward_ref), fp32. `scratch`:
// channel_reduce_scratch_bytes(rows, channels) bytes.
void launch_bias_backward(DType t, const void* dy, int ld_dy, float* db, int64_t rows, int channels,
                          void* scratch, cudaStream_t stream);

// ---- Pooling backward (gather: each input element sums its windows' gradients, no atomics) ---

// The spec as the forward's (pool.h); x and dx share s.ld_x, dy has s.ld_y. Each window's gradient
// goes to its first maximum in scan order, padded positions never winning (maxpool_backward_ref).
// Packed channels (16 bytes) of ResNet's stem pool (kernel 3, stride 2, pad 1) take a kernel of
// their own: a thread per output window, each input read once (train_kernels.cu).
void launch_maxpool_backward(DType t, const void* x, const void* dy, void* dx, const PoolSpec& s,
                             bool accumulate, cudaStream_t stream);
// That kernel's threads, run on the host over host buffers (the CPU tests); one_load: the form
// that reads its input a pack at a time (CNNBENCH_MAXPOOL_ONE_LOAD=1), not a row of five.
void maxpool_k3s2p1_backward_emulate(DType t, const void* x, const void* dy, void* dx,
                                     const PoolSpec& s, bool accumulate, bool one_load = false);
// The stem pool with its places kept, for training: the forward writes y (launch_maxpool's, bit
// for bit) and each window's first-maximum place per channel (0..8, a byte each,
// maxpool_places_bytes); the backward routes dy by those places, without x, to the same bits as
// launch_maxpool_backward. Only where maxpool_places_apply: kernel 3, stride 2, pad 1 (floor mode),
// channels in packs of 16 bytes, dense rows (ld 0 or the channel count); buffers 16-byte aligned
// (std::invalid_argument otherwise). CNNBENCH_MAXPOOL_PLACES=0 turns the training step's use off.
bool maxpool_places_apply(DType t, const PoolSpec& s);
size_t maxpool_places_bytes(const PoolSpec& s);
void launch_maxpool_forward_places(DType t, const void* x, void* y, uint8_t* places,
                                   const PoolSpec& s, cudaStream_t stream);
void launch_maxpool_backward_places(DType t, const uint8_t* places, const void* dy, void* dx,
                                    const PoolSpec& s, bool accumulate, cudaStream_t stream);
// The same forward over the activation of a BatchNorm + ReLU, from the BatchNorm's input x and its
// batch statistics (launch_bn_forward_train's mean and invstd; gamma and beta may be null): each
// pixel's pack is taken through BatchNorm + ReLU as launch_bn_forward_train's apply computes and
// rounds it, so y and the places are bit for bit those of the apply followed by
// launch_maxpool_forward_places, and the activation is never written (ResNet's stem in training:
// 411 MB written and read again at batch 256). Same conditions as launch_maxpool_forward_places.
void launch_bn_relu_maxpool_forward_places(DType t, const void* x, const float* mean,
                                           const float* invstd, const float* gamma,
                                           const float* beta, void* y, uint8_t* places,
                                           const PoolSpec& s, cudaStream_t stream);
// Their threads on the host (the CPU tests).
void maxpool_k3s2p1_forward_places_emulate(DType t, const void* x, void* y, uint8_t* places,
                                           const PoolSpec& s);
void bn_relu_maxpool_k3s2p1_forward_places_emulate(DType t, const void* x, const float* mean,
                                                   const float* invstd, const float* gamma,
                                                   const float* beta, void* y, uint8_t* places,
                                                   const PoolSpec& s);
void maxpool_k3s2p1_backward_places_emulate(DType t, const uint8_t* places, const void* dy,
                                            void* dx, const PoolSpec& s, bool accumulate);
// Each window's gradient spread evenly over its in-bounds inputs, divided by kernel^2 when
// s.count_include_pad, else by the in-bounds count (avgpool_backward_ref).
void launch_avgpool_backward(DType t, const void* dy, void* dx, const PoolSpec& s, bool accumulate,
                             cudaStream_t stream);
// The mean over H and W: dx[n, h, w, c] = dy[n, c] / (H * W); dy is [N][ld_y]. Uses s.x.
void launch_global_avgpool_backward(DType t, const void* dy, void* dx, const PoolSpec& s,
                                    bool accumulate, cudaStream_t stream);

// ---- Squeeze-excitation's scale ----------------------------------------------------------------

// y[n, h, w, c] = x[n, h, w, c] * gate[n, c] backward (scale_backward_ref): dx = dy * gate (in t;
// += when `accumulate`) and dgate[n, c] = sum over h, w of dy * x (fp32). x, dy, dx packed NHWC of
// dims d; gate and dgate fp32 [N][C]. One pass over dy and x. `scratch`:
// channel_reduce_scratch_bytes(d.h * d.w, d.c, d.n) bytes.
void launch_scale_backward(DType t, const void* x, const float* gate, const void* dy, void* dx,
                           float* dgate, const Dims& d, bool accumulate, void* scratch,
                           cudaStream_t stream);

// Packed, 16-byte aligned tensors whose channels the 16-byte pack divides take a vectorised
// kernel: a thread a pack of channels, dx and the per-image sums in one pass. Its threads, run on
// the host over host buffers (the CPU tests): dx exactly as the device's, the sums in the
// threads' and lanes' order but the chunks added in turn (the device's finalize adds them as a
// tree), so those only to rounding:
void scale_backward_vec_emulate(DType t, const void* x, const float* gate, const void* dy, void* dx,
                                float* dgate, const Dims& d, bool accumulate);

// Its forward for training: y[n, h, w, c] = x[n, h, w, c] * gate[n, c], x, y packed NHWC of dims
// d and gate [N][C], all in type t.
void launch_scale_forward(DType t, const void* x, const void* gate, void* y, const Dims& d,
                          cudaStream_t stream);

// dst = src (dst += src when `accumulate`) over n elements, converting between storage types
// through float (fp32 statistics and gradients to and from a half-precision step's buffers).
void launch_convert(DType from, const void* src, DType to, void* dst, int64_t n, bool accumulate,
                    cudaStream_t stream);

// dst[r, c] = src[r, c] for c < min(src_c, dst_c) (added to dst's when `accumulate`), and 0 for
// src_c <= c < dst_c, over `rows` packed rows of type t: pads rows with zero channels or keeps
// their first dst_c. For a conv whose input has too few channels for any engine (an RGB image in
// fp16): its input padded to 8 channels and its padded weight gradient cut back.
void launch_repack_channels(DType t, const void* src, int src_c, void* dst, int dst_c, int64_t rows,
                            bool accumulate, cudaStream_t stream);

// ---- LRN ---------------------------------------------------------------------------------------

// Cross-channel LRN's backward (lrn_backward_ref; kernels/lrn.h's convention), from the saved
// input x (the normalizers are recomputed): dx = dy * S^-beta - 2 beta alpha / size * x *
// sum over the windows holding the channel of dy x S^(-beta - 1). x, dy, dx packed NHWC of dims
// s.x (s.ld_x, s.ld_y are not used); += when `accumulate`.
void launch_lrn_backward(DType t, const void* x, const void* dy, void* dx, const LrnSpec& s,
                         bool accumulate, cudaStream_t stream);

// ---- Dropout -----------------------------------------------------------------------------------

// Element i keeps with probability 1 - p by a counter-based hash of (seed, offset, i): splitmix64
// from a key mixed from seed and offset. offset = `offset` + *device_offset when device_offset is
// given, so a captured step can draw a new mask each replay (launch_counter_add).
struct DropoutRng {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const uint64_t* device_offset = nullptr;
};
// mask[i] = 1 (keep) or 0 and y = mask ? x / (1 - p) : 0 (dropout_forward_ref), n elements of type
// t; 0 <= p < 1.
void launch_dropout_forward(DType t, const void* x, void* y, uint8_t* mask, int64_t n, double p,
                            const DropoutRng& rng, cudaStream_t stream);
// dx = mask ? dy / (1 - p) : 0 (dropout_backward_ref); += when `accumulate`.
void launch_dropout_backward(DType t, const void* dy, void* dx, const uint8_t* mask, int64_t n,
                             double p, bool accumulate, cudaStream_t stream);
// The mask launch_dropout_forward draws for this seed and total offset, computed on the host.
std::vector<uint8_t> dropout_mask_host(uint64_t seed, uint64_t offset, int64_t n, double p);
// *counter += by, on the device.
void launch_counter_add(uint64_t* counter, uint64_t by, cudaStream_t stream);

// ---- Mixed precision: overflow check and dynamic loss scale ------------------------------------

struct GradBuffer {
  const void* p = nullptr;
  int64_t count = 0;
  DType t = DType::F32;
};
// Sets *found_inf = 1 when any element of any buffer is inf or NaN; never clears it (the loss-scale
// update does). Buffers may mix types.
void launch_check_finite(const std::vector<GradBuffer>& buffers, int* found_inf,
                         cudaStream_t stream);

// GradScaler's state, kept on the device (a plain struct the caller allocates and initialises
// once: loss_scale_initial_state).
struct LossScaleState {
  float scale = 65536.0f;
  int good_steps = 0;     // steps in a row without an overflow
  int skipped_steps = 0;  // steps skipped so far
  int found_inf = 0;      // set by launch_check_finite during the step
};
struct LossScaleParams {
  double growth = 2.0, backoff = 0.5;  // torch.amp.GradScaler's growth_factor and backoff_factor
  int interval = 2000;                 // growth_interval
};
LossScaleState loss_scale_initial_state(float scale = 65536.0f);
// The device addresses of a device-resident state's fields (computed, never dereferenced), for
// StepControl, launch_softmax_xent's loss_scale and launch_check_finite.
inline float* loss_scale_field(LossScaleState* s) {
  return reinterpret_cast<float*>(reinterpret_cast<char*>(s) + offsetof(LossScaleState, scale));
}
inline int* found_inf_field(LossScaleState* s) {
  return reinterpret_cast<int*>(reinterpret_cast<char*>(s) + offsetof(LossScaleState, found_inf));
}
// The end of a step, as torch's _amp_update_scale_ (LossScaleRef::update): on an overflow the
// scale is multiplied by backoff, good_steps reset and skipped_steps counted; else after
// `interval` good steps in a row it is multiplied by growth (kept only if finite). Then clears
// found_inf for the next step.
void launch_loss_scale_update(LossScaleState* state, const LossScaleParams& p, cudaStream_t stream);

// ---- Optimizers on fp32 master weights ---------------------------------------------------------

// What an optimizer step reads from the device, each pointer optional.
struct StepControl {
  const int* found_inf = nullptr;     // nonzero: the step does nothing (weights, state untouched)
  const float* loss_scale = nullptr;  // gradients are multiplied by 1 / *loss_scale
  const int* step = nullptr;          // steps taken, this one included (launch_step_advance)
};
// ++*step unless *found_inf (when given) is set: run once per step after the overflow check and
// before the optimizer launches that read it.
void launch_step_advance(int* step, const int* found_inf, cudaStream_t stream);

// torch.optim.SGD, one step over n parameters, as sgd_step_ref (hyper-parameters in h): the
// gradient g is read in type gt, unscaled by c.loss_scale. With momentum the buffer is set to d on
// the first step (*c.step == 1); without c.step the buffer must start at zero and dampening be 0
// (then the two agree). momentum_buffer may be null without momentum. When p_copy is given the
// updated weights are also written there in type copy_t (the storage-type weights the next
// forward reads).
void launch_sgd_step(float* p, float* momentum_buffer, const void* g, DType gt, int64_t n,
                     const SgdRef& h, const StepControl& c, void* p_copy, DType copy_t,
                     cudaStream_t stream);

// torch.optim.Adam (not AdamW), one step, as adam_step_ref: t = *c.step (required), m and v start
// at zero; bias corrections in double, the rest in fp32 as torch's foreach implementation:
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
void launch_adam_step(float* p, float* m, float* v, const void* g, DType gt, int64_t n,
                      const AdamRef& h, const StepControl& c, void* p_copy, DType copy_t,
                      cudaStream_t stream);

// ---- Grouped optimizer steps (one launch for many tensors) -------------------------------------

// One tensor of a grouped step.
struct OptTensor {
  float* p = nullptr;       // fp32 master weights
  float* m = nullptr;       // SGD's momentum buffer (null without momentum), Adam's m
  float* v = nullptr;       // Adam's v
  const void* g = nullptr;  // the gradient, in gt
  DType gt = DType::F32;
  int64_t n = 0;
  void* copy = nullptr;  // the working copy, in the launch's copy_t, or null
};
// launch_sgd_step / launch_adam_step over every tensor of `ts` with one launch per gradient type
// (per kOptTable tensors): each element updated by the same arithmetic as the per-tensor launch,
// so bit for bit the same. A step's dozens of small tensors (BatchNorm's gamma and beta, biases)
// otherwise cost a launch each.
void launch_sgd_steps(const std::vector<OptTensor>& ts, const SgdRef& h, const StepControl& c,
                      DType copy_t, cudaStream_t stream);
void launch_adam_steps(const std::vector<OptTensor>& ts, const AdamRef& h, const StepControl& c,
                       DType copy_t, cudaStream_t stream);

// How the grouped launches split the work (host and device; the CPU tests check it): tensors of
// one gradient type, kOptTable at most, each given ceil(n / (256 * kOptPerThread)) blocks of 256
// threads, at most kOptMaxBlocks; `start` holds each tensor's first block and, last, the total.
constexpr int kOptTable = 48;
constexpr int kOptPerThread = 4;
constexpr int kOptMaxBlocks = 1024;
struct OptGroup {
  DType gt = DType::F32;
  std::vector<int> tensors;  // indices into ts
  std::vector<int> start;
};
std::vector<OptGroup> opt_groups(const std::vector<OptTensor>& ts);
// Block `block` of a launch (starts of `used` tensors) works on tensor `tensor`, elements first,
// first + stride, ... (a grid-stride loop over the tensor's own blocks).
struct OptSlot {
  int tensor;
  int64_t first, stride;
};
__host__ __device__ __forceinline__ OptSlot opt_slot(const int* start, int used, int block,
                                                     int thread, int threads) {
  int lo = 0, hi = used - 1;  // the last tensor whose first block is <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (start[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int blocks = start[lo + 1] - start[lo];
  return {lo, int64_t(block - start[lo]) * threads + thread, int64_t(blocks) * threads};
}

}  // namespace cnnbench
