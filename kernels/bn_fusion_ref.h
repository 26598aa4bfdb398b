// Host references for the BatchNorm-fusion probe (kernels/bn_fusion_probe.h): the data of one
// ResNet-style layer in training (the previous BatchNorm's input x, its folded scale and bias, the
// activation a = relu(x * scale + bias) the conv reads, the weights and the incoming gradient) and
// single entries of the weight and data gradients, in double.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/conv_ref.h"

namespace cnnbench {

struct BnFusionData {
  ConvGeometry g;                  // x: the conv's input (C = g.x.c), y: its output
  std::vector<float> x;            // NHWC, fp16 values: the previous layer's conv output
  std::vector<float> scale, bias;  // per input channel: gamma * invstd, beta - mean * scale
  std::vector<float> a;            // fp16(relu(x * scale + bias)): what the conv reads
  std::vector<float> w;            // KRSC, fp16 values, He-normal
  std::vector<float> dy;           // NHWC like y, fp16 values, N(0, 1)
};
BnFusionData make_bn_fusion_data(const ConvGeometry& g, uint64_t seed);

// The activation a fused prologue computes: relu(x * scale + bias) in float, stored as fp16.
float bn_relu_fp16(float x, float scale, float bias);

// dW[k, r, s, c] = sum over n, oh, ow of dy[n, oh, ow, k] * a[n, ih, iw, c] (groups 1).
double wgrad_entry(const ConvGeometry& g, const float* a, const float* dy, int k, int r, int s,
                   int c);
// dX[n, h, w, c] = sum over the outputs (oh, ow, k) whose window reads (h, w) of dy * w.
double dgrad_entry(const ConvGeometry& g, const float* dy, const float* w, int n, int h, int wc,
                   int c);

}  // namespace cnnbench
