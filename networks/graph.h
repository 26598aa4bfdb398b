// The network graph: what a builder in networks/ writes and what the compile step reads.
//
// Nodes are added in topological order. Shapes are per image (the batch is chosen at compile
// time). Parameter and buffer names follow torchvision's state_dict, so weights travel to and from
// PyTorch through .safetensors, and parameter and MAC counts come from the graph itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace cnnbench {

enum class OpKind {
  Input,
  Conv,
  BatchNorm,
  ReLU,
  Add,
  MaxPool,
  AvgPool,
  GlobalAvgPool,
  Flatten,
  Linear,
  Concat,  // along channels, inputs in order
  SiLU,    // x * sigmoid(x)
  Sigmoid,
  Scale,            // x * gate, gate [C, 1, 1] per image (squeeze-excitation)
  LRN,              // cross-channel local response normalization
  AdaptiveAvgPool,  // to out.h x out.w, PyTorch's bins
  Dropout,          // training: y = x * mask / (1 - p); the identity at inference
  Upsample,         // nearest neighbour, by an integer factor (Darknet's upsample: 2)
  ImplicitAdd,      // y = x + a, a [1, C, 1, 1] a parameter (YOLOR's ImplicitA, shift_channels)
  ImplicitMul,      // y = x * m, m [1, C, 1, 1] a parameter (YOLOR's ImplicitM, control_channels)
  // StyleGAN's generator (networks/stylegan.cpp):
  Normalize2ndMoment,  // x * rsqrt(mean over channels of x^2 + 1e-8)
  LeakyReLU,           // bias_act's lrelu: slope 0.2, gain sqrt(2)
  Const,    // a learned [C, H, W] tensor, the same for every image (input 0: ordering only)
  ModConv,  // inputs {x, w}: affine(w) modulates the weight, optional demodulation, up-sampling
            // (up = 2: transposed conv + FIR), noise, bias, lrelu with gain and clamp; ToRGB too
  FirUpsample,  // upfirdn2d's upsample2d by 2 with the [1, 3, 3, 1] filter (the image skip path)
  // StyleGAN3: Fourier features of the affine-transformed grid, mixed by a learned matrix (input
  // 0: w), and the alias-free layer: a modulated conv (padding k - 1) and filtered_lrelu
  // (up-sample, FIR, bias, lrelu, FIR, down-sample) to out.h x out.w.
  FourierInput,
  FilteredModConv,
  // StyleGAN-XL's conditioning: the input holds z (z_dim) then a one-hot class; out =
  // concat(normalize_2nd_moment(z), normalize_2nd_moment(lrelu(embed_proj(embed[argmax c])))),
  // 2 z_dim wide (z_dim = out.c / 2, the classes the rest of the input).
  ClassEmbed,
};
const char* op_kind_name(OpKind k);

// What a parameter is to its layer, whatever the naming style calls it.
enum class ParamRole { Weight, Bias, BnMean, BnVar, BnCount };

// How a network names its parameters: torchvision's state_dict ("features.0.weight",
// "bn1.running_mean") or MXNet's arg/aux params ("conv_3a_1x1_weight", "bn_1_moving_var").
enum class ParamStyle { Torch, MXNet };

// One state_dict entry. Buffers (BatchNorm statistics) are not trainable; num_batches_tracked is a
// buffer that inference never reads. A BatchNorm's gamma and beta have roles Weight and Bias.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool trainable = true;
  bool integer = false;  // int64 (num_batches_tracked)
  ParamRole role = ParamRole::Weight;
  int64_t numel() const;
};

// StyleGAN3's alias-free layer (FilteredModConv) and input (FourierInput), networks.md 9.2:
// filtered_lrelu's factors, filter lengths and padding (the same on both axes), and what the
// filters are designed from (design_lowpass_filter: cutoff, transition width, sampling rate fs).
// FourierInput: fs is its sampling rate and up_cutoff its bandwidth.
struct Sg3Spec {
  int up = 1, down = 1, up_taps = 1, down_taps = 1;
  int pad_lo = 0, pad_hi = 0;
  double fs = 0, up_cutoff = 0, up_width = 0, down_cutoff = 0, down_width = 0;
  bool radial = false;    // the down filter is 2D (StyleGAN3-R's non-critical layers)
  bool torgb = false;     // 1x1, not demodulated, linear (slope 1, gain 1)
  float out_scale = 1.f;  // after the clamp: the synthesis' output_scale (0.25) on the ToRGB
};

struct Node {
  OpKind kind = OpKind::Input;
  std::string name;         // module path: "layer3.2.conv2"; empty for unnamed ops
  std::vector<int> inputs;  // node ids
  Dims out;                 // per image: out.n == 1
  // Conv and pooling geometry: kernel and pad are the height's; kernel_w and pad_w the width's
  // (equal to them but for Inception-v3's 1x7 / 7x1 convs).
  int kernel = 1, kernel_w = 1, stride = 1, pad = 0, pad_w = 0, dilation = 1, groups = 1;
  bool bias = false;              // Conv / Linear
  bool count_include_pad = true;  // AvgPool
  double eps = 1e-5;              // BatchNorm
  // LRN: y = x / (lrn_k + lrn_alpha / lrn_size * sum of squares over lrn_size channels)^lrn_beta
  int lrn_size = 5;
  double lrn_alpha = 1e-4, lrn_beta = 0.75, lrn_k = 2.0;
  double dropout_p = 0;    // Dropout: the probability of zeroing an element
  int up = 1;              // ModConv: 2 for the up-sampling conv
  bool demodulate = true;  // ModConv: false for ToRGB (linear, styles scaled by 1/sqrt(C_in))
  // StyleGAN's equalized learning rate: Linear's (and a ModConv's affine's) weight and bias
  // multiply by these where they are used (the mapping: 0.01 / sqrt(512) and 0.01; an affine:
  // 1 / sqrt(w_dim) and 1); a ModConv's styles by style_gain (ToRGB: 1 / sqrt(C_in)); a ModConv's
  // activation (lrelu x sqrt(2) where it demodulates, linear for ToRGB) clamps to +-clamp (0:
  // none; NVlabs' conv_clamp, 256).
  float weight_gain = 1.f, bias_gain = 1.f, style_gain = 1.f, clamp = 0.f;
  Sg3Spec sg3;  // FilteredModConv, FourierInput
  // Parameters by role, indices into Graph::params(): conv and linear [weight, bias?]; BatchNorm
  // [weight (gamma), bias (beta), running mean, running var, num_batches_tracked (torch only)].
  std::vector<int> params;
};

class Graph {
 public:
  explicit Graph(std::string name, ParamStyle style = ParamStyle::Torch)
      : name_(std::move(name)), style_(style) {}

  // Builder verbs. Each returns the new node's id.
  int input(int channels, int height, int width);
  int conv(int x, const std::string& name, int out_channels, int kernel, int stride = 1,
           int pad = 0, bool bias = false, int groups = 1, int dilation = 1);
  // A rectangular kernel (kernel_h x kernel_w) with its own padding per side pair.
  int conv_rect(int x, const std::string& name, int out_channels, int kernel_h, int kernel_w,
                int stride, int pad_h, int pad_w, bool bias = false);
  int batchnorm(int x, const std::string& name, double eps = 1e-5);
  int relu(int x);
  int add(int a, int b);
  int maxpool(int x, int kernel, int stride, int pad = 0, const std::string& name = "");
  int avgpool(int x, int kernel, int stride, int pad = 0, bool count_include_pad = true);
  int global_avgpool(int x, const std::string& name = "");
  int flatten(int x);
  int linear(int x, const std::string& name, int out_features, bool bias = true);
  // The node's equalized-learning-rate factors, style gain and clamp (see Node), after building.
  void set_stylegan_gains(int id, float weight_gain, float bias_gain, float style_gain = 1.f,
                          float clamp = 0.f);
  int concat(const std::vector<int>& xs, const std::string& name = "");
  int silu(int x);
  int sigmoid(int x);
  int scale(int x, int gate);  // x [C,H,W] times gate [C,1,1]
  int lrn(int x, int size, double alpha, double beta, double k, const std::string& name = "");
  int adaptive_avgpool(int x, int out_h, int out_w, const std::string& name = "");
  // Dropout with probability p (torchvision's nn.Dropout): no parameters, the identity at
  // inference, so the inference schedule sees through it like a flatten.
  int dropout(int x, double p, const std::string& name = "");
  // Every dropout's probability set to p (a training step made deterministic with p = 0, to
  // compare it with a framework's); the count of dropouts changed.
  int set_dropout_p(double p);
  // conv (no bias) -> BatchNorm -> optional ReLU, named like torchvision's modules.
  int conv_bn(int x, const std::string& conv_name, const std::string& bn_name, int out_channels,
              int kernel, int stride, int pad, bool relu_after, double eps = 1e-5);
  // Nearest-neighbour upsampling by `factor` in height and width.
  int upsample(int x, int factor = 2, const std::string& name = "");
  // YOLOR's implicit knowledge: a free [1, C, 1, 1] tensor `<module>.implicit` added to or
  // multiplying x channel by channel.
  int implicit_add(int x, const std::string& module);
  int implicit_mul(int x, const std::string& module);
  // StyleGAN (networks.md section 9.1; names as NVlabs' state_dict).
  int normalize_2nd_moment(int x);
  int leaky_relu(int x);
  int learned_const(int after, const std::string& module, int channels, int size);
  // `<module>.{weight, bias, noise_strength, affine.weight, affine.bias}` and the buffers
  // `resample_filter` and (with noise) `noise_const`; ToRGB: no noise, no demodulation.
  int modconv(int x, int w, const std::string& module, int out_channels, int kernel, int up,
              bool demodulate, bool noise);
  int fir_upsample(int x);
  // StyleGAN3's SynthesisInput: `<module>.{weight, affine.weight, affine.bias}`, buffers freqs,
  // phases, transform; channels x size x size at `sampling_rate`, frequencies up to `bandwidth`.
  int fourier_input(int w, const std::string& module, int channels, int size, double sampling_rate,
                    double bandwidth);
  // StyleGAN3's SynthesisLayer: `<module>.{weight, bias, affine.weight, affine.bias}`, buffers
  // magnitude_ema and the FIR filters of f.up_taps / f.down_taps (none where 1; the down filter
  // 2-D where f.radial); the output out_channels x size x size.
  int filtered_modconv(int x, int w, const std::string& module, int out_channels, int kernel,
                       int size, const Sg3Spec& f);
  // StyleGAN-XL's MappingNetwork front (ClassEmbed): `<module>.embed.weight` [embed_rows,
  // embed_dim] (nn.Embedding) and `<module>.embed_proj.{weight [z_dim, embed_dim], bias}`; x is
  // z_dim + classes wide; the embed_proj's gains are set with set_stylegan_gains.
  int class_embed(int x, const std::string& module, int z_dim, int embed_rows, int embed_dim);
  // A state_dict buffer that no node reads in inference (mapping.w_avg, resample filters).
  void add_buffer(const std::string& name, std::vector<int64_t> shape);
  void set_output(int id) { output_ = id; }
  // A detector's further heads, besides output(): results the benchmark keeps too.
  void add_extra_output(int id) { extra_outputs_.push_back(id); }
  const std::vector<int>& extra_outputs() const { return extra_outputs_; }
  // output(), then extra_outputs(): every value a run hands back.
  std::vector<int> outputs() const {
    std::vector<int> all{output_};
    all.insert(all.end(), extra_outputs_.begin(), extra_outputs_.end());
    return all;
  }

  const std::string& name() const { return name_; }
  ParamStyle style() const { return style_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int id) const { return nodes_.at(id); }
  const std::vector<ParamSpec>& params() const { return params_; }
  int output() const { return output_; }
  int input_id() const { return input_; }

  int64_t num_parameters() const;   // trainable only, as sum(p.numel() for p in parameters())
  int64_t macs() const;             // conv + linear multiply-accumulates for one image
  int64_t node_macs(int id) const;  // one node's share of macs() (0 but for conv and linear)
  // Consumers of each node.
  std::vector<std::vector<int>> consumers() const;

 private:
  int push(Node n);
  int param(const std::string& name, std::vector<int64_t> shape, ParamRole role,
            bool trainable = true, bool integer = false);
  int unary(OpKind kind, int x);
  std::string name_;
  ParamStyle style_;
  std::vector<Node> nodes_;
  std::vector<ParamSpec> params_;
  int output_ = -1;
  int input_ = -1;
  std::vector<int> extra_outputs_;
};

}  // namespace cnnbench
