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

int Graph::param(const std::string& name, std::vector<int64_t> shape, bool trainable,
                 bool integer) {
  params_.push_back({name, std::move(shape), trainable, integer});
  return int(params_.size()) - 1;
}

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
  n.kernel = kernel, n.stride = stride, n.pad = pad, n.dilation = dilation, n.groups = groups;
  n.bias = bias;
  n.out = {1, out_channels, pooled(in.h, kernel, stride, pad, dilation),
           pooled(in.w, kernel, stride, pad, dilation)};
  n.params.push_back(param(name + ".weight", {out_channels, in.c / groups, kernel, kernel}));
  if (bias) n.params.push_back(param(name + ".bias", {out_channels}));
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
  n.params = {param(name + ".weight", {c}), param(name + ".bias", {c}),
              param(name + ".running_mean", {c}, false), param(name + ".running_var", {c}, false),
              param(name + ".num_batches_tracked", {}, false, true)};
  return push(n);
}

int Graph::relu(int x) {
  Node n;
  n.kind = OpKind::ReLU;
  n.inputs = {x};
  n.out = node(x).out;
  return push(n);
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
  n.kernel = kernel, n.stride = stride, n.pad = pad;
  n.out = {1, in.c, pooled(in.h, kernel, stride, pad), pooled(in.w, kernel, stride, pad)};
  return push(n);
}

int Graph::avgpool(int x, int kernel, int stride, int pad, bool count_include_pad) {
  const Dims in = node(x).out;
  Node n;
  n.kind = OpKind::AvgPool;
  n.inputs = {x};
  n.kernel = kernel, n.stride = stride, n.pad = pad;
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
  n.params.push_back(param(name + ".weight", {out_features, in.c}));
  if (bias) n.params.push_back(param(name + ".bias", {out_features}));
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

int64_t Graph::macs() const {
  int64_t total = 0;
  for (const Node& n : nodes_) {
    if (n.kind == OpKind::Conv) {
      const int cin = node(n.inputs[0]).out.c;
      total += n.out.numel() * int64_t(cin / n.groups) * n.kernel * n.kernel;
    } else if (n.kind == OpKind::Linear) {
      total += int64_t(node(n.inputs[0]).out.c) * n.out.c;
    }
  }
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
