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
  Linear
};
const char* op_kind_name(OpKind k);

// One state_dict entry. Buffers (BatchNorm statistics) are not trainable; num_batches_tracked is a
// buffer that inference never reads.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool trainable = true;
  bool integer = false;  // int64 (num_batches_tracked)
  int64_t numel() const;
};

struct Node {
  OpKind kind = OpKind::Input;
  std::string name;         // module path: "layer3.2.conv2"; empty for unnamed ops
  std::vector<int> inputs;  // node ids
  Dims out;                 // per image: out.n == 1
  // Conv and pooling geometry.
  int kernel = 1, stride = 1, pad = 0, dilation = 1, groups = 1;
  bool bias = false;              // Conv / Linear
  bool count_include_pad = true;  // AvgPool
  double eps = 1e-5;              // BatchNorm
  std::vector<int> params;        // indices into Graph::params()
};

class Graph {
 public:
  explicit Graph(std::string name) : name_(std::move(name)) {}

  // Builder verbs. Each returns the new node's id.
  int input(int channels, int height, int width);
  int conv(int x, const std::string& name, int out_channels, int kernel, int stride = 1,
           int pad = 0, bool bias = false, int groups = 1, int dilation = 1);
  int batchnorm(int x, const std::string& name, double eps = 1e-5);
  int relu(int x);
  int add(int a, int b);
  int maxpool(int x, int kernel, int stride, int pad = 0, const std::string& name = "");
  int avgpool(int x, int kernel, int stride, int pad = 0, bool count_include_pad = true);
  int global_avgpool(int x, const std::string& name = "");
  int flatten(int x);
  int linear(int x, const std::string& name, int out_features, bool bias = true);
  // conv (no bias) -> BatchNorm -> optional ReLU, named like torchvision's modules.
  int conv_bn(int x, const std::string& conv_name, const std::string& bn_name, int out_channels,
              int kernel, int stride, int pad, bool relu_after, double eps = 1e-5);
  void set_output(int id) { output_ = id; }

  const std::string& name() const { return name_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int id) const { return nodes_.at(id); }
  const std::vector<ParamSpec>& params() const { return params_; }
  int output() const { return output_; }
  int input_id() const { return input_; }

  int64_t num_parameters() const;  // trainable only, as sum(p.numel() for p in parameters())
  int64_t macs() const;            // conv + linear multiply-accumulates for one image
  // Consumers of each node.
  std::vector<std::vector<int>> consumers() const;

 private:
  int push(Node n);
  int param(const std::string& name, std::vector<int64_t> shape, bool trainable = true,
            bool integer = false);
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<ParamSpec> params_;
  int output_ = -1;
  int input_ = -1;
};

}  // namespace cnnbench
