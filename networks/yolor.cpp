// YOLOR-CSP-X (WongKinYiu/yolor, cfg/yolor_csp_x.cfg), as its models.py builds it from the cfg:
// a list of 216 layer blocks, each module_list.{i}, that refer to earlier blocks by relative or
// absolute index. The list is written out here the way the cfg lays it out (the backbone's CSP
// stages, the SPP-CSP neck, two FPN and two PAN steps, the implicit layers and the three heads;
// ../shared/reference/networks.md section 8 and NOTES.md), then turned into the graph block by
// block, so every parameter carries its block's index as the reference names it.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check.h"
#include "networks/zoo.h"

namespace cnnbench {

namespace {

enum class Block {
  Conv,
  Shortcut,
  Route,
  MaxPool,
  Upsample,
  ImplicitA,
  ImplicitM,
  Shift,
  Control,
  Yolo
};

struct Layer {
  Block kind = Block::Conv;
  int filters = 0, size = 1, stride = 1;
  bool bn = true;         // conv: BatchNorm + SiLU; false: bias, linear
  std::vector<int> from;  // shortcut, shift, control: one; route: several (relative if < 0)
};

Layer conv(int filters, int size, int stride = 1) {
  Layer l;
  l.filters = filters, l.size = size, l.stride = stride;
  return l;
}
Layer head_conv(int filters) {
  Layer l = conv(filters, 1);
  l.bn = false;
  return l;
}
Layer op(Block kind, std::vector<int> from = {}, int size = 0) {
  Layer l;
  l.kind = kind, l.from = std::move(from), l.size = size;
  return l;
}

// The cfg's blocks in order.
std::vector<Layer> yolor_csp_x_layers() {
  std::vector<Layer> L;
  auto add = [&](Layer l) { L.push_back(std::move(l)); };
  // A residual block: 1x1, 3x3, add to the block's input.
  auto residual = [&](int mid, int out) {
    add(conv(mid, 1));
    add(conv(out, 3));
    add(op(Block::Shortcut, {-3}));
  };
  add(conv(32, 3));     // 0
  add(conv(80, 3, 2));  // 1
  residual(40, 80);     // 2-4
  // A CSP stage: downsample, a split 1x1, the main path's 1x1 and residual blocks, a transition
  // 1x1, the concat with the split and the output 1x1.
  auto csp_stage = [&](int width, int blocks) {
    const int mid = width / 2;
    add(conv(width, 3, 2));
    add(conv(mid, 1));            // split
    add(op(Block::Route, {-2}));  // back to the downsample
    add(conv(mid, 1));
    for (int b = 0; b < blocks; ++b) residual(mid, mid);
    add(conv(mid, 1));
    add(op(Block::Route, {-1, -(3 * blocks + 4)}));  // [transition, split]
    add(conv(width, 1));
  };
  csp_stage(160, 3);   // 5-20
  csp_stage(320, 10);  // 21-57
  csp_stage(640, 10);  // 58-94
  csp_stage(1280, 5);  // 95-116
  // SPP-CSP, 117-133.
  add(conv(640, 1));                        // 117
  add(op(Block::Route, {-2}));              // 118: 116
  add(conv(640, 1));                        // 119
  add(conv(640, 3));                        // 120
  add(conv(640, 1));                        // 121
  add(op(Block::MaxPool, {}, 5));           // 122
  add(op(Block::Route, {-2}));              // 123: 121
  add(op(Block::MaxPool, {}, 9));           // 124
  add(op(Block::Route, {-4}));              // 125: 121
  add(op(Block::MaxPool, {}, 13));          // 126
  add(op(Block::Route, {-1, -3, -5, -6}));  // 127: [126, 124, 122, 121]
  add(conv(640, 1));                        // 128
  add(conv(640, 3));                        // 129
  add(conv(640, 1));                        // 130
  add(conv(640, 3));                        // 131
  add(op(Block::Route, {-1, -15}));         // 132: [131, 117]
  add(conv(640, 1));                        // 133
  // The "plain" CSP block: 1x1 (i), a split 1x1 of it, back to i, three pairs without residual,
  // the concat with the split, a 1x1.
  auto plain = [&](int c) {
    add(conv(c, 1));
    add(conv(c, 1));  // split
    add(op(Block::Route, {-2}));
    for (int k = 0; k < 3; ++k) {
      add(conv(c, 1));
      add(conv(c, 3));
    }
    add(op(Block::Route, {-1, -8}));
    add(conv(c, 1));
  };
  // FPN: 1x1, upsample, the lateral's 1x1, the concat, the plain block.
  auto fpn = [&](int c, int lateral) {
    add(conv(c, 1));
    add(op(Block::Upsample));
    add(op(Block::Route, {lateral}));
    add(conv(c, 1));
    add(op(Block::Route, {-1, -3}));
    plain(c);
  };
  fpn(320, 94);  // 134-149
  fpn(160, 57);  // 150-165
  // PAN: a 3x3 stride-2 conv, the concat with the lateral, the plain block.
  auto pan = [&](int c, int lateral) {
    add(conv(c, 3, 2));
    add(op(Block::Route, {-1, lateral}));
    plain(c);
  };
  pan(320, 149);  // 166-178
  pan(640, 133);  // 179-191
  // Implicit knowledge, 192-197: ImplicitA on the heads' 3x3 outputs, ImplicitM on their 255.
  for (int c : {320, 640, 1280}) {
    Layer l = op(Block::ImplicitA);
    l.filters = c;
    add(l);
  }
  for (int k = 0; k < 3; ++k) {
    Layer l = op(Block::ImplicitM);
    l.filters = 255;
    add(l);
  }
  // Heads, 198-215: from 165, 178, 191.
  const int sources[3] = {165, 178, 191}, widths[3] = {320, 640, 1280};
  for (int h = 0; h < 3; ++h) {
    add(op(Block::Route, {sources[h]}));
    add(conv(widths[h], 3));
    add(op(Block::Shift, {192 + h}));
    add(head_conv(255));
    add(op(Block::Control, {195 + h}));
    add(op(Block::Yolo));
  }
  return L;
}

}  // namespace

Graph yolor_csp_x(int input_size, int num_classes, bool fold_implicits) {
  if (num_classes != 80)
    throw UserError("yolor_csp_x: the cfg's heads are 255 = 3 x (5 + 80) wide; num_classes " +
                    std::to_string(num_classes) + " is not built");
  if (input_size % 32)
    throw UserError("yolor_csp_x: the input size must be a multiple of 32 (strides 8/16/32), not " +
                    std::to_string(input_size));
  const std::vector<Layer> layers = yolor_csp_x_layers();
  if (layers.size() != 216) throw std::logic_error("yolor_csp_x: the layer list is not 216 long");
  Graph g("yolor_csp_x");
  std::vector<int> out(layers.size(), -1);  // each block's graph node
  int x = g.input(3, input_size, input_size);
  auto index = [&](int i, int from) {
    const int j = from < 0 ? i + from : from;
    if (j < 0 || j >= i || out[j] < 0) throw std::logic_error("yolor_csp_x: bad reference");
    return j;
  };
  std::vector<int> heads;
  for (int i = 0; i < int(layers.size()); ++i) {
    const Layer& l = layers[i];
    const std::string m = "module_list." + std::to_string(i);
    switch (l.kind) {
      case Block::Conv:
        x = g.conv(x, m + ".Conv2d", l.filters, l.size, l.stride, l.size / 2, !l.bn);
        if (l.bn) x = g.silu(g.batchnorm(x, m + ".BatchNorm2d", 1e-4));
        break;
      case Block::Shortcut:
        x = g.add(x, out[index(i, l.from[0])]);
        break;
      case Block::Route: {
        std::vector<int> xs;
        for (int f : l.from) xs.push_back(out[index(i, f)]);
        x = xs.size() == 1 ? xs[0] : g.concat(xs, m);
        break;
      }
      case Block::MaxPool:
        x = g.maxpool(x, l.size, 1, (l.size - 1) / 2, m);
        break;
      case Block::Upsample:
        x = g.upsample(x, 2, m);
        break;
      case Block::ImplicitA:
      case Block::ImplicitM:
        // A free tensor, applied where shift/control_channels name it: nothing runs here.
        break;
      case Block::Shift:  // folded: into the 1x1 conv's bias after it (fold_yolor_implicits)
        if (!fold_implicits) x = g.implicit_add(x, "module_list." + std::to_string(l.from[0]));
        break;
      case Block::Control:  // folded: into the 1x1 conv's weight and bias before it
        if (!fold_implicits) x = g.implicit_mul(x, "module_list." + std::to_string(l.from[0]));
        break;
      case Block::Yolo:
        heads.push_back(x);
        break;
    }
    out[i] = x;
  }
  if (heads.size() != 3) throw std::logic_error("yolor_csp_x: three heads expected");
  g.set_output(heads[0]);
  g.add_extra_output(heads[1]);
  g.add_extra_output(heads[2]);
  return g;
}

HostWeights fold_yolor_implicits(const HostWeights& w) {
  auto get = [&](const std::string& name) -> const std::vector<float>& {
    auto it = w.find(name);
    if (it == w.end()) throw UserError("fold_yolor_implicits: no tensor " + name);
    return it->second;
  };
  HostWeights out = w;
  for (int h = 0; h < 3; ++h) {
    const std::string conv = "module_list." + std::to_string(201 + 6 * h) + ".Conv2d";
    const std::string shift = "module_list." + std::to_string(192 + h) + ".implicit";
    const std::string control = "module_list." + std::to_string(195 + h) + ".implicit";
    const std::vector<float>& W = get(conv + ".weight");  // [K][C][1][1]
    const std::vector<float>& b = get(conv + ".bias");
    const std::vector<float>& a = get(shift);    // [1][C][1][1]
    const std::vector<float>& m = get(control);  // [1][K][1][1]
    const size_t K = b.size(), C = a.size();
    if (m.size() != K || W.size() != K * C)
      throw UserError("fold_yolor_implicits: " + conv + " is not [" + std::to_string(m.size()) +
                      "][" + std::to_string(C) + "] with its implicits");
    std::vector<float>& Wf = out[conv + ".weight"];
    std::vector<float>& bf = out[conv + ".bias"];
    for (size_t k = 0; k < K; ++k) {
      double shifted = b[k];
      for (size_t c = 0; c < C; ++c) {
        shifted += double(W[k * C + c]) * a[c];
        Wf[k * C + c] = float(double(m[k]) * W[k * C + c]);
      }
      bf[k] = float(double(m[k]) * shifted);
    }
    out.erase(shift);
    out.erase(control);
  }
  return out;
}

void yolor_head_prior(HostWeights& w, int num_classes) {
  const int strides[3] = {8, 16, 32};
  const int no = 5 + num_classes;
  for (int h = 0; h < 3; ++h) {
    const std::string name = "module_list." + std::to_string(201 + 6 * h) + ".Conv2d.bias";
    auto it = w.find(name);
    if (it == w.end() || it->second.size() != size_t(3 * no))
      throw UserError("yolor_head_prior: no " + std::to_string(3 * no) + "-wide tensor " + name);
    const double cells = 640.0 / strides[h];
    for (int a = 0; a < 3; ++a) {
      it->second[size_t(a * no + 4)] += float(std::log(8.0 / (cells * cells)));
      for (int c = 0; c < num_classes; ++c)
        it->second[size_t(a * no + 5 + c)] += float(std::log(0.6 / (num_classes - 0.99)));
    }
  }
}

int yolor_layer_count(const std::string& kind) {
  int n = 0;
  for (const Layer& l : yolor_csp_x_layers()) {
    const char* k = l.kind == Block::Conv        ? "convolutional"
                    : l.kind == Block::Shortcut  ? "shortcut"
                    : l.kind == Block::Route     ? "route"
                    : l.kind == Block::MaxPool   ? "maxpool"
                    : l.kind == Block::Upsample  ? "upsample"
                    : l.kind == Block::ImplicitA ? "implicit_add"
                    : l.kind == Block::ImplicitM ? "implicit_mul"
                    : l.kind == Block::Shift     ? "shift_channels"
                    : l.kind == Block::Control   ? "control_channels"
                                                 : "yolo";
    n += kind == k;
  }
  return n;
}

}  // namespace cnnbench
