// The BatchNorm-fusion probe (issue 9's ResNet-50 training miss): does cuDNN build, on this GPU,
// the fused graphs that MLPerf-style training uses to keep BatchNorm out of separate passes, and
// what do they cost against the plain convolutions? For one conv layer (its input x being the
// previous BatchNorm's input, folded to scale and bias):
//   fprop      conv(a) -> y                               (a = relu(x * scale + bias), given)
//   fprop_stats conv(a) -> y, and y's per-channel sum and sum of squares (GENSTATS)
//   sbr_fprop_stats  x * scale + bias, ReLU, conv -> y, and y's sums (the prologue: a never stored)
//   wgrad      dW from a and dy
//   sbr_wgrad  dW from x (scale, bias, ReLU in the prologue) and dy
//   dgrad      dA from dy and w
//   dgrad_drelu  dA masked by relu'(x * scale + bias): the gradient at the BatchNorm's output
// Each is checked at sampled outputs against kernels/bn_fusion_ref.h. What a fused form saves is
// memory traffic: the BatchNorm passes it makes unnecessary, reported as bytes per layer.
#pragma once

#include <string>
#include <vector>

#include "kernels/bn_fusion_ref.h"
#include "kernels/graph_probe.h"

namespace cnnbench {

enum class BnFusionVariant { Fprop, FpropStats, SbrFpropStats, Wgrad, SbrWgrad, Dgrad, DgradDrelu };
const char* bn_fusion_variant_name(BnFusionVariant v);
std::vector<BnFusionVariant> all_bn_fusion_variants();
// The plain variant a fused one replaces (itself for the plain ones).
BnFusionVariant bn_fusion_baseline(BnFusionVariant v);
// The bytes of BatchNorm passes the variant makes unnecessary in a training step (fp16): the
// statistics pass over y (fprop_stats), plus the previous BatchNorm's apply, a read of x and a
// write of a (sbr_fprop_stats), two reads of a in that BatchNorm's backward (dgrad_drelu).
double bn_fusion_bytes_saved(BnFusionVariant v, const ConvGeometry& g);

struct BnFusionResult {
  BnFusionVariant variant = BnFusionVariant::Fprop;
  int configs = 0;
  std::vector<std::string> refusals;
  std::vector<ProbeEngine> engines;  // fastest first
  double rel_l2 = -1;                // the output at sampled positions against the reference
  double stats_err = -1;  // the sums against sums of the output itself (the *_stats variants)
  std::string error;
  bool dw_half = false;  // the wgrad variants: dW written in fp16 (else fp32)
  bool agrees() const;   // ran; rel_l2 within 1e-2, stats within 1e-3
  double best_us() const { return engines.empty() ? -1 : engines.front().us; }
};

// dw_types (the wgrad variants): which dW types to try, in order (CUDNN_DATA_HALF,
// CUDNN_DATA_FLOAT; empty: fp16, then fp32). Give a fused form its baseline's type first, so that
// their times compare.
BnFusionResult run_bn_fusion_variant(GpuContext& ctx, const BnFusionData& d, BnFusionVariant v,
                                     int max_engines, int samples, int launches = 10,
                                     const std::vector<cudnnDataType_t>& dw_types = {});

}  // namespace cnnbench
