// StyleGAN3-T's training step with NVlabs' StyleGAN2 discriminator (issue 6): the phases of
// NVlabs' StyleGAN2Loss for cfg stylegan3-t (pl_weight 0, no style mixing, no augmentation, no
// blur), written out by hand on cuDNN convolutions and our kernels, float32 throughout (fp32 or
// tf32 convolutions):
//   Gmain: G(z) -> D -> softplus(-logits).mean(), backward into G's parameters;
//   Dmain: G(z) with update_emas (w_avg, every layer's magnitude_ema), no gradient into G; D on
//          the fakes (softplus(logits)) and on the reals (softplus(-logits)), backward into D's;
//   Dreg:  every r1_interval iterations, R1 = gamma / 2 * |dD(x)/dx|^2 on the reals, times the
//          interval, backward into D's parameters.
// Dreg's double backward is written out as reverse mode over D's directional derivative: with
// v = dD/dx (one backward), sum_n |v_n|^2 = the derivative of D along v, so the gradient of R1 is
// the backward of D's forward-mode derivative along v (v held fixed). D runs it on a stacked
// batch of 2N: the first N the reals (primal), the last N the tangents. The convolutions, the FIR
// filters and the linear layers act on both halves alike (the tangent half without bias); each
// leaky ReLU multiplies the tangent by its derivative at the primal pre-activation (its second
// derivative is zero), and the minibatch-stddev layer has both halves' formulas
// (kernels/mbstd.h). One backward over the 2N batch then gives the R1 gradient of every weight
// (both halves' contributions summed by cuDNN's weight gradient) and of every bias (the primal
// half's only).
//
// Each phase can run on its own from the weights as they are (the comparison with
// tools/stylegan3_train_reference.py), or iteration() runs NVlabs' training iteration: Gmain and
// Adam on G, Dmain and Adam on D, Dreg and Adam on D every r1_interval-th iteration, then G_ema.
// Everything is enqueued on the stream: no allocation and no host synchronisation after the
// constructor.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/safetensors.h"
#include "kernels/op.h"
#include "networks/graph.h"
#include "networks/weights.h"

namespace cnnbench {

struct SgTrainOptions {
  int resolution = 256;
  int batch = 8;
  Precision precision = Precision::FP32;  // FP32 or TF32 (the convolutions' math)
  EngineMode engine = EngineMode::Heuristic;
  float gamma = 2.f;     // r1_gamma
  int r1_interval = 16;  // D_reg_interval: Dreg's gain and period
  // NVlabs' Adam for stylegan3: G lr 0.0025, D lr 0.002, betas (0, 0.99), eps 1e-8; D's lr and
  // betas scaled by the lazy regularisation's mb_ratio = interval / (interval + 1).
  double g_lr = 0.0025, d_lr = 0.002, beta1 = 0.0, beta2 = 0.99, eps = 1e-8;
  int d_channel_base = 32768, d_channel_max = 512, mbstd_group = 4;
  float conv_clamp = 256.f;  // D's layers (G's is in its graph)
  // The largest workspace a conv engine may take (one buffer, shared by every op). cuDNN's faster
  // fp32/tf32 engines for G's and D's large layers want more as the batch grows; engines over
  // the limit are not offered. 256 MiB until 2026-12-05 (call 42: batch 8 ran 12x slower than
  // batch 4 per iteration; this was the first suspect).
  size_t workspace_bytes = size_t(2048) << 20;
  // iteration() draws fresh latents for Gmain and Dmain each time, as NVlabs' loop does
  // (torch.randn), from a counter (kernels/randn.cuh) seeded here; off: set_inputs' latents are
  // reused (the reals are always the same batch: no data loading).
  bool fresh_latents = false;
  uint64_t latent_seed = 1;
};

// NVlabs' Discriminator (resnet, c_dim 0) at `resolution`: its parameters by name, NVlabs'
// shapes (OIHW, [out][in]).
std::vector<ParamSpec> stylegan2_discriminator_params(int resolution, int channel_base = 32768,
                                                      int channel_max = 512);
// Random D weights as NVlabs initialises them (weights randn, biases 0), from `seed`.
HostWeights stylegan2_discriminator_random(int resolution, uint64_t seed, int channel_base = 32768,
                                           int channel_max = 512);

class StyleganTrainer {
 public:
  // g: the generator's weights and buffers (NVlabs' names, stylegan3_t at opt.resolution);
  // d: the discriminator's. Throws UserError on a missing or misshapen tensor.
  StyleganTrainer(GpuContext& ctx, const SgTrainOptions& opt, const HostWeights& g,
                  const HostWeights& d);
  ~StyleganTrainer();
  StyleganTrainer(const StyleganTrainer&) = delete;
  StyleganTrainer& operator=(const StyleganTrainer&) = delete;

  // z [batch][512] for Gmain and Dmain, the real images [batch][3][R][R] (NCHW, in [-1, 1]).
  void set_inputs(const std::vector<float>& z_gmain, const std::vector<float>& z_dmain,
                  const std::vector<float>& reals_nchw);

  // One phase from the current weights; its gradients zeroed first.
  void gmain(cudaStream_t st);
  void dmain(cudaStream_t st);
  void dreg(cudaStream_t st);
  // NVlabs' training iteration (the phases, Adam after each, G_ema). `index` counts iterations
  // from 0: Dreg runs where index % r1_interval == 0, as NVlabs' phase intervals do.
  void iteration(int index, cudaStream_t st);

  // What a phase left, for the comparison (after synchronising): "<phase>.grad.<param>" for
  // every parameter of the phase's network, in NVlabs' layout, and the phase's losses, logits,
  // R1 penalties and (Dmain) the updated buffers, named as the reference tool writes them.
  std::vector<SafetensorOut> results(const std::string& phase) const;

  int64_t g_params() const;
  int64_t d_params() const;
  size_t device_bytes() const;  // everything the trainer allocated
  // The conv workspace limit its engines were chosen within: SgTrainOptions::workspace_bytes,
  // or less where that much did not fit beside the trainer's buffers (halved until it did).
  size_t workspace_limit() const;
  const std::vector<LayerRecord>& layers() const;

  // Each phase once (as gmain(), dmain(), dreg()) with CUDA events between the steps of its
  // passes: milliseconds by section, "<phase> <pass> <step> | <layer>" ("Gmain G bwd conv
  // filter | L9_148_362"), in the order first met. For finding where a batch size's time goes;
  // the events cost a few microseconds each, so the sum exceeds the phases' own times a little.
  // Like the phases it runs, it changes the trainer's state (gradients, Dmain's EMA updates of
  // w_avg and magnitude_ema): call it after what it must not disturb.
  std::vector<std::pair<std::string, double>> profile_sections(cudaStream_t st);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cnnbench
