// Host references for training (issue 4), in double, for the GPU training kernels to be checked
// against: the loss, the backward of every op the zoo trains, and the optimizers exactly as
// torch.optim defines them. Layouts are the device's: activations NHWC (Dims carry the batch),
// conv weights KRSC ([K][R][S][C / groups]), linear weights [out][in] as torchvision stores them.
// Host only: tested on a CPU against finite differences of the forward references here.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace cnnbench {

using RefVec = std::vector<double>;

// Softmax cross-entropy on integer labels, PyTorch's CrossEntropyLoss (mean over the batch),
// times `weight`: logits [N][classes]; dlogits = weight * (softmax - onehot) / N.
struct XentRef {
  double loss = 0;
  RefVec dlogits;
};
XentRef softmax_xent_ref(const RefVec& logits, const std::vector<int>& labels, int classes,
                         double weight = 1.0);

// BatchNorm in training mode over NHWC rows (N * H * W of them) of `channels`: batch mean and
// biased variance per channel; y = gamma * (x - mean) * invstd + beta, invstd = 1/sqrt(var + eps).
struct BnRef {
  RefVec y, mean, invstd;
};
BnRef bn_forward_train_ref(const RefVec& x, int channels, const RefVec& gamma, const RefVec& beta,
                           double eps);
struct BnGradRef {
  RefVec dx, dgamma, dbeta;
};
BnGradRef bn_backward_ref(const RefVec& x, const RefVec& dy, int channels, const RefVec& gamma,
                          const RefVec& mean, const RefVec& invstd);
// PyTorch's running statistics: r = (1 - momentum) * r + momentum * batch, with the unbiased
// variance (rows / (rows - 1)) for the running variance.
void bn_running_update_ref(RefVec& running_mean, RefVec& running_var, const RefVec& x, int channels,
                           double momentum = 0.1);

// Activations' backward, from what the training plan saves: ReLU and sigmoid their output, SiLU
// its input.
RefVec relu_backward_ref(const RefVec& y, const RefVec& dy);
RefVec sigmoid_backward_ref(const RefVec& y, const RefVec& dy);
RefVec silu_backward_ref(const RefVec& x, const RefVec& dy);

// Max and average pooling (PyTorch semantics, floor mode): padded positions never win a max;
// an average divides by kernel * kernel_w when count_include_pad, else by the in-bounds count.
struct PoolGeom {
  Dims x, y;  // batch included
  int kernel = 1, kernel_w = 1, stride = 1, pad = 0, pad_w = 0;
  bool count_include_pad = true;
};
PoolGeom pool_geom(Dims x, int kernel, int stride, int pad, bool count_include_pad = true);
RefVec maxpool_forward_ref(const RefVec& x, const PoolGeom& g);
RefVec maxpool_backward_ref(const RefVec& x, const RefVec& dy, const PoolGeom& g);  // to the max
RefVec avgpool_forward_ref(const RefVec& x, const PoolGeom& g);
RefVec avgpool_backward_ref(const RefVec& dy, const PoolGeom& g);

// Squeeze-excitation's scale: y[n, h, w, c] = x[n, h, w, c] * gate[n, c].
RefVec scale_forward_ref(const RefVec& x, const RefVec& gate, const Dims& d);
struct ScaleGradRef {
  RefVec dx, dgate;  // dgate[n, c] = sum over h, w of dy * x
};
ScaleGradRef scale_backward_ref(const RefVec& x, const RefVec& gate, const RefVec& dy,
                                const Dims& d);

// Cross-channel LRN as kernels/lrn.h defines it (alpha divided by size):
//   y[c] = x[c] * S[c]^-beta,  S[c] = k + alpha / size * sum_{j in window(c)} x[j]^2
// and its backward from the saved input (S is recomputed):
//   dx[j] = dy[j] * S[j]^-beta - 2 beta alpha / size * x[j] * sum_{c: j in window(c)} dy[c] x[c]
//           S[c]^(-beta - 1)
struct LrnGeom {
  Dims x;
  int size = 5;
  double alpha = 1e-4, beta = 0.75, k = 2.0;
};
RefVec lrn_forward_ref(const RefVec& x, const LrnGeom& g);
RefVec lrn_backward_ref(const RefVec& x, const RefVec& dy, const LrnGeom& g);

// Convolution, direct loops: any kernel (kernel x kernel_w), stride, padding, dilation, groups.
struct ConvGeom {
  Dims x, y;  // y.c is the output channel count K
  int kernel = 1, kernel_w = 1, stride = 1, pad = 0, pad_w = 0, dilation = 1, groups = 1;
};
// The geometry with y's height and width computed (PyTorch's floor formula).
ConvGeom conv_geom(Dims x, int out_channels, int kernel, int kernel_w, int stride, int pad,
                   int pad_w, int dilation = 1, int groups = 1);
RefVec conv_forward_ref(const RefVec& x, const RefVec& w, const RefVec& bias, const ConvGeom& g);
RefVec conv_backward_data_ref(const RefVec& dy, const RefVec& w, const ConvGeom& g);    // dx
RefVec conv_backward_filter_ref(const RefVec& x, const RefVec& dy, const ConvGeom& g);  // dw
RefVec bias_backward_ref(const RefVec& dy, int channels);  // the sum of dy per channel

// Linear: y[n][o] = sum_i x[n][i] w[o][i] + b[o] (b may be empty).
RefVec linear_forward_ref(const RefVec& x, const RefVec& w, const RefVec& b, int batch, int in,
                          int out);
struct LinearGradRef {
  RefVec dx, dw, db;
};
LinearGradRef linear_backward_ref(const RefVec& x, const RefVec& w, const RefVec& dy, int batch,
                                  int in, int out);

// Dropout (nn.Dropout in training): y = x * mask / (1 - p), mask 0 or 1 per element.
RefVec dropout_forward_ref(const RefVec& x, const std::vector<uint8_t>& mask, double p);
RefVec dropout_backward_ref(const RefVec& dy, const std::vector<uint8_t>& mask, double p);

// torch.optim.SGD, one step:
//   d = g + weight_decay * p
//   momentum != 0: buf = d on the first step, else momentum * buf + (1 - dampening) * d;
//                  d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
struct SgdRef {
  double lr = 0.1, momentum = 0, weight_decay = 0, dampening = 0;
  bool nesterov = false;
};
struct SgdState {
  RefVec momentum_buffer;  // empty until the first step with momentum
};
void sgd_step_ref(RefVec& p, const RefVec& g, SgdState& s, const SgdRef& h);

// torch.optim.Adam (not AdamW), one step t = 1, 2, ...:
//   g += weight_decay * p;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
struct AdamRef {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  // NVlabs' StyleGAN training before each step: grad.nan_to_num_(nan=0, posinf=1e5,
  // neginf=-1e5) (the device step only; torch.optim.Adam itself does not).
  bool nan_to_num = false;
};
struct AdamState {
  RefVec m, v;  // zeros of p's size before the first step
  int step = 0;
};
void adam_step_ref(RefVec& p, const RefVec& g, AdamState& s, const AdamRef& h);

// Dynamic loss scaling as torch.amp.GradScaler: the loss is multiplied by `scale` before the
// backward; a step whose gradients hold an inf or NaN is skipped and halves the scale, and
// `interval` steps in a row without one double it.
struct LossScaleRef {
  double scale = 65536.0, growth = 2.0, backoff = 0.5;
  int interval = 2000;
  int good_steps = 0;
  bool update(bool found_inf);  // whether the optimizer step runs
};

}  // namespace cnnbench
