#include "networks/compile.h"

#include "harness/nvtx.h"
#include "kernels/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "harness/check.h"
#include "kernels/conv.h"
#include "kernels/depthwise.h"
#include "kernels/fir_design.h"
#include "kernels/lrn.h"
#include "kernels/matmul.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/se.h"
#include "kernels/storage.h"
#include "kernels/stylegan.h"
#include "kernels/stylegan3.h"
#include "kernels/upsample.h"
#include "networks/schedule.h"

namespace cnnbench {

namespace {

// Nearest upsampling (YOLOR's FPN), into its own buffer or a concat's slice.
class UpsampleOp : public Op {
 public:
  UpsampleOp(const std::string& name, DType t, const Dims& x_dims, int factor, int ld_y,
             const void* x, void* y)
      : t_(t), x_dims_(x_dims), factor_(factor), ld_y_(ld_y), x_(x), y_(y) {
    Dims yd = x_dims;
    yd.h *= factor, yd.w *= factor;
    record_.name = name;
    out_ = y;
    out_bytes_ = size_t(yd.numel()) * dtype_size(t);
    record_.op = op_kind_name(OpKind::Upsample);
    record_.shape = "in " + x_dims.str() + " -> out " + yd.str();
    record_.engine = "cnnbench kernel";
    if (ld_y && ld_y != yd.c)
      set_strided_output(size_t(yd.n) * yd.h * yd.w, size_t(yd.c) * dtype_size(t),
                         size_t(ld_y) * dtype_size(t));
  }
  void run(cudaStream_t stream) override {
    launch_upsample_nearest(t_, x_, x_dims_, factor_, 0, y_, ld_y_, stream);
  }

 private:
  DType t_;
  Dims x_dims_;
  int factor_, ld_y_;
  const void* x_;
  void* y_;
};

// A kernel of our own with nothing to choose (StyleGAN's normalize_2nd_moment, lrelu, constant
// input and FIR up-sampling): run() is the launch.
class KernelOp : public Op {
 public:
  KernelOp(const std::string& name, const std::string& op, const Dims& out, DType t, void* y,
           std::function<void(cudaStream_t)> launch)
      : launch_(std::move(launch)) {
    record_.name = name;
    record_.op = op;
    record_.shape = out.str();
    record_.engine = "cnnbench kernel";
    out_ = y;
    out_bytes_ = size_t(out.numel()) * dtype_size(t);
  }
  void run(cudaStream_t stream) override { launch_(stream); }

 private:
  std::function<void(cudaStream_t)> launch_;
};

// conv2d_resample's up-sampling before StyleGAN2's up-sampling conv: zeros between the pixels,
// pads 3 and 2, the [1, 3, 3, 1] filter with gain 4 (then a valid conv of the flipped weight).
FirSpec modconv_up_spec() {
  FirSpec f;
  f.up = 2, f.fh = f.fw = 4, f.gain = 4.f;
  f.pad_x0 = f.pad_y0 = 3, f.pad_x1 = f.pad_y1 = 2;
  return f;
}

// An op around one cuDNN conv (StyleGAN's modulated convs and Fourier input): before() writes the
// conv's input, after() finishes from its output. The conv is prepared on the data it will see
// (before() runs first); its engine, notes and workspace are the op's.
class AroundConvOp : public Op {
 public:
  AroundConvOp(const ConvSpec& spec, const ConvBuffers& buffers) : conv_(spec, buffers) {}
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override {
    before(ctx.stream);
    conv_.prepare(ctx, mode, top_k, scratch);
    record_.engine = conv_.record().engine;
    record_.engine_notes = conv_.record().engine_notes;
    record_.workspace_bytes = conv_.record().workspace_bytes;
  }
  size_t workspace_bytes() const override { return conv_.workspace_bytes(); }
  void bind_workspace(void* w, size_t bytes) override { conv_.bind_workspace(w, bytes); }
  void run(cudaStream_t s) override {
    before(s);
    conv_.run(s);
    after(s);
  }
  std::string ban_engine(GpuContext& ctx) override { return conv_.ban_engine(ctx); }

 protected:
  virtual void before(cudaStream_t s) = 0;
  virtual void after(cudaStream_t) {}

 private:
  ConvOp conv_;
};

// StyleGAN2's modulated conv (SynthesisLayer or ToRGB) in the scale-conv-scale form: the styles
// from w (the affine), x times the styles into a buffer of its own (x is read again: by ToRGB or
// the next block), for up = 2 upfirdn2d's up-sampling (pads 3 and 2, gain 4) into another, the
// conv with the shared weight (cuDNN; for up = 2 a valid conv of the flipped weight), the
// demodulation coefficients and their scale, then noise, bias, lrelu x sqrt(2) (or linear for
// ToRGB) and the clamp.
class ModConvOp : public AroundConvOp {
 public:
  struct Buffers {
    const void* x;        // [N, C, H, W]
    const void* w;        // [N, wdim]
    void* xs;             // x * styles
    void* up;             // the up-sampled xs (up = 2), else null
    void* up_tmp;         // its first (along W) pass
    float* styles;        // [N, C]
    float* d;             // [N, K]
    const void* weight;   // KRSC in the storage type, flipped for up = 2
    const float* wsq;     // [K][C]: the sum of the weight's squares over R x S
    const float* affine;  // [C][wdim]
    const float* affine_b;
    const float* bias;   // [K]
    const float* noise;  // [H_out][W_out] or null
    const float* fir;    // [1, 3, 3, 1] / 8 for up = 2
    const void* zeros;   // [K] in the storage type: the conv's own bias (its graph has one)
    void* y;
  };
  ModConvOp(const std::string& name, DType t, const ConvSpec& conv, const Dims& x_dims, int wdim,
            int up, bool demodulate, float weight_gain, float bias_gain, float style_gain,
            const BiasActSpec& act, const Buffers& b)
      : AroundConvOp(conv, ConvBuffers{up > 1 ? b.up : b.xs, b.weight, b.zeros, nullptr, b.y}),
        t_(t),
        x_dims_(x_dims),
        wdim_(wdim),
        up_(up),
        demodulate_(demodulate),
        weight_gain_(weight_gain),
        bias_gain_(bias_gain),
        style_gain_(style_gain),
        act_(act),
        b_(b) {
    record_.name = name;
    record_.op = std::string("modconv") + (up > 1 ? " up2" : "") + (demodulate ? "" : " torgb");
    record_.shape =
        "in " + x_dims.str() + " -> out " + conv.y.str() + " k" + std::to_string(conv.kernel);
    out_ = b.y;
    out_bytes_ = size_t(conv.y.numel()) * dtype_size(t);
    y_dims_ = conv.y;
  }

 private:
  void after(cudaStream_t s) override {
    if (demodulate_) {
      launch_demod(b_.styles, b_.wsq, x_dims_.n, x_dims_.c, y_dims_.c, b_.d, s);
      launch_channel_scale(b_.y, b_.y, y_dims_, t_, b_.d, s);
    }
    launch_bias_act(b_.y, b_.y, y_dims_, t_, b_.bias, b_.noise, act_, s);
  }
  void before(cudaStream_t s) override {
    launch_affine(b_.w, t_, x_dims_.n, wdim_, b_.affine, b_.affine_b, weight_gain_, bias_gain_,
                  style_gain_, x_dims_.c, b_.styles, s);
    launch_channel_scale(b_.x, b_.xs, x_dims_, t_, b_.styles, s);
    if (up_ > 1)
      launch_upfirdn2d_separable(b_.xs, x_dims_, t_, b_.fir, modconv_up_spec(), b_.up_tmp, b_.up,
                                 s);
  }
  DType t_;
  Dims x_dims_, y_dims_;
  int wdim_, up_;
  bool demodulate_;
  float weight_gain_, bias_gain_, style_gain_;
  BiasActSpec act_;
  Buffers b_;
};

// StyleGAN3's SynthesisInput: the affine's rotation and translation per image, the transformed
// frequencies, the Fourier features into a buffer of the op's own step, then the channels mixed
// by the learned matrix (weight / sqrt(C), uploaded as a 1x1 conv's; cuDNN).
class FourierInputOp : public AroundConvOp {
 public:
  struct Buffers {
    const void* w;  // [N, wdim]
    const float *affine, *affine_b, *transform, *freqs, *phases;
    float* t;        // [N, 4]
    float* fp;       // [N, C, 4]
    void* features;  // [N, size, size, C]
    const void* weight;
    const void* zeros;
    void* y;
  };
  FourierInputOp(const std::string& name, DType t, const ConvSpec& conv, int wdim,
                 float weight_gain, float sampling_rate, float bandwidth, const Buffers& b)
      : AroundConvOp(conv, ConvBuffers{b.features, b.weight, b.zeros, nullptr, b.y}),
        t_(t),
        dims_(conv.y),
        wdim_(wdim),
        weight_gain_(weight_gain),
        sampling_rate_(sampling_rate),
        bandwidth_(bandwidth),
        b_(b) {
    record_.name = name;
    record_.op = "fourier_input";
    record_.shape = conv.y.str();
    out_ = b.y;
    out_bytes_ = size_t(conv.y.numel()) * dtype_size(t);
  }

 private:
  void before(cudaStream_t s) override {  // the features, the conv's input
    launch_affine(b_.w, t_, dims_.n, wdim_, b_.affine, b_.affine_b, weight_gain_, 1.f, 1.f, 4, b_.t,
                  s);
    launch_fourier_prepare(b_.t, b_.transform, b_.freqs, b_.phases, dims_.n, dims_.c,
                           sampling_rate_, bandwidth_, b_.fp, s);
    launch_fourier_features(b_.fp, dims_.n, dims_.c, dims_.h, sampling_rate_, t_, b_.features, s);
  }
  DType t_;
  Dims dims_;
  int wdim_;
  float weight_gain_, sampling_rate_, bandwidth_;
  Buffers b_;
};

// StyleGAN3's SynthesisLayer: the styles (the affine; pre-normalised by their RMS over the whole
// batch and the demodulation coefficients where it demodulates), x times the styles into a
// temporary, cuDNN's conv (padding k - 1) with the weight pre-normalised per output channel and
// times the input gain rsqrt(magnitude_ema), then filtered_lrelu as separable passes
// (Fir1dPass): up-sampling along W then H (the first pass applies the demodulation and the
// bias, the second the lrelu, gain and clamp), down-sampling along W then H; each pass into a
// temporary of the op's own step but the last, into y.
class FilteredModConvOp : public AroundConvOp {
 public:
  struct Buffers {
    const void* x;  // [N, C, H, W]
    const void* w;  // [N, wdim]
    void* xs;       // x * styles
    void* conv;     // the conv's output, [N, K, H + k - 1, W + k - 1]
    float* styles;  // [N, C]
    float* d;       // [N, K]
    const void* weight;
    const float *wsq, *affine, *affine_b, *bias;
    std::vector<const float*> taps;  // each pass's filter (null: the single tap 1)
    std::vector<void*> tmp;          // each pass's output but the last's
    const void* zeros;
    void* y;
  };
  FilteredModConvOp(const std::string& name, DType t, const ConvSpec& conv, const Dims& x_dims,
                    int wdim, bool demodulate, float weight_gain, float style_gain,
                    std::vector<Fir1dPass> passes, const Buffers& b)
      : AroundConvOp(conv, ConvBuffers{b.xs, b.weight, b.zeros, nullptr, b.conv}),
        t_(t),
        x_dims_(x_dims),
        conv_dims_(conv.y),
        wdim_(wdim),
        demodulate_(demodulate),
        weight_gain_(weight_gain),
        style_gain_(style_gain),
        passes_(std::move(passes)),
        b_(b) {
    record_.name = name;
    record_.op = std::string("modconv+filtered_lrelu") + (demodulate ? "" : " torgb");
    Dims y = conv.y;
    for (const Fir1dPass& p : passes_) y = p.out_dims(y);
    record_.shape = "in " + x_dims.str() + " -> conv " + conv.y.str() + " -> out " + y.str() +
                    " k" + std::to_string(conv.kernel);
    out_ = b.y;
    out_bytes_ = size_t(y.numel()) * dtype_size(t);
  }

 private:
  void after(cudaStream_t s) override {
    launch_filtered_lrelu(b_.conv, conv_dims_, t_, passes_, b_.taps, demodulate_ ? b_.d : nullptr,
                          b_.bias, b_.tmp, b_.y, s);
  }
  void before(cudaStream_t s) override {
    launch_affine(b_.w, t_, x_dims_.n, wdim_, b_.affine, b_.affine_b, weight_gain_, 1.f,
                  style_gain_, x_dims_.c, b_.styles, s);
    if (demodulate_) {
      launch_rms_normalize(b_.styles, x_dims_.n * x_dims_.c, s);
      launch_demod(b_.styles, b_.wsq, x_dims_.n, x_dims_.c, conv_dims_.c, b_.d, s);
    }
    launch_channel_scale(b_.x, b_.xs, x_dims_, t_, b_.styles, s);
  }
  DType t_;
  Dims x_dims_, conv_dims_;
  int wdim_;
  bool demodulate_;
  float weight_gain_, style_gain_;
  std::vector<Fir1dPass> passes_;
  Buffers b_;
};

class PoolOp : public Op {
 public:
  PoolOp(const std::string& name, OpKind kind, DType t, const PoolSpec& s, const void* x, void* y)
      : kind_(kind), t_(t), s_(s), x_(x), y_(y) {
    record_.name = name;
    out_ = y;
    out_bytes_ = size_t(s.y.numel()) * dtype_size(t);
    record_.op = op_kind_name(kind);
    record_.shape = "in " + s.x.str() + " -> out " + s.y.str();
    record_.engine = "cnnbench kernel";
    if (s.ld_y && s.ld_y != s.y.c)
      set_strided_output(size_t(s.y.n) * s.y.h * s.y.w, size_t(s.y.c) * dtype_size(t),
                         size_t(s.ld_y) * dtype_size(t));
  }
  void run(cudaStream_t stream) override {
    if (kind_ == OpKind::MaxPool)
      launch_maxpool(t_, x_, y_, s_, stream);
    else if (kind_ == OpKind::AvgPool)
      launch_avgpool(t_, x_, y_, s_, stream);
    else if (kind_ == OpKind::AdaptiveAvgPool)
      launch_adaptive_avgpool(t_, x_, y_, s_, stream);
    else
      launch_global_avgpool(t_, x_, y_, s_, stream);
  }

 private:
  OpKind kind_;
  DType t_;
  PoolSpec s_;
  const void* x_;
  void* y_;
};

// A BatchNorm, add or activation that no conv absorbed.
class EpilogueOp : public Op {
 public:
  EpilogueOp(const std::string& name, const std::string& op, DType t, const Dims& d, const void* x,
             const void* scale, const void* bias, const void* z, Act act, void* y)
      : t_(t), x_(x), scale_(scale), bias_(bias), z_(z), act_(act), y_(y) {
    record_.name = name;
    out_ = y;
    out_bytes_ = size_t(d.numel()) * dtype_size(t);
    layout_.rows = int64_t(d.n) * d.h * d.w;
    layout_.channels = d.c;
    record_.op = op;
    record_.shape = d.str();
    record_.engine = "cnnbench kernel";
  }
  void run(cudaStream_t stream) override {
    launch_epilogue(t_, y_, x_, scale_, bias_, z_, act_, layout_, stream);
  }

 private:
  DType t_;
  RowLayout layout_;
  const void *x_, *scale_, *bias_, *z_;
  Act act_;
  void* y_;
};

class LrnOp : public Op {
 public:
  LrnOp(const std::string& name, DType t, const LrnSpec& s, const void* x, void* y)
      : t_(t), s_(s), x_(x), y_(y) {
    record_.name = name;
    out_ = y;
    out_bytes_ = size_t(s.x.numel()) * dtype_size(t);
    record_.op = "lrn";
    record_.shape = s.x.str() + " size " + std::to_string(s.size);
    record_.engine = "cnnbench kernel";
  }
  void run(cudaStream_t stream) override { launch_lrn(t_, x_, y_, s_, stream); }

 private:
  DType t_;
  LrnSpec s_;
  const void* x_;
  void* y_;
};

// Squeeze-excitation: pool, both 1x1 convs and the scale, in our kernels. Of the two variants
// (kernels/se.h), autotune times both as graph replays on the layer's own buffers and keeps the
// faster; heuristics pick by size.
class SeOp : public Op {
 public:
  // With `gate` (se_fold at batch 1): pooling and excitation only, the gates [N][C] float to
  // `gate` for the next conv to fold in; y is not written.
  SeOp(const std::string& name, DType t, const SeSpec& s, const void* x, const float* w1,
       const float* b1, const float* w2, const float* b2, void* scratch, void* y,
       float* gate = nullptr)
      : t_(t),
        s_(s),
        x_(x),
        w1_(w1),
        b1_(b1),
        w2_(w2),
        b2_(b2),
        scratch_(scratch),
        y_(y),
        gate_(gate) {
    record_.name = name;
    out_ = gate ? static_cast<void*>(gate) : y;
    out_bytes_ = gate ? size_t(s.x.n) * s.x.c * sizeof(float) : size_t(s.x.numel()) * dtype_size(t);
    record_.op = gate ? "squeeze_excite (gates folded into the next conv)" : "squeeze_excite";
    record_.shape = s.x.str() + " squeeze " + std::to_string(s.squeeze);
    set_variant(gate ? SeVariant::Split : se_heuristic(s));
  }
  void prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) override {
    (void)top_k, (void)scratch;
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == EngineMode::Autotune && !gate_) {
      double us[2] = {0, 0};
      set_variant(tune_se(t_, x_, y_, w1_, b1_, w2_, b2_, s_, scratch_, ctx.stream, us));
      record_.tuned_us = variant_ == SeVariant::OneBlock ? us[0] : us[1];
      record_.candidates = 2;
      char notes[96];
      std::snprintf(notes, sizeof notes, "one-block %.1f us, split %.1f us", us[0], us[1]);
      record_.engine_notes = notes;
    }
    record_.build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  void run(cudaStream_t stream) override {
    if (gate_)
      launch_se_gate(t_, x_, w1_, b1_, w2_, b2_, s_, scratch_, gate_, stream);
    else
      launch_se(t_, x_, y_, w1_, b1_, w2_, b2_, s_, variant_, scratch_, stream);
  }

 private:
  DType t_;
  SeSpec s_;
  const void* x_;
  const float *w1_, *b1_, *w2_, *b2_;
  void* scratch_;
  void* y_;
  float* gate_;
  SeVariant variant_ = SeVariant::Split;
  void set_variant(SeVariant v) {
    variant_ = v;
    record_.engine = std::string("cnnbench ") + se_variant_name(v) + ": " + se_kernels(s_, v) +
                     (gate_ ? ", gates only" : "");
  }
};

// The gates folded into a 1x1 conv's weights, each run: w_out[k][c] = w[k][c] * gate[c].
class SeFoldOp : public Op {
 public:
  SeFoldOp(const std::string& name, DType t, const void* w, const float* gate, void* w_out, int K,
           int C)
      : t_(t), w_(w), gate_(gate), w_out_(w_out), K_(K), C_(C) {
    record_.name = name;
    out_ = w_out;
    out_bytes_ = size_t(K) * C * dtype_size(t);
    record_.op = "se_fold";
    record_.shape = std::to_string(K) + "x" + std::to_string(C);
    record_.engine = "cnnbench kernel";
  }
  void run(cudaStream_t stream) override { launch_se_fold(t_, w_, gate_, w_out_, K_, C_, stream); }

 private:
  DType t_;
  const void* w_;
  const float* gate_;
  void* w_out_;
  int K_, C_;
};

// A concat's inputs that their producers could not write in place, copied into their slices.
class ConcatCopyOp : public Op {
 public:
  struct Copy {
    const void* src;
    int channels;
    void* dst;  // the slice's first channel
  };
  ConcatCopyOp(const std::string& name, DType t, int64_t rows, int ld, std::vector<Copy> copies)
      : t_(t), rows_(rows), ld_(ld), copies_(std::move(copies)) {
    record_.name = name;
    record_.op = "concat copy";
    out_ = nullptr;  // it writes several slices; each producer's check covers its own
    int c = 0;
    for (const Copy& k : copies_) c += k.channels;
    record_.shape = std::to_string(copies_.size()) + " inputs, " + std::to_string(c) + " of " +
                    std::to_string(ld) + " channels";
    record_.engine = "cnnbench kernel";
  }
  void run(cudaStream_t stream) override {
    for (const Copy& k : copies_)
      launch_copy_channels(t_, k.dst, ld_, k.src, k.channels, rows_, k.channels, stream);
  }

 private:
  DType t_;
  int64_t rows_;
  int ld_;
  std::vector<Copy> copies_;
};

// The weights of a node's parameter by role order (see Node::params).
const std::vector<float>& tensor_of(const HostWeights& w, const Graph& g, const Node& n,
                                    size_t index) {
  const std::string& name = g.params().at(n.params.at(index)).name;
  auto it = w.find(name);
  if (it == w.end()) throw UserError("weights have no tensor '" + name + "'");
  return it->second;
}

// Inference BatchNorm as y = x * scale + shift, in double.
struct BnFold {
  std::vector<double> scale, shift;
};
BnFold fold_bn(const HostWeights& w, const Graph& g, const Node& bn) {
  const auto& gamma = tensor_of(w, g, bn, 0);
  const auto& beta = tensor_of(w, g, bn, 1);
  const auto& mean = tensor_of(w, g, bn, 2);
  const auto& var = tensor_of(w, g, bn, 3);
  BnFold f;
  for (size_t k = 0; k < gamma.size(); ++k) {
    f.scale.push_back(double(gamma[k]) / std::sqrt(double(var[k]) + bn.eps));
    f.shift.push_back(double(beta[k]) - double(mean[k]) * f.scale.back());
  }
  return f;
}

std::string op_label(const char* base, OpKind act) {
  std::string s = base;
  if (act != OpKind::Input) s += std::string("+") + op_kind_name(act);
  return s;
}

}  // namespace

int padded_channels(int channels, int groups, Precision p) {
  const int m = p == Precision::FP16 || p == Precision::BF16 ? 8 : p == Precision::TF32 ? 4 : 0;
  return groups == 1 && m > 0 && channels < m ? m : 0;
}

Model::Model(GpuContext& ctx, const Graph& g, const HostWeights& weights, const CompileOptions& opt)
    : ctx_(ctx), opt_(opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const DType t = storage_type(opt.precision);
  const size_t esize = dtype_size(t);
  const int N = opt.batch;
  const auto& nodes = g.nodes();
  flops_per_image_ = 2.0 * double(g.macs());

  // 1. Group nodes into ops, in the order they run, and place every value.
  Schedule sched = schedule_ops(g);
  // At batch 1, with se_fold, a squeeze-excitation whose output only a 1x1 conv reads computes
  // its gates alone; the conv reads the SE's input with the gates folded into its weights.
  std::vector<int> fold_of(sched.groups.size(), -1);  // conv group -> its SE group
  std::vector<bool> gate_only(sched.groups.size(), false);
  if (opt.se_fold && N == 1) {
    std::vector<int> readers(nodes.size(), 0);
    for (const OpGroup& gr : sched.groups)
      for (int v : gr.in) ++readers[alias_source(g, v)];
    for (size_t si = 0; si < sched.groups.size(); ++si) {
      const OpGroup& se = sched.groups[si];
      if (se.kind != OpKind::Scale) continue;
      const int a = se.anchor;
      const std::vector<int> outputs = g.outputs();
      if (std::find(outputs.begin(), outputs.end(), a) != outputs.end() || readers[a] != 1 ||
          sched.view[a].root != a)
        continue;
      for (size_t ci = 0; ci < sched.groups.size(); ++ci) {
        OpGroup& cv = sched.groups[ci];
        if (cv.kind != OpKind::Conv || cv.in.empty() || cv.in[0] != a || cv.residual == a) continue;
        const Node& c = nodes[cv.head];
        if (c.kernel != 1 || c.kernel_w != 1 || c.stride != 1 || c.groups != 1 || c.pad != 0 ||
            c.pad_w != 0 || c.dilation != 1 || c.inputs[0] != a)
          continue;
        fold_of[ci] = int(si);
        gate_only[si] = true;
        cv.in[0] = se.in[0];
        break;
      }
    }
  }
  const std::vector<OpGroup>& groups = sched.groups;
  const std::vector<int>& order = sched.order;
  auto view = [&](int id) { return sched.view[alias_source(g, id)]; };

  // 2. Buffers and their lifetimes (in emission steps): a buffer lives from the first write of
  // any value in it to the last read of any.
  const Lifetimes life = buffer_lifetimes(g, sched);
  std::vector<int> buffer(nodes.size(), -1);
  for (size_t id = 0; id < nodes.size(); ++id) {
    if (life.first[id] < 0) continue;
    const size_t bytes = size_t(batched(nodes[id].out, N).numel()) * esize;
    buffer[id] = arena_.add_activation(bytes, life.first[id], life.last[id]);
  }
  input_buf_ = buffer[g.input_id()];
  for (int o : g.outputs()) {
    if (view(o).offset != 0 || view(o).ld != nodes[o].out.c)
      throw std::logic_error("compile: an output lives in a slice");
    outputs_.push_back({buffer[view(o).root], batched(nodes[o].out, N)});
  }
  input_dims_ = batched(nodes[g.input_id()].out, N);

  // 3. Weights, in device layout and storage type: conv KRSC with BatchNorm folded in;
  // squeeze-excitation's weights in float.
  struct PendingUpload {
    int buffer;
    std::vector<uint8_t> bytes;
  };
  std::vector<PendingUpload> uploads;
  auto upload_bytes = [&](std::vector<uint8_t> bytes) {
    const int id = arena_.add_weights(bytes.size());
    uploads.push_back({id, std::move(bytes)});
    return id;
  };
  auto add_weights = [&](const std::vector<float>& v) { return upload_bytes(to_storage(v, t)); };
  auto add_f32 = [&](const std::vector<float>& v) {
    return upload_bytes(to_storage(v, DType::F32));
  };
  std::vector<int> wbuf(groups.size(), -1), bbuf(groups.size(), -1), sbuf(groups.size(), -1);
  std::vector<int> w2buf(groups.size(), -1), b2buf(groups.size(), -1),
      se_scratch(groups.size(), -1), gate_buf(groups.size(), -1), fold_buf(groups.size(), -1);
  // StyleGAN's modulated convs: their temporaries (x * styles, its up-sampling; activations that
  // live for the op's own step), styles and coefficients, and the uploads of the affine, the
  // weight's squares, the noise and the FIR filter.
  struct ModConvBufs {
    int xs = -1, up = -1, up_tmp = -1, styles = -1, d = -1, wsq = -1, affine = -1, affine_b = -1,
        noise = -1, fir = -1, zeros = -1;
    float noise_strength = 0;
  };
  std::vector<ModConvBufs> mc(groups.size());
  // StyleGAN3's input and layers: their buffers' uploads, scratch, temporaries and passes.
  struct Sg3Bufs {
    int affine = -1, affine_b = -1, transform = -1, freqs = -1, phases = -1, zeros = -1, t = -1,
        fp = -1, features = -1, xs = -1, conv = -1, styles = -1, d = -1, wsq = -1;
    std::vector<int> taps, tmp;
    std::vector<Fir1dPass> passes;
  };
  std::vector<Sg3Bufs> sg(groups.size());
  auto buffer_of = [&](const HostWeights& hw, const std::string& key) -> const std::vector<float>& {
    auto it = hw.find(key);
    if (it == hw.end()) throw UserError("weights have no tensor '" + key + "'");
    return it->second;
  };
  // StyleGAN2's [1, 3, 3, 1] / 8 (1-D: its up-sampling runs as two separable passes), one upload
  // for every op that reads it.
  int fir_buf = -1;
  auto stylegan_fir = [&] {
    if (fir_buf < 0) fir_buf = add_f32(fir_1d(stylegan2_fir_1d()));
    return fir_buf;
  };
  std::vector<int> step_of(groups.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) step_of[order[k]] = int(k);
  // Convs reading a zero-padded copy of a narrow input (padded_channels): its width and buffer.
  std::vector<int> pad_to(groups.size(), 0), pad_buf(groups.size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const OpGroup& grp = groups[gi];
    const Node& n = nodes[grp.head];
    if (grp.kind == OpKind::Conv) {
      const Dims in = nodes[n.inputs[0]].out;
      const int K = n.out.c, C = in.c / n.groups, R = n.kernel, S = n.kernel_w;
      const std::vector<float>& w = tensor_of(weights, g, n, 0);
      std::vector<double> scale(K, 1.0), shift(K, 0.0);
      if (n.bias) {
        const auto& b = tensor_of(weights, g, n, 1);
        for (int k = 0; k < K; ++k) shift[k] = b[k];
      }
      if (grp.bn >= 0) {
        const BnFold f = fold_bn(weights, g, nodes[grp.bn]);
        for (int k = 0; k < K; ++k)
          shift[k] = f.shift[k] + shift[k] * f.scale[k], scale[k] = f.scale[k];
      }
      std::vector<float> scaled(w.size()), bias(K);
      const size_t per_k = size_t(C) * R * S;
      for (int k = 0; k < K; ++k) {
        bias[k] = float(shift[k]);
        for (size_t i = 0; i < per_k; ++i)
          scaled[k * per_k + i] = float(double(w[k * per_k + i]) * scale[k]);
      }
      std::vector<float> krsc = nchw_to_nhwc(scaled, {K, C, R, S});  // OIHW to KRSC
      // The image's conv only: a narrow input elsewhere (none in the zoo) is left as it is.
      const bool reads_image = alias_source(g, n.inputs[0]) == g.input_id();
      const int Cp = opt.pad_channels && fold_of[gi] < 0 && reads_image
                         ? padded_channels(C, n.groups, opt.precision)
                         : 0;
      if (Cp > 0) {  // zero weights for the zero channels
        std::vector<float> wide(size_t(K) * R * S * Cp, 0.f);
        for (size_t row = 0; row < size_t(K) * R * S; ++row)
          std::copy(krsc.begin() + row * C, krsc.begin() + (row + 1) * C, wide.begin() + row * Cp);
        krsc.swap(wide);
        pad_buf[gi] =
            arena_.add_activation(size_t(N) * in.h * in.w * Cp * esize, step_of[gi], step_of[gi]);
        pad_to[gi] = Cp;
      }
      wbuf[gi] = add_weights(krsc);
      bbuf[gi] = add_weights(bias);
    } else if (grp.kind == OpKind::Linear) {
      std::vector<float> w = tensor_of(weights, g, n, 0);
      // A flatten of C x H x W in NHWC storage reads (h, w, c); PyTorch's columns are (c, h, w).
      const Dims pre = nodes[alias_source(g, n.inputs[0])].out;
      if (pre.h * pre.w > 1) w = nchw_to_nhwc(w, {n.out.c, pre.c, pre.h, pre.w});
      if (n.weight_gain != 1.f)  // StyleGAN's equalized learning rate
        for (float& v : w) v = float(double(v) * n.weight_gain);
      wbuf[gi] = add_weights(w);
      if (n.bias) {
        std::vector<float> b = tensor_of(weights, g, n, 1);
        for (float& v : b) v = float(double(v) * n.bias_gain);
        bbuf[gi] = add_weights(b);
      }
    } else if (grp.kind == OpKind::Const) {
      const int C = n.out.c;
      wbuf[gi] = add_weights(nchw_to_nhwc(tensor_of(weights, g, n, 0), {1, C, n.out.h, n.out.w}));
    } else if (grp.kind == OpKind::FirUpsample) {
      wbuf[gi] = stylegan_fir();
      const Dims in = batched(nodes[n.inputs[0]].out, N);
      mc[gi].up_tmp =
          arena_.add_activation(size_t(separable_up_tmp(in, upsample2d_spec(4)).numel()) * esize,
                                step_of[gi], step_of[gi]);
    } else if (grp.kind == OpKind::ModConv) {
      const Dims in = nodes[n.inputs[0]].out;
      const int K = n.out.c, C = in.c, R = n.kernel;
      std::vector<float> w = tensor_of(weights, g, n, 0);
      // A demodulated weight's scale cancels: divided by sqrt(C R R), as NVlabs rescales it for
      // fp16, so the conv's output stays in fp16's range.
      if (n.demodulate)
        for (float& v : w) v = float(double(v) / std::sqrt(double(C) * R * R));
      std::vector<float> wsq(size_t(K) * C, 0.f);
      for (size_t i = 0; i < w.size(); ++i) wsq[i / (R * R)] += w[i] * w[i];
      if (n.up > 1) {  // conv2d_resample: a true convolution after the up-sampling
        std::vector<float> f(w.size());
        for (int kc = 0; kc < K * C; ++kc)
          for (int a = 0; a < R; ++a)
            for (int b = 0; b < R; ++b)
              f[(size_t(kc) * R + a) * R + b] = w[(size_t(kc) * R + (R - 1 - a)) * R + (R - 1 - b)];
        w = f;
        mc[gi].fir = stylegan_fir();
      }
      wbuf[gi] = add_weights(nchw_to_nhwc(w, {K, C, R, R}));
      bbuf[gi] = add_f32(tensor_of(weights, g, n, 1));
      mc[gi].wsq = add_f32(wsq);
      mc[gi].zeros = add_weights(std::vector<float>(size_t(K), 0.f));
      mc[gi].affine = add_f32(tensor_of(weights, g, n, 2));
      mc[gi].affine_b = add_f32(tensor_of(weights, g, n, 3));
      if (n.params.size() > 4) {
        mc[gi].noise_strength = tensor_of(weights, g, n, 4).at(0);
        auto it = weights.find(n.name + ".noise_const");
        if (it == weights.end())
          throw UserError("weights have no tensor '" + n.name + ".noise_const'");
        mc[gi].noise = add_f32(it->second);
      }
      const int step = step_of[gi];
      mc[gi].xs = arena_.add_activation(size_t(batched(in, N).numel()) * esize, step, step);
      if (n.up > 1) {
        const Dims u{N, C, in.h * 2 + 2, in.w * 2 + 2};
        mc[gi].up = arena_.add_activation(size_t(u.numel()) * esize, step, step);
        mc[gi].up_tmp = arena_.add_activation(
            size_t(separable_up_tmp(batched(in, N), modconv_up_spec()).numel()) * esize, step,
            step);
      }
      mc[gi].styles = arena_.add_weights(size_t(N) * C * sizeof(float));
      mc[gi].d = arena_.add_weights(size_t(N) * K * sizeof(float));
    } else if (grp.kind == OpKind::FourierInput) {
      const int C = n.out.c, step = step_of[gi];
      std::vector<float> w = tensor_of(weights, g, n, 0);
      for (float& v : w) v = float(double(v) / std::sqrt(double(C)));
      wbuf[gi] = add_weights(w);  // [C][C] is the 1x1 conv's KRSC
      sg[gi].affine = add_f32(tensor_of(weights, g, n, 1));
      sg[gi].affine_b = add_f32(tensor_of(weights, g, n, 2));
      sg[gi].transform = add_f32(buffer_of(weights, n.name + ".transform"));
      sg[gi].freqs = add_f32(buffer_of(weights, n.name + ".freqs"));
      sg[gi].phases = add_f32(buffer_of(weights, n.name + ".phases"));
      sg[gi].zeros = add_weights(std::vector<float>(size_t(C), 0.f));
      sg[gi].t = arena_.add_weights(size_t(N) * 4 * sizeof(float));
      sg[gi].fp = arena_.add_weights(size_t(N) * C * 4 * sizeof(float));
      sg[gi].features =
          arena_.add_activation(size_t(batched(n.out, N).numel()) * esize, step, step);
    } else if (grp.kind == OpKind::ClassEmbed) {
      wbuf[gi] = add_f32(tensor_of(weights, g, n, 0));   // embed
      w2buf[gi] = add_f32(tensor_of(weights, g, n, 1));  // embed_proj
      bbuf[gi] = add_f32(tensor_of(weights, g, n, 2));
    } else if (grp.kind == OpKind::FilteredModConv) {
      const Sg3Spec& f = n.sg3;
      if (f.radial)
        throw UserError(n.name + ": StyleGAN3-R's radial filters have no kernel here (only -T)");
      const Dims in = nodes[n.inputs[0]].out;
      const int K = n.out.c, C = in.c, R = n.kernel, step = step_of[gi];
      std::vector<float> w = tensor_of(weights, g, n, 0);
      const size_t per_k = size_t(C) * R * R;
      if (!f.torgb)  // modulated_conv2d: w * rsqrt(mean(w^2)) per output channel
        for (int k = 0; k < K; ++k) {
          double ms = 0;
          for (size_t i = 0; i < per_k; ++i) ms += double(w[k * per_k + i]) * w[k * per_k + i];
          const double r = 1.0 / std::sqrt(ms / double(per_k));
          for (size_t i = 0; i < per_k; ++i) w[k * per_k + i] = float(w[k * per_k + i] * r);
        }
      std::vector<float> wsq(size_t(K) * C, 0.f);
      for (size_t i = 0; i < w.size(); ++i) wsq[i / (R * R)] += w[i] * w[i];
      // The input gain rsqrt(magnitude_ema) scales the weight after the demodulation.
      const double ema = buffer_of(weights, n.name + ".magnitude_ema").at(0);
      if (!(ema > 0))
        throw UserError(n.name + ".magnitude_ema is " + std::to_string(ema) +
                        "; the input gain rsqrt(magnitude_ema) needs it positive");
      for (float& v : w) v = float(double(v) / std::sqrt(ema));
      wbuf[gi] = add_weights(nchw_to_nhwc(w, {K, C, R, R}));
      bbuf[gi] = add_f32(tensor_of(weights, g, n, 1));
      sg[gi].wsq = add_f32(wsq);
      sg[gi].affine = add_f32(tensor_of(weights, g, n, 2));
      sg[gi].affine_b = add_f32(tensor_of(weights, g, n, 3));
      sg[gi].zeros = add_weights(std::vector<float>(size_t(K), 0.f));
      sg[gi].styles = arena_.add_weights(size_t(N) * C * sizeof(float));
      sg[gi].d = arena_.add_weights(size_t(N) * K * sizeof(float));
      sg[gi].xs = arena_.add_activation(size_t(batched(in, N).numel()) * esize, step, step);
      Dims d{N, K, in.h + R - 1, in.w + R - 1};
      sg[gi].conv = arena_.add_activation(size_t(d.numel()) * esize, step, step);
      // The filters, designed here (design_lowpass_filter; a weights file's up_filter and
      // down_filter buffers are not read).
      auto taps = [&](int n_taps, double cutoff, double width) {
        if (n_taps <= 1) return -1;
        const std::vector<double> t = design_lowpass_filter(n_taps, cutoff, width, f.fs);
        return add_f32(std::vector<float>(t.begin(), t.end()));
      };
      const int fu = taps(f.up_taps, f.up_cutoff, f.up_width);
      const int fd = taps(f.down_taps, f.down_cutoff, f.down_width);
      FilteredLreluSpec fl;
      fl.up = f.up, fl.down = f.down;
      fl.pad_x0 = fl.pad_y0 = f.pad_lo, fl.pad_x1 = fl.pad_y1 = f.pad_hi;
      fl.slope = f.torgb ? 1.f : 0.2f;
      fl.gain = f.torgb ? 1.f : float(std::sqrt(2.0));
      fl.clamp = n.clamp, fl.out_scale = f.out_scale;
      sg[gi].passes = filtered_lrelu_passes(fl, f.up_taps, f.down_taps);
      for (size_t i = 0; i < sg[gi].passes.size(); ++i) {
        const Fir1dPass& p = sg[gi].passes[i];
        sg[gi].taps.push_back(p.taps == 1 ? -1 : p.down > 1 ? fd : fu);
        d = p.out_dims(d);
        if (i + 1 < sg[gi].passes.size())
          sg[gi].tmp.push_back(arena_.add_activation(size_t(d.numel()) * esize, step, step));
      }
      if (d.h != n.out.h || d.w != n.out.w)
        throw std::logic_error("compile: " + n.name + "'s filtered_lrelu gives " + d.str());
    } else if (grp.kind == OpKind::BatchNorm) {
      const BnFold f = fold_bn(weights, g, n);
      sbuf[gi] = add_weights(std::vector<float>(f.scale.begin(), f.scale.end()));
      bbuf[gi] = add_weights(std::vector<float>(f.shift.begin(), f.shift.end()));
    } else if (grp.kind == OpKind::Scale) {  // squeeze-excitation; [out, in, 1, 1] is [out, in]
      const Node& fc1 = nodes[grp.se_fc1];
      const Node& fc2 = nodes[grp.se_fc2];
      wbuf[gi] = add_f32(tensor_of(weights, g, fc1, 0));
      bbuf[gi] = add_f32(tensor_of(weights, g, fc1, 1));
      w2buf[gi] = add_f32(tensor_of(weights, g, fc2, 0));
      b2buf[gi] = add_f32(tensor_of(weights, g, fc2, 1));
      SeSpec se;
      se.x = batched(nodes[grp.in[0]].out, N);
      se.squeeze = fc1.out.c;
      se_scratch[gi] = arena_.add_weights(se_scratch_bytes(se));  // persistent: zeroed once
      if (gate_only[gi]) gate_buf[gi] = arena_.add_weights(size_t(N) * se.x.c * sizeof(float));
    }
    if (fold_of[gi] >= 0) {  // the conv's weights with the gates folded in, rewritten each run
      const Node& c = nodes[grp.head];
      fold_buf[gi] = arena_.add_weights(size_t(c.out.c) * nodes[grp.in[0]].out.c * esize);
    }
  }

  arena_.plan();
  arena_.allocate();
  for (const PendingUpload& u : uploads)
    CNN_CHECK_CUDA(
        cudaMemcpy(arena_.ptr(u.buffer), u.bytes.data(), u.bytes.size(), cudaMemcpyHostToDevice));
  for (int id : se_scratch)
    if (id >= 0) CNN_CHECK_CUDA(cudaMemset(arena_.ptr(id), 0, arena_.size(id)));

  // 4. The ops, bound to their buffers.
  auto ptr = [&](int node) -> void* {
    const ValueView v = view(node);
    return static_cast<char*>(arena_.ptr(buffer[v.root])) + size_t(v.offset) * esize;
  };
  auto ld_of = [&](int node) { return view(node).ld; };
  auto wptr = [&](int id) -> void* { return id >= 0 ? arena_.ptr(id) : nullptr; };
  auto fptr = [&](int id) { return static_cast<const float*>(wptr(id)); };
  for (int gi : order) {
    const OpGroup& grp = groups[gi];
    const Node& n = nodes[grp.head];
    const std::string name =
        n.name.empty() ? std::string(op_kind_name(n.kind)) + "#" + std::to_string(grp.head)
                       : n.name;
    void* y = ptr(grp.anchor);
    const Dims out = batched(nodes[grp.anchor].out, N);
    auto packed = [&](int node) {  // through aliases: a flatten's C is its input's C*H*W
      if (ld_of(node) != nodes[alias_source(g, node)].out.c)
        throw std::logic_error("compile: " + name + " reads a concat slice");
    };
    for (int v : grp.in)
      if (grp.kind != OpKind::Concat) packed(v);
    // The group's work and traffic for the breakdown (whole batch): 2 x the MACs of its convs
    // and linears; its inputs, its output and its weights, each once.
    const size_t first_op = ops_.size();
    double group_flops = 0, group_bytes = double(out.numel()) * esize;
    for (int v : grp.in) group_bytes += double(batched(nodes[v].out, N).numel()) * esize;
    for (int node : {grp.head, grp.se_fc1, grp.se_fc2}) {
      if (node < 0) continue;
      group_flops += 2.0 * double(g.node_macs(node)) * N;
      for (int pi : nodes[node].params) group_bytes += double(g.params()[pi].numel()) * esize;
    }
    switch (grp.kind) {
      case OpKind::Conv: {
        ConvSpec s;
        s.name = name;
        s.x = batched(nodes[n.inputs[0]].out, N);
        s.y = out;
        s.kernel = n.kernel, s.kernel_w = n.kernel_w, s.stride = n.stride;
        s.pad = n.pad, s.pad_w = n.pad_w, s.dilation = n.dilation;
        s.groups = n.groups;
        s.precision = opt.precision;
        s.residual = grp.residual >= 0;
        s.residual_after_act = grp.residual_after_act;
        s.act = act_of(grp.act);
        s.ld_y = ld_of(grp.anchor);
        const bool folded = fold_of[gi] >= 0;
        ConvBuffers b{ptr(folded ? grp.in[0] : n.inputs[0]),
                      folded ? wptr(fold_buf[gi]) : wptr(wbuf[gi]), wptr(bbuf[gi]),
                      s.residual ? ptr(grp.residual) : nullptr, y};
        // The image's conv, padded: our stem kernel beside the pad op and cuDNN's conv, where
        // --stem and the engine mode ask for it (StemConvOp runs the pad itself when cuDNN's
        // path wins).
        if (pad_to[gi] > 0 && !folded &&
            (opt.stem == StemChoice::Cnnbench ||
             (opt.stem == StemChoice::Auto && opt.engine == EngineMode::Autotune))) {
          ConvSpec wide = s;
          wide.x.c = pad_to[gi];
          if (stem_eligible(wide, s.x.c) && stem_aligned(b.x, b)) {
            const void* image = b.x;
            ConvBuffers bw = b;
            bw.x = arena_.ptr(pad_buf[gi]);
            ops_.push_back(std::make_unique<StemConvOp>(wide, bw, image, s.x.c, opt.stem));
            break;
          }
        }
        if (pad_to[gi] > 0) {  // the conv reads a copy with zero channels up to pad_to
          const int C = s.x.c, Cp = pad_to[gi];
          const int64_t rows = int64_t(s.x.n) * s.x.h * s.x.w;
          void* wide = arena_.ptr(pad_buf[gi]);
          const void* narrow = b.x;
          Dims wd = s.x;
          wd.c = Cp;
          ops_.push_back(std::make_unique<KernelOp>(
              name + ".pad_channels",
              "pad channels " + std::to_string(C) + "->" + std::to_string(Cp), wd, t, wide,
              [=](cudaStream_t st) { launch_pad_channels(t, wide, Cp, narrow, C, rows, st); }));
          s.x.c = Cp;
          b.x = wide;
        }
        if (folded)
          ops_.push_back(std::make_unique<SeFoldOp>(name + ".se_fold", t, wptr(wbuf[gi]),
                                                    fptr(gate_buf[fold_of[gi]]), wptr(fold_buf[gi]),
                                                    n.out.c, nodes[grp.in[0]].out.c));
        // Auto under heuristics takes cuDNN: its engine beat ours on every fp16 layer of
        // EfficientNet-B0..B7 at batch 1 in call 15 (3.3 against 5.0 us on B0's first).
        const bool ours =
            opt.depthwise == DepthwiseChoice::Cnnbench ||
            (opt.depthwise == DepthwiseChoice::Auto && opt.engine == EngineMode::Autotune);
        if (!folded && ours && depthwise_eligible(s))
          ops_.push_back(std::make_unique<DepthwiseOp>(s, b, opt.depthwise));
        else
          ops_.push_back(std::make_unique<ConvOp>(s, b));
        break;
      }
      case OpKind::Linear: {
        LinearSpec s;
        s.name = name;
        s.batch = N;
        s.in_features = nodes[n.inputs[0]].out.c;
        s.out_features = n.out.c;
        s.precision = opt.precision;
        if (grp.act != OpKind::Input && grp.act != OpKind::ReLU)
          throw std::logic_error("compile: linear takes ReLU only");
        s.relu = grp.act == OpKind::ReLU;
        ops_.push_back(
            std::make_unique<LinearOp>(s, ptr(n.inputs[0]), wptr(wbuf[gi]), wptr(bbuf[gi]), y));
        break;
      }
      case OpKind::MaxPool:
      case OpKind::AvgPool:
      case OpKind::GlobalAvgPool:
      case OpKind::AdaptiveAvgPool: {
        PoolSpec s;
        s.x = batched(nodes[n.inputs[0]].out, N);
        s.y = out;
        s.kernel = n.kernel, s.stride = n.stride, s.pad = n.pad;
        s.count_include_pad = n.count_include_pad;
        s.ld_x = ld_of(n.inputs[0]), s.ld_y = ld_of(grp.anchor);
        ops_.push_back(std::make_unique<PoolOp>(name, grp.kind, t, s, ptr(n.inputs[0]), y));
        break;
      }
      case OpKind::Upsample:
        ops_.push_back(std::make_unique<UpsampleOp>(name, t, batched(nodes[n.inputs[0]].out, N),
                                                    n.stride, ld_of(grp.anchor), ptr(n.inputs[0]),
                                                    y));
        break;
      case OpKind::LRN: {
        LrnSpec s;
        s.x = out;
        s.size = n.lrn_size, s.alpha = n.lrn_alpha, s.beta = n.lrn_beta, s.k = n.lrn_k;
        s.ld_x = ld_of(n.inputs[0]), s.ld_y = ld_of(grp.anchor);
        ops_.push_back(std::make_unique<LrnOp>(name, t, s, ptr(n.inputs[0]), y));
        break;
      }
      case OpKind::Scale: {
        SeSpec s;
        s.x = out;
        s.squeeze = nodes[grp.se_fc1].out.c;
        const std::string se_name =
            name.find("avgpool") != std::string::npos ? name.substr(0, name.rfind('.')) : name;
        ops_.push_back(std::make_unique<SeOp>(
            se_name, t, s, ptr(grp.in[0]), fptr(wbuf[gi]), fptr(bbuf[gi]), fptr(w2buf[gi]),
            fptr(b2buf[gi]), wptr(se_scratch[gi]), y,
            gate_only[gi] ? static_cast<float*>(wptr(gate_buf[gi])) : nullptr));
        break;
      }
      case OpKind::Concat: {
        std::vector<ConcatCopyOp::Copy> copies;
        int offset = 0;
        for (int v : n.inputs) {
          const int c = nodes[v].out.c;
          if (std::find(grp.copies.begin(), grp.copies.end(), v) != grp.copies.end()) {
            packed(v);
            copies.push_back({ptr(v), c, static_cast<char*>(y) + size_t(offset) * esize});
          }
          offset += c;
        }
        ops_.push_back(std::make_unique<ConcatCopyOp>(name, t, int64_t(out.n) * out.h * out.w,
                                                      ld_of(grp.anchor), std::move(copies)));
        break;
      }
      case OpKind::BatchNorm:
        ops_.push_back(std::make_unique<EpilogueOp>(name, op_label("batchnorm", grp.act), t, out,
                                                    ptr(n.inputs[0]), wptr(sbuf[gi]),
                                                    wptr(bbuf[gi]), nullptr, act_of(grp.act), y));
        break;
      case OpKind::Add:
        ops_.push_back(std::make_unique<EpilogueOp>(name, op_label("add", grp.act), t, out,
                                                    ptr(n.inputs[0]), nullptr, nullptr,
                                                    ptr(n.inputs[1]), act_of(grp.act), y));
        break;
      case OpKind::ReLU:
      case OpKind::SiLU:
      case OpKind::Sigmoid:
        ops_.push_back(std::make_unique<EpilogueOp>(name, op_kind_name(grp.kind), t, out,
                                                    ptr(n.inputs[0]), nullptr, nullptr, nullptr,
                                                    act_of(grp.kind), y));
        break;
      case OpKind::Normalize2ndMoment: {
        const void* x = ptr(n.inputs[0]);
        const int c = out.c * out.h * out.w;
        ops_.push_back(std::make_unique<KernelOp>(
            name, "normalize_2nd_moment", out, t, y,
            [=](cudaStream_t s) { launch_normalize_2nd_moment(x, y, N, c, t, s); }));
        break;
      }
      case OpKind::LeakyReLU: {
        const void* x = ptr(n.inputs[0]);
        ops_.push_back(std::make_unique<KernelOp>(name, "lrelu", out, t, y, [=](cudaStream_t s) {
          launch_bias_act(x, y, out, t, nullptr, nullptr, {}, s);
        }));
        break;
      }
      case OpKind::Const: {
        const void* k = wptr(wbuf[gi]);
        const size_t bytes = size_t(out.c) * out.h * out.w * esize;
        ops_.push_back(std::make_unique<KernelOp>(name, "const", out, t, y, [=](cudaStream_t s) {
          for (int i = 0; i < N; ++i)
            CNN_CHECK_CUDA(cudaMemcpyAsync(static_cast<char*>(y) + i * bytes, k, bytes,
                                           cudaMemcpyDeviceToDevice, s));
        }));
        break;
      }
      case OpKind::FirUpsample: {
        const void* x = ptr(n.inputs[0]);
        const Dims in = batched(nodes[n.inputs[0]].out, N);
        const float* f = fptr(wbuf[gi]);
        void* tmp = arena_.ptr(mc[gi].up_tmp);
        ops_.push_back(
            std::make_unique<KernelOp>(name, "upfirdn2d up2", out, t, y, [=](cudaStream_t s) {
              launch_upfirdn2d_separable(x, in, t, f, upsample2d_spec(4), tmp, y, s);
            }));
        break;
      }
      case OpKind::ModConv: {
        const Dims in = batched(nodes[n.inputs[0]].out, N);
        ConvSpec s;
        s.name = name + ".conv";
        s.x = n.up > 1 ? Dims{N, in.c, in.h * 2 + 2, in.w * 2 + 2} : in;
        s.y = out;
        s.kernel = s.kernel_w = n.kernel;
        s.pad = s.pad_w = n.up > 1 ? 0 : n.kernel / 2;
        s.precision = opt.precision;
        ModConvOp::Buffers b{};
        b.x = ptr(n.inputs[0]);
        b.w = ptr(n.inputs[1]);
        b.xs = arena_.ptr(mc[gi].xs);
        b.up = mc[gi].up >= 0 ? arena_.ptr(mc[gi].up) : nullptr;
        b.up_tmp = mc[gi].up_tmp >= 0 ? arena_.ptr(mc[gi].up_tmp) : nullptr;
        b.styles = static_cast<float*>(arena_.ptr(mc[gi].styles));
        b.d = static_cast<float*>(arena_.ptr(mc[gi].d));
        b.weight = wptr(wbuf[gi]);
        b.wsq = fptr(mc[gi].wsq);
        b.affine = fptr(mc[gi].affine);
        b.affine_b = fptr(mc[gi].affine_b);
        b.bias = fptr(bbuf[gi]);
        b.noise = mc[gi].noise >= 0 ? fptr(mc[gi].noise) : nullptr;
        b.fir = mc[gi].fir >= 0 ? fptr(mc[gi].fir) : nullptr;
        b.zeros = wptr(mc[gi].zeros);
        b.y = y;
        BiasActSpec act;
        if (!n.demodulate) act.slope = 1.f, act.gain = 1.f;  // ToRGB: linear
        act.clamp = n.clamp;
        act.noise_strength = mc[gi].noise_strength;
        ops_.push_back(std::make_unique<ModConvOp>(name, t, s, in, nodes[n.inputs[1]].out.c, n.up,
                                                   n.demodulate, n.weight_gain, n.bias_gain,
                                                   n.style_gain, act, b));
        break;
      }
      case OpKind::FourierInput: {
        ConvSpec s;
        s.name = name + ".mix";
        s.x = out;
        s.y = out;
        s.precision = opt.precision;
        FourierInputOp::Buffers b{};
        b.w = ptr(n.inputs[0]);
        b.affine = fptr(sg[gi].affine);
        b.affine_b = fptr(sg[gi].affine_b);
        b.transform = fptr(sg[gi].transform);
        b.freqs = fptr(sg[gi].freqs);
        b.phases = fptr(sg[gi].phases);
        b.t = static_cast<float*>(arena_.ptr(sg[gi].t));
        b.fp = static_cast<float*>(arena_.ptr(sg[gi].fp));
        b.features = arena_.ptr(sg[gi].features);
        b.weight = wptr(wbuf[gi]);
        b.zeros = wptr(sg[gi].zeros);
        b.y = y;
        ops_.push_back(std::make_unique<FourierInputOp>(name, t, s, nodes[n.inputs[0]].out.c,
                                                        n.weight_gain, float(n.sg3.fs),
                                                        float(n.sg3.up_cutoff), b));
        break;
      }
      case OpKind::ClassEmbed: {
        const void* x = ptr(n.inputs[0]);
        const int z_dim = out.c / 2, classes = nodes[n.inputs[0]].out.c - z_dim;
        const int embed_dim = int(g.params()[size_t(n.params[0])].shape[1]);
        const float *e = fptr(wbuf[gi]), *pw = fptr(w2buf[gi]), *pb = fptr(bbuf[gi]);
        const float wg = n.weight_gain, bg = n.bias_gain;
        ops_.push_back(
            std::make_unique<KernelOp>(name, "class_embed", out, t, y, [=](cudaStream_t s) {
              launch_class_embed(x, t, N, z_dim, classes, e, embed_dim, pw, pb, wg, bg, y, s);
            }));
        break;
      }
      case OpKind::FilteredModConv: {
        const Dims in = batched(nodes[n.inputs[0]].out, N);
        ConvSpec s;
        s.name = name + ".conv";
        s.x = in;
        s.y = Dims{N, out.c, in.h + n.kernel - 1, in.w + n.kernel - 1};
        s.kernel = s.kernel_w = n.kernel;
        s.pad = s.pad_w = n.kernel - 1;
        s.precision = opt.precision;
        FilteredModConvOp::Buffers b{};
        b.x = ptr(n.inputs[0]);
        b.w = ptr(n.inputs[1]);
        b.xs = arena_.ptr(sg[gi].xs);
        b.conv = arena_.ptr(sg[gi].conv);
        b.styles = static_cast<float*>(arena_.ptr(sg[gi].styles));
        b.d = static_cast<float*>(arena_.ptr(sg[gi].d));
        b.weight = wptr(wbuf[gi]);
        b.wsq = fptr(sg[gi].wsq);
        b.affine = fptr(sg[gi].affine);
        b.affine_b = fptr(sg[gi].affine_b);
        b.bias = fptr(bbuf[gi]);
        for (int id : sg[gi].taps) b.taps.push_back(fptr(id));
        for (int id : sg[gi].tmp) b.tmp.push_back(arena_.ptr(id));
        b.zeros = wptr(sg[gi].zeros);
        b.y = y;
        ops_.push_back(std::make_unique<FilteredModConvOp>(name, t, s, in, nodes[n.inputs[1]].out.c,
                                                           !n.sg3.torgb, n.weight_gain,
                                                           n.style_gain, sg[gi].passes, b));
        break;
      }
      default:
        throw std::logic_error(std::string("compile: no op for ") + op_kind_name(grp.kind));
    }
    for (size_t k = first_op; k < ops_.size(); ++k) {  // a group's helper ops (se_fold) count 0
      OpCost cost = k + 1 == ops_.size() ? OpCost{group_flops, group_bytes} : OpCost{};
      if (k + 1 < ops_.size() && grp.kind == OpKind::Conv && pad_to[gi] > 0) {  // the padding
        const double rows = double(N) * nodes[n.inputs[0]].out.h * nodes[n.inputs[0]].out.w;
        cost.bytes = rows * (nodes[n.inputs[0]].out.c + pad_to[gi]) * esize;
      }
      op_costs_.push_back(cost);
    }
    if (ld_of(grp.anchor) != nodes[grp.anchor].out.c && grp.kind != OpKind::Conv &&
        grp.kind != OpKind::MaxPool && grp.kind != OpKind::AvgPool && grp.kind != OpKind::Concat &&
        grp.kind != OpKind::Upsample)
      throw std::logic_error("compile: " + name + " cannot write a concat slice");
  }

  // 5. Engines. Autotune runs layer by layer on a real input, so each layer is timed on the data
  // it will see.
  // The input: random_uniform(opt.input_seed, "input", ...) in [-1, 1), written on the device.
  fill_uniform_nhwc(arena_.ptr(input_buf_), random_stream_state(opt.input_seed, "input"),
                    input_dims_, storage_type(opt_.precision), -1.f, 1.f, ctx_.stream);
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  TuneScratch scratch;
  scratch.bytes = opt.tune_scratch_bytes;
  CNN_CHECK_CUDA(cudaMalloc(&scratch.ptr, scratch.bytes));
  try {
    std::vector<const ConvOp*> convs;
    for (auto& op : ops_) {
      if (auto* c = dynamic_cast<const ConvOp*>(op.get())) convs.push_back(c);
      if (auto* d = dynamic_cast<const DepthwiseOp*>(op.get()))
        if (const ConvOp* c = d->cudnn_conv(opt.engine)) convs.push_back(c);
      if (auto* st = dynamic_cast<const StemConvOp*>(op.get()))
        if (const ConvOp* c = st->cudnn_conv(opt.engine)) convs.push_back(c);
    }
    prefetch_conv_plans(ctx, convs, opt.engine, opt.top_k, scratch.bytes);
    for (auto& op : ops_) {
      op->prepare(ctx, opt.engine, opt.top_k, scratch);
      op->run(ctx.stream);  // the next op is prepared (and checked) on real data
    }
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    ctx.prefetched.clear();
  } catch (...) {
    ctx.prefetched.clear();
    cudaFree(scratch.ptr);
    throw;
  }
  CNN_CHECK_CUDA(cudaFree(scratch.ptr));
  for (auto& op : ops_) arena_.request_workspace(op->workspace_bytes());
  arena_.allocate_workspace();
  for (auto& op : ops_) op->bind_workspace(arena_.workspace(), arena_.workspace_bytes());
  compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Model::~Model() {
  ctx_.plans.clear();
}

std::vector<double> Model::time_each_op(int runs) {
  forward(ctx_.stream);  // every input the ops read is written once
  std::vector<double> us;
  for (auto& op : ops_)
    us.push_back(graph_us([&](cudaStream_t s) { op->run(s); }, ctx_.stream, runs));
  return us;
}

void Model::forward(cudaStream_t stream) {
  for (auto& op : ops_) {
    nvtx_push(op->record().name.c_str());
    op->run(stream);
    nvtx_pop();
  }
}

std::vector<std::pair<std::string, double>> Model::verify_layers(int samples, uint64_t seed,
                                                                 bool graph) {
  std::vector<std::pair<std::string, double>> out;
  for (auto& op : ops_) {
    // Poisoned first (NaN), so an output element left unwritten fails.
    op->poison_output(ctx_.stream);
    if (graph) {  // the op alone, captured and replayed
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      CNN_CHECK_CUDA(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
      op->run(ctx_.stream);
      CNN_CHECK_CUDA(cudaStreamEndCapture(ctx_.stream, &g));
      CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
      CNN_CHECK_CUDA(cudaGraphLaunch(exec, ctx_.stream));
      CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(g);
    } else {
      op->run(ctx_.stream);
    }
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
    const double err = op->verify(samples, seed++);
    if (err >= 0) out.push_back({op->record().name, err});
  }
  return out;
}

std::string Model::ban_first_departing_engine() {
  const auto prefixes = graph_prefix_check(true);
  if (prefixes.empty()) return "";
  const auto& [index, err] = prefixes.back();
  if (err <= 1e-3) return "";
  const std::string tag = ops_[index]->ban_engine(ctx_);
  return tag.empty() ? "" : ops_[index]->record().name + ": " + tag;
}

std::vector<std::pair<std::string, double>> Model::graph_prefix_check() {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [index, err] : graph_prefix_check(false))
    out.push_back({ops_[index]->record().name, err});
  return out;
}

std::vector<std::pair<size_t, double>> Model::graph_prefix_check(bool stop_at_first) {
  std::vector<std::pair<size_t, double>> out;
  const DType t = storage_type(opt_.precision);
  for (size_t k = 1; k <= ops_.size(); ++k) {
    Op& last = *ops_[k - 1];
    if (!last.output()) continue;
    const size_t count = last.output_bytes() / dtype_size(t);
    for (size_t i = 0; i < k; ++i) ops_[i]->run(ctx_.stream);
    const std::vector<float> eager = download(last.output(), count, t);
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    CNN_CHECK_CUDA(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
    for (size_t i = 0; i < k; ++i) ops_[i]->run(ctx_.stream);
    CNN_CHECK_CUDA(cudaStreamEndCapture(ctx_.stream, &g));
    if (ctx_.graph_edges == GraphEdges::Full) make_edges_full(g);
    CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    if (arena_.workspace())
      CNN_CHECK_CUDA(
          cudaMemsetAsync(arena_.workspace(), 0x7F, arena_.workspace_bytes(), ctx_.stream));
    last.poison_output(ctx_.stream);
    CNN_CHECK_CUDA(cudaGraphLaunch(exec, ctx_.stream));
    const std::vector<float> replayed = download(last.output(), count, t);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    const double err = relative_l2(replayed, eager);
    out.push_back({k - 1, err});
    if (stop_at_first && !(err <= 1e-3)) break;
  }
  return out;
}

void Model::set_input(const std::vector<float>& nchw) {
  upload_nchw_as_nhwc(arena_.ptr(input_buf_), nchw, input_dims_, storage_type(opt_.precision));
}

const void* Model::output_ptr(size_t k) const {
  return arena_.ptr(outputs_.at(k).buf);
}

std::vector<float> Model::output(size_t k) const {
  const Dims d = outputs_.at(k).dims;
  const DType t = storage_type(opt_.precision);
  std::vector<uint8_t> bytes(size_t(d.numel()) * dtype_size(t));
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  CNN_CHECK_CUDA(cudaMemcpy(bytes.data(), output_ptr(k), bytes.size(), cudaMemcpyDeviceToHost));
  const std::vector<float> nhwc = from_storage(bytes, t);
  return d.h * d.w == 1 ? nhwc : nhwc_to_nchw(nhwc, d);
}

std::vector<LayerRecord> Model::layers() const {
  std::vector<LayerRecord> out;
  for (const auto& op : ops_) out.push_back(op->record());
  return out;
}

}  // namespace cnnbench
