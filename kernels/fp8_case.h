// One convolution of the FP8 probe (issue 9's FP8 and INT8 levers), on the host: the data, its
// fp16, E4M3 and INT8 forms with their scales, and at sampled outputs the exact result and what
// each way of computing it should give (an emulation of its storage). kernels/fp8_conv.h runs the
// same on the device and compares.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/conv_ref.h"

namespace cnnbench {

// How one convolution is computed: its storage types and the cuDNN graph around the conv.
enum class Fp8Variant {
  Fp16,                  // x, w fp16; conv + bias, ReLU; y fp16: the fp16 network's fused conv
  Fp8Sample,             // x, w E4M3; conv * descale_x * descale_w * scale_y; y E4M3; the amax of
                         // the descaled conv (NVIDIA's fp8 sample: no bias, no ReLU)
  Fp8ToFp16,             // x, w E4M3, one weight scale; conv * descale + bias, ReLU; y fp16
  Fp8ToFp16PerChannel,   // the same with one weight scale per output channel
  Fp8ToFp8,              // per channel; conv * descale + bias, ReLU, * scale_y; y E4M3; the amax
                         // of the ReLU's output (what an fp8 network chains from layer to layer)
  Int8ToFp16PerChannel,  // x, w INT8 (w a scale per output channel), int32 sums; conv * descale
                         // + bias, ReLU; y fp16
  Int8ToInt8PerChannel,  // the same, then * scale_y into y INT8 (nearest even, saturated): what
                         // an int8 network chains inside a bottleneck without a quantize pass;
                         // scale_y from the samples' amax (no AMAX op in the graph)
  Fp16ToInt8,            // x, w fp16, float sums; conv + bias, ReLU, * scale_y; y INT8: a
                         // bottleneck's first conv, whose input is the fp16 residual stream,
                         // handing its successor INT8 without a quantize pass
  Fp16Residual,          // fp16 with the residual: conv + bias + z, ReLU; z and y fp16 (the fp16
                         // network's bottleneck tail, what the next one is timed against)
  Int8ToFp16Residual,    // INT8 in, per channel, as Int8ToFp16PerChannel, + z before the ReLU:
                         // the INT8 bottleneck's last conv, back into the fp16 residual stream
};
const char* fp8_variant_name(Fp8Variant v);
std::vector<Fp8Variant> all_fp8_variants();
bool fp16_inputs(Fp8Variant v);  // x and w in fp16
bool fp8_inputs(Fp8Variant v);   // x and w in E4M3
bool int8_inputs(Fp8Variant v);  // x and w in INT8
bool fp8_output(Fp8Variant v);   // y in E4M3 (with scale_y and an amax output)
bool int8_output(Fp8Variant v);  // y in INT8 (with scale_y)
// The output's scale for an output amax: fp8_scale_for(amax) for E4M3, 127 / amax for INT8 (1
// where amax is not positive), 1 for fp16 outputs.
float output_scale_for(Fp8Variant v, double amax);
// v rounded to the nearest integer (ties to even) and saturated to [-128, 127]: cvt.rni.sat.s8.
int int8_round(float v);
bool has_epilogue(Fp8Variant v);  // + bias, ReLU
bool has_residual(Fp8Variant v);  // + z (fp16, shaped like y) before the ReLU
// The residual's value at y's element i (NHWC) for a case's seed: a post-ReLU block output,
// max(0, N(0, 1)) from a hash of (seed, i), rounded to fp16 as it is stored; made on demand, as
// z at batch 256 would hold up to 205 M values.
float residual_value(uint64_t seed, int64_t i);

struct Fp8Case {
  std::string name;
  ConvGeometry g;  // groups 1; x.c and y.c multiples of 16 (E4M3 rows of 16-byte alignment)
};

struct Fp8Sample {
  int n = 0, k = 0, oh = 0, ow = 0;
  int64_t index = 0;  // into y, NHWC
};

struct Fp8CaseData {
  Fp8Case c;
  // Exact values: x NHWC, post-ReLU activations (max(0, N(0, 1))); w KRSC, He-normal
  // (N(0, 2 / fan_in)); bias N(0, 0.1).
  std::vector<float> x, w, bias;
  std::vector<float> x16, w16;               // what fp16 storage holds
  float x_scale = 1, w_scale = 1;            // per tensor: 448 / amax
  std::vector<float> w_scales;               // per output channel
  std::vector<uint8_t> xq, wq, wq_rows;      // E4M3 codes: x * x_scale, w * w_scale, per channel
  std::vector<float> x_dq, w_dq, w_dq_rows;  // what the codes stand for
  float x_scale_i8 = 1;                      // INT8: 127 / amax of x
  std::vector<float> w_scales_i8;            // per output channel
  std::vector<int8_t> xi8, wi8_rows;         // INT8 codes
  std::vector<float> x_dq_i8, w_dq_rows_i8;  // what they stand for
  uint64_t seed = 0;                         // residual_value's
  std::vector<Fp8Sample> samples;
  std::vector<double> exact_conv;  // conv alone, from x and w, in double
};

// The case's data from `seed`, and `samples` output positions with their exact conv values.
Fp8CaseData make_fp8_case(const Fp8Case& c, uint64_t seed, int samples);

// At each sample: the exact result of variant v's function (conv alone for Fp8Sample; conv +
// bias, ReLU otherwise), and what v's storage should give, emulated in double from its rounded
// inputs, its output rounded to fp16, or to E4M3 or INT8 at y_scale (given back divided by
// y_scale).
std::vector<double> fp8_exact(const Fp8CaseData& d, Fp8Variant v);
std::vector<double> fp8_emulated(const Fp8CaseData& d, Fp8Variant v, float y_scale);

// ||got - ref|| / ||ref||.
double relative_l2(const std::vector<double>& got, const std::vector<double>& ref);

}  // namespace cnnbench
