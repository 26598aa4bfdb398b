#include "networks/graph.h"

#include <stdexcept>

#include "harness/check.h"

namespace cnnbench {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Input:
      return "input";
    case OpKind::Conv:
      return "conv";
    case OpKind::BatchNorm:
      return "batchnorm";
    case OpKind::ReLU:
      return "relu";
    case OpKind::Add:
      return "add";
    case OpKind::MaxPool:
      return "maxpool";
    case OpKind::AvgPool:
      return "avgpool";
    case OpKind::GlobalAvgPool:
      return "global_avgpool";
    case OpKind::Flatten:
      return "flatten";
    case OpKind::Linear:
      return "linear";
    case OpKind::Concat:
      return "concat";
    case OpKind::SiLU:
      return "silu";
    case OpKind::Sigmoid:
      return "sigmoid";
    case OpKind::Scale:
      return "scale";
    case OpKind::LRN:
      return "lrn";
    case OpKind::AdaptiveAvgPool:
      return "adaptive_avgpool";
    case OpKind::Dropout:
      return "dropout";
    case OpKind::Upsample:
      return "upsample";
    case OpKind::ImplicitAdd:
      return "implicit_add";
    case OpKind::ImplicitMul:
      return "implicit_mul";
    case OpKind::Normalize2ndMoment:
      return "normalize_2nd_moment";
    case OpKind::LeakyReLU:
      return "lrelu";
    case OpKind::Const:
      return "const";
    case OpKind::ModConv:
      return "modconv";
    case OpKind::FirUpsample:
      return "fir_upsample";
    case OpKind::FourierInput:
      return "fourier_input";
    case OpKind::FilteredModConv:
      return "filtered_modconv";
    case OpKind::ClassEmbed:
      return "class_embed";
  }
  return "?";
}

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
int pooled(int size, int kernel, int stride, int pad, int dilation = 1) {
  return (size + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}
}  // namespace

int Graph::push(Node n) {
  for (int i : n.inputs)
    if (i < 0 || i >= int(nodes_.size())) throw std::logic_error("graph: bad input id");
  if (n.out.c <= 0 || n.out.h <= 0 || n.out.w <= 0)
    throw UserError("network " + name_ + ": layer '" + n.name + "' (" + op_kind_name(n.kind) +
                    ") gets an empty output " + n.out.str() + "; the input is too small");
  nodes_.push_back(std::move(n));
  return int(nodes_.size()) - 1;
}

int Graph::param(const std::string& name, std::vector<int64_t> shape, ParamRole role,
                 bool trainable, bool integer) {
  params_.push_back({name, std::move(shape), trainable, integer, role});
  return int(params_.size()) - 1;
}

namespace {
// torchvision: "<module>.weight"; MXNet: "<symbol>_weight".
std::string param_name(ParamStyle style, const std::string& module, const char* torch,
                       const char* mxnet) {
  return style == ParamStyle::Torch ? module + "." + torch : module + "_" + mxnet;
}
}  // namespace

int Graph::input(int channels, int height, int width) {
  Node n;
  n.kind = OpKind::Input;
  n.name = "input";
  n.out = {1, channels, height, width};
  input_ = push(n);
  return input_;
}

int Graph::conv(int x, const std::string& name, int out_channels, int kernel, int stride, int pad,
                bool bias, int groups, int dilation) {
  const Dims in = node(x).out;
  if (in.c % groups || out_channels % groups) throw std::logic_error("conv: bad groups");
  Node n;
  n.kind = OpKind::Conv;
  n.name = name;
  n.inputs = {x};
  n.kernel = n.kernel_w = kernel, n.stride = stride, n.pad = n.pad_w = pad;
  n.dilation = dilation, n.groups = groups;
  n.bias = bias;
  n.out = {1, out_channels, pooled(in.h, kernel, stride, pad, dilation),
           pooled(in.w, kernel, stride, pad, dilation)};
  n.params.push_back(param(param_name(style_, name, "weight", "weight"),
                           {out_channels, in.c / groups, kernel, kernel}, ParamRole::Weight));
  if (bias)
    n.params.push_back(
        param(param_name(style_, name, "bias", "bias"), {out_channels}, ParamRole::Bias));
  return push(n);
}

int Graph::conv_rect(int x, const std::string& name, int out_channels, int kernel_h, int kernel_w,
                     int stride, int pad_h, int pad_w, bool bias) {
  const Dims in = node(x).out;
  Node n;
  n.kind = OpKind::Conv;
  n.name = name;
  n.inputs = {x};
  n.kernel = kernel_h, n.kernel_w = kernel_w, n.stride = stride, n.pad = pad_h, n.pad_w = pad_w;
  n.bias = bias;
  n.out = {1, out_channels, pooled(in.h, kernel_h, stride, pad_h),
           pooled(in.w, kernel_w, stride, pad_w)};
  n.params.push_back(param(param_name(style_, name, "weight", "weight"),
                           {out_channels, in.c, kernel_h, kernel_w}, ParamRole::Weight));
  if (bias)
    n.params.push_back(
        param(param_name(style_, name, "bias", "bias"), {out_channels}, ParamRole::Bias));
  return push(n);
}

int Graph::batchnorm(int x, const std::string& name, double eps) {
  Node n;
  n.kind = OpKind::BatchNorm;
  n.name = name;
  n.inputs = {x};
  n.out = node(x).out;
  n.eps = eps;
  const int64_t c = n.out.c;
  n.params = {
      param(param_name(style_, name, "weight", "gamma"), {c}, ParamRole::Weight),
      param(param_name(style_, name, "bias", "beta"), {c}, ParamRole::Bias),
      param(param_name(style_, name, "running_mean", "moving_mean"), {c}, ParamRole::BnMean, false),
      param(param_name(style_, name, "running_var", "moving_var"), {c}, ParamRole::BnVar, false)};
  if (style_ == ParamStyle::Torch)  // MXNet keeps no counter
    n.params.push_back(param(name + ".num_batches_tracked", {}, ParamRole::BnCount, false, true));
  return push(n);
}

int Graph::unary(OpKind kind, int x) {
  Node n;
  n.kind = kind;
  n.inputs = {x};
  n.out = node(x).out;
  return push(n);
}

int Graph::relu(int x) {
  return unary(OpKind::ReLU, x);
}
int Graph::silu(int x) {
  return unary(OpKind::SiLU, x);
}
int Graph::sigmoid(int x) {
  return unary(OpKind::Sigmoid, x);
}

int Graph::scale(int x, int gate) {
  const Dims dx = node(x).out, dg = node(gate).out;
  if (dg.c != dx.c || dg.h != 1 || dg.w != 1) throw std::logic_error("scale: gate shape");
  Node n;
  n.kind = OpKind::Scale;
  n.inputs = {x, gate};
  n.out = dx;
  return push(n);
}

int Graph::upsample(int x, int factor, const std::string& name) {
  if (factor < 1) throw std::logic_error("upsample: factor below 1");
  Node n;
  n.kind = OpKind::Upsample;
  n.name = name;
  n.inputs = {x};
  n.out = node(x).out;
  n.out.h *= factor, n.out.w *= factor;
  n.stride = factor;
  return push(n);
}

namespace {
Node implicit_node(OpKind kind, int x, const Dims& d, const std::string& module) {
  Node n;
  n.kind = kind;
  n.name = module;
  n.inputs = {x};
  n.out = d;
  return n;
}
}  // namespace

int Graph::implicit_add(int x, const std::string& module) {
  Node n = implicit_node(OpKind::ImplicitAdd, x, node(x).out, module);
  n.params = {param(module + ".implicit", {1, node(x).out.c, 1, 1}, ParamRole::Bias)};
  return push(n);
}

int Graph::implicit_mul(int x, const std::string& module) {
  Node n = implicit_node(OpKind::ImplicitMul, x, node(x).out, module);
  n.params = {param(module + ".implicit", {1, node(x).out.c, 1, 1}, ParamRole::Weight)};
  return push(n);
}

int Graph::normalize_2nd_moment(int x) {
  return unary(OpKind::Normalize2ndMoment, x);
}
int Graph::leaky_relu(int x) {
  return unary(OpKind::LeakyReLU, x);
}

void Graph::add_buffer(const std::string& name, std::vector<int64_t> shape) {
  param(name, std::move(shape), ParamRole::Weight, false);
}

int Graph::learned_const(int after, const std::string& module, int channels, int size) {
  Node n;
  n.kind = OpKind::Const;
  n.name = module;
  n.inputs = {after};
  n.out = {1, channels, size, size};
  n.params = {param(module + ".const", {channels, size, size}, ParamRole::Weight)};
  return push(n);
}

int Graph::modconv(int x, int w, const std::string& module, int out_channels, int kernel, int up,
                   bool demodulate, bool noise) {
  const Dims in = node(x).out;
  const int wdim = node(w).out.c;
  Node n;
  n.kind = OpKind::ModConv;
  n.name = module;
  n.inputs = {x, w};
  n.kernel = n.kernel_w = kernel;
  n.pad = n.pad_w = kernel / 2;
  n.up = up;
  n.demodulate = demodulate;
  n.bias = true;
  n.out = {1, out_channels, in.h * up, in.w * up};
  n.params = {
      param(module + ".weight", {out_channels, in.c, kernel, kernel}, ParamRole::Weight),
      param(module + ".bias", {out_channels}, ParamRole::Bias),
      param(module + ".affine.weight", {in.c, wdim}, ParamRole::Weight),
      param(module + ".affine.bias", {in.c}, ParamRole::Bias),
  };
  if (noise) n.params.push_back(param(module + ".noise_strength", {}, ParamRole::Weight));
  if (noise) {  // a SynthesisLayer's buffers (ToRGB has none)
    param(module + ".resample_filter", {4, 4}, ParamRole::Weight, false);
    param(module + ".noise_const", {n.out.h, n.out.w}, ParamRole::Weight, false);
  }
  return push(n);
}

void Graph::set_stylegan_gains(int id, float weight_gain, float bias_gain, float style_gain,
                               float clamp) {
  Node& n = nodes_.at(size_t(id));
  n.weight_gain = weight_gain, n.bias_gain = bias_gain, n.style_gain = style_gain, n.clamp = clamp;
}

int Graph::fir_upsample(int x) {
  Node n;
  n.kind = OpKind::FirUpsample;
  n.inputs = {x};
  n.out = node(x).out;
  n.out.h *= 2, n.out.w *= 2;
  return push(n);
}

int Graph::fourier_input(int w, const std::string& module, int channels, int size,
                         double sampling_rate, double bandwidth) {
  Node n;
  n.kind = OpKind::FourierInput;
  n.name = module;
  n.inputs = {w};
  n.sg3.fs = sampling_rate;
  n.sg3.up_cutoff = bandwidth;
  n.out = {1, channels, size, size};
  const int wdim = node(w).out.c;
  n.params = {param(module + ".weight", {channels, channels}, ParamRole::Weight),
              param(module + ".affine.weight", {4, wdim}, ParamRole::Weight),
              param(module + ".affine.bias", {4}, ParamRole::Bias)};
  param(module + ".transform", {3, 3}, ParamRole::Weight, false);
  param(module + ".freqs", {channels, 2}, ParamRole::Weight, false);
  param(module + ".phases", {channels}, ParamRole::Weight, false);
  return push(n);
}

int Graph::filtered_modconv(int x, int w, const std::string& module, int out_channels, int kernel,
                            int size, const Sg3Spec& f) {
  const Dims in = node(x).out;
  const int up_taps = f.up_taps, down_taps = f.down_taps;
  const bool radial = f.radial;
  Node n;
  n.kind = OpKind::FilteredModConv;
  n.name = module;
  n.inputs = {x, w};
  n.kernel = n.kernel_w = kernel;
  n.pad = n.pad_w = kernel - 1;
  n.bias = true;
  n.out = {1, out_channels, size, size};
  n.sg3 = f;
  n.params = {param(module + ".weight", {out_channels, in.c, kernel, kernel}, ParamRole::Weight),
              param(module + ".bias", {out_channels}, ParamRole::Bias),
              param(module + ".affine.weight", {in.c, node(w).out.c}, ParamRole::Weight),
              param(module + ".affine.bias", {in.c}, ParamRole::Bias)};
  param(module + ".magnitude_ema", {}, ParamRole::Weight, false);
  if (up_taps > 1) param(module + ".up_filter", {up_taps}, ParamRole::Weight, false);
  if (down_taps > 1)
    param(module + ".down_filter",
          radial ? std::vector<int64_t>{down_taps, down_taps} : std::vector<int64_t>{down_taps},
          ParamRole::Weight, false);
  return push(n);
}

int Graph::class_embed(int x, const std::string& module, int z_dim, int embed_rows, int embed_dim) {
  const Dims in = node(x).out;
  if (in.c <= z_dim || in.h != 1 || in.w != 1)
    throw std::logic_error("class_embed: the input must be z then the classes, 1 x 1");
  Node n;
  n.kind = OpKind::ClassEmbed;
  n.name = module;
  n.inputs = {x};
  n.out = {1, 2 * z_dim, 1, 1};
  n.bias = true;
  n.params = {param(module + ".embed.weight", {embed_rows, embed_dim}, ParamRole::Weight),
              param(module + ".embed_proj.weight", {z_dim, embed_dim}, ParamRole::Weight),
              param(module + ".embed_proj.bias", {z_dim}, ParamRole::Bias)};
  return push(n);
}

int Graph::concat(const std::vector<int>& xs, const std::string& name) {
  if (xs.empty()) throw std::logic_error("concat: no inputs");
  Node n;
  n.kind = OpKind::Concat;
  n.name = name;
  n.inputs = xs;
  n.out = node(xs[0]).out;
  n.out.c = 0;
  for (int x : xs) {
    const Dims d = node(x).out;
    if (d.h != n.out.h || d.w != n.out.w) throw std::logic_error("concat: spatial mismatch");
    n.out.c += d.c;
  }
  return push(n);
}

int Graph::lrn(int x, int size, double alpha, double beta, double k, const std::string& name) {
  Node n;
  n.kind = OpKind::LRN;
  n.name = name;
  n.inputs = {x};
  n.out = node(x).out;
  n.lrn_size = size, n.lrn_alpha = alpha, n.lrn_beta = beta, n.lrn_k = k;
  return push(n);
}

int Graph::adaptive_avgpool(int x, int out_h, int out_w, const std::string& name) {
  Node n;
  n.kind = OpKind::AdaptiveAvgPool;
  n.name = name;
  n.inputs = {x};
  n.out = {1, node(x).out.c, out_h, out_w};
  return push(n);
}

int Graph::dropout(int x, double p, const std::string& name) {
  if (!(p >= 0 && p < 1)) throw std::logic_error("dropout: p must be in [0, 1)");
  Node n;
  n.kind = OpKind::Dropout;
  n.name = name;
  n.inputs = {x};
  n.out = node(x).out;
  n.dropout_p = p;
  return push(n);
}

int Graph::set_dropout_p(double p) {
  if (!(p >= 0 && p < 1)) throw std::logic_error("set_dropout_p: p must be in [0, 1)");
  int changed = 0;
  for (Node& n : nodes_)
    if (n.kind == OpKind::Dropout) {
      n.dropout_p = p;
      ++changed;
    }
  return changed;
}

int Graph::add(int a, int b) {
  const Dims da = node(a).out, db = node(b).out;
  if (da.c != db.c || da.h != db.h || da.w != db.w) throw std::logic_error("add: shape mismatch");
  Node n;
  n.kind = OpKind::Add;
  n.inputs = {a, b};
  n.out = da;
  return push(n);
}

int Graph::maxpool(int x, int kernel, int stride, int pad, const std::string& name) {
  const Dims in = node(x).out;
  Node n;
  n.kind = OpKind::MaxPool;
  n.name = name;
  n.inputs = {x};
  n.kernel = n.kernel_w = kernel, n.stride = stride, n.pad = n.pad_w = pad;
  n.out = {1, in.c, pooled(in.h, kernel, stride, pad), pooled(in.w, kernel, stride, pad)};
  return push(n);
}

int Graph::avgpool(int x, int kernel, int stride, int pad, bool count_include_pad) {
  const Dims in = node(x).out;
  Node n;
  n.kind = OpKind::AvgPool;
  n.inputs = {x};
  n.kernel = n.kernel_w = kernel, n.stride = stride, n.pad = n.pad_w = pad;
  n.count_include_pad = count_include_pad;
  n.out = {1, in.c, pooled(in.h, kernel, stride, pad), pooled(in.w, kernel, stride, pad)};
  return push(n);
}

int Graph::global_avgpool(int x, const std::string& name) {
  Node n;
  n.kind = OpKind::GlobalAvgPool;
  n.name = name;
  n.inputs = {x};
  n.out = {1, node(x).out.c, 1, 1};
  return push(n);
}

int Graph::flatten(int x) {
  const Dims in = node(x).out;
  Node n;
  n.kind = OpKind::Flatten;
  n.inputs = {x};
  n.out = {1, in.c * in.h * in.w, 1, 1};
  return push(n);
}

int Graph::linear(int x, const std::string& name, int out_features, bool bias) {
  const Dims in = node(x).out;
  if (in.h != 1 || in.w != 1) throw std::logic_error("linear: flatten first");
  Node n;
  n.kind = OpKind::Linear;
  n.name = name;
  n.inputs = {x};
  n.bias = bias;
  n.out = {1, out_features, 1, 1};
  n.params.push_back(
      param(param_name(style_, name, "weight", "weight"), {out_features, in.c}, ParamRole::Weight));
  if (bias)
    n.params.push_back(
        param(param_name(style_, name, "bias", "bias"), {out_features}, ParamRole::Bias));
  return push(n);
}

int Graph::conv_bn(int x, const std::string& conv_name, const std::string& bn_name,
                   int out_channels, int kernel, int stride, int pad, bool relu_after, double eps) {
  int y = conv(x, conv_name, out_channels, kernel, stride, pad);
  y = batchnorm(y, bn_name, eps);
  return relu_after ? relu(y) : y;
}

int64_t Graph::num_parameters() const {
  int64_t total = 0;
  for (const ParamSpec& p : params_)
    if (p.trainable) total += p.numel();
  return total;
}

int64_t Graph::node_macs(int id) const {
  const Node& n = node(id);
  if (n.kind == OpKind::Conv) {
    const int cin = node(n.inputs[0]).out.c;
    return n.out.numel() * int64_t(cin / n.groups) * n.kernel * n.kernel_w;
  }
  if (n.kind == OpKind::Linear) return int64_t(node(n.inputs[0]).out.c) * n.out.c;
  if (n.kind == OpKind::ModConv) {  // the up-sampling conv counted on its low-resolution input
    const Dims in = node(n.inputs[0]).out;
    return int64_t(in.h) * in.w * n.out.c * in.c * n.kernel * n.kernel_w;
  }
  if (n.kind == OpKind::FilteredModConv) {  // the conv's output is in + k - 1 (padding k - 1)
    const Dims in = node(n.inputs[0]).out;
    return int64_t(in.h + n.kernel - 1) * (in.w + n.kernel - 1) * n.out.c * in.c * n.kernel *
           n.kernel;
  }
  if (n.kind == OpKind::FourierInput) return n.out.numel() * int64_t(n.out.c);  // the mixing
  if (n.kind == OpKind::ClassEmbed)                                             // embed_proj
    return int64_t(params_[size_t(n.params[1])].numel());
  return 0;
}

int64_t Graph::macs() const {
  int64_t total = 0;
  for (int id = 0; id < int(nodes_.size()); ++id) total += node_macs(id);
  return total;
}

std::vector<std::vector<int>> Graph::consumers() const {
  std::vector<std::vector<int>> out(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (int in : nodes_[i].inputs) out[in].push_back(int(i));
  if (output_ >= 0) out[output_].push_back(-1);  // the network output is consumed by the caller
  return out;
}

}  // namespace cnnbench
