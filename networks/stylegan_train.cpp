#include "networks/stylegan_train.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "harness/check.h"
#include "kernels/conv.h"
#include "kernels/conv_backward.h"
#include "kernels/fir_design.h"
#include "kernels/fourier_backward.h"
#include "kernels/mbstd.h"
#include "kernels/sg_train.h"
#include "kernels/storage.h"
#include "kernels/stylegan.h"
#include "kernels/stylegan3.h"
#include "kernels/stylegan_ref.h"
#include "kernels/train_kernels.h"
#include "networks/registry.h"

namespace cnnbench {

namespace {

constexpr float kSqrtHalf = 0.70710678f;
constexpr float kSqrt2 = 1.41421356f;

// Device memory the trainer owns, zeroed, counted.
class DeviceHeap {
 public:
  ~DeviceHeap() {
    for (void* p : ptrs_) cudaFree(p);
  }
  float* floats(size_t n) {
    void* p = nullptr;
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(float);
    CNN_CHECK_CUDA(cudaMalloc(&p, bytes));
    ptrs_.push_back(p);
    CNN_CHECK_CUDA(cudaMemset(p, 0, bytes));
    bytes_ += bytes;
    return static_cast<float*>(p);
  }
  size_t bytes() const { return bytes_; }

 private:
  std::vector<void*> ptrs_;
  size_t bytes_ = 0;
};

int64_t numel_of(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<int64_t>());
}

// A network's parameters in one flat array (so Adam and G_ema are one launch each), with their
// gradients and Adam's moments. 4-D tensors are stored KRSC (cuDNN's NHWC filters).
struct Params {
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    size_t offset = 0, count = 0;
  };
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;
  size_t total = 0;
  float *p = nullptr, *g = nullptr, *m = nullptr, *v = nullptr, *ema = nullptr;

  void add(const std::string& name, const std::vector<int64_t>& shape) {
    Entry e{name, shape, total, size_t(numel_of(shape))};
    total += (e.count + 63) / 64 * 64;
    index[name] = entries.size();
    entries.push_back(e);
  }
  const Entry& entry(const std::string& name) const {
    auto it = index.find(name);
    if (it == index.end()) throw std::logic_error("stylegan_train: no parameter " + name);
    return entries[it->second];
  }
  float* at(const std::string& name) const { return p + entry(name).offset; }
  float* grad(const std::string& name) const { return g + entry(name).offset; }
  void allocate(DeviceHeap& h, bool with_ema) {
    p = h.floats(total), g = h.floats(total), m = h.floats(total), v = h.floats(total);
    if (with_ema) ema = h.floats(total);
  }
  static Dims krsc(const Entry& e) {
    return Dims{int(e.shape[0]), int(e.shape[1]), int(e.shape[2]), int(e.shape[3])};
  }
  void upload(const HostWeights& w, const std::string& owner) {
    for (const Entry& e : entries) {
      auto it = w.find(e.name);
      if (it == w.end()) throw UserError(owner + ": no tensor " + e.name);
      if (it->second.size() != e.count)
        throw UserError(owner + ": " + e.name + " has " + std::to_string(it->second.size()) +
                        " values, not " + std::to_string(e.count));
      const std::vector<float> host =
          e.shape.size() == 4 ? nchw_to_nhwc(it->second, krsc(e)) : it->second;
      CNN_CHECK_CUDA(
          cudaMemcpy(p + e.offset, host.data(), e.count * sizeof(float), cudaMemcpyHostToDevice));
    }
    if (ema) CNN_CHECK_CUDA(cudaMemcpy(ema, p, total * sizeof(float), cudaMemcpyDeviceToDevice));
  }
  std::vector<float> download(const float* base, const Entry& e) const {
    std::vector<float> h(e.count);
    CNN_CHECK_CUDA(
        cudaMemcpy(h.data(), base + e.offset, e.count * sizeof(float), cudaMemcpyDeviceToHost));
    return e.shape.size() == 4 ? nhwc_to_nchw(h, krsc(e)) : h;
  }
};

std::vector<float> host_of(const float* p, size_t n) {
  std::vector<float> h(n);
  CNN_CHECK_CUDA(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// The ops the trainer owns, prepared together and sharing one workspace.
struct OpSet {
  std::vector<std::unique_ptr<Op>> ops;
  template <class T>
  T* add(std::unique_ptr<T> op) {
    T* raw = op.get();
    ops.push_back(std::move(op));
    return raw;
  }
  ConvOp* conv(const ConvSpec& s, const float* x, const float* w, const float* zeros, float* y) {
    return add(std::make_unique<ConvOp>(s, ConvBuffers{x, w, zeros, nullptr, y}));
  }
  ConvBackwardOp* data(const ConvSpec& s, const float* dy, const float* w, float* dx, bool acc) {
    ConvBackwardSpec b = ConvBackwardSpec::of(s);
    b.accumulate = acc;
    ConvBackwardBuffers buf;
    buf.dy = dy, buf.w = w, buf.dx = dx;
    return add(std::make_unique<ConvBackwardOp>(b, ConvGrad::Data, buf));
  }
  ConvBackwardOp* filter(const ConvSpec& s, const float* x, const float* dy, float* dw, bool acc) {
    ConvBackwardSpec b = ConvBackwardSpec::of(s);
    b.accumulate = acc;
    ConvBackwardBuffers buf;
    buf.x = x, buf.dy = dy, buf.dw = dw;
    return add(std::make_unique<ConvBackwardOp>(b, ConvGrad::Filter, buf));
  }
};

// A chain of fir1d passes and its transpose, on tensors of per-image dims `in`.
struct FirChain {
  Dims in;
  std::vector<Fir1dPass> passes;
  std::vector<const float*> taps, flipped;  // per pass (null: one tap)
  std::vector<Dims> dims;                   // dims[i]: pass i's input; dims.back(): the output
  void finish() {
    dims = {in};
    for (const Fir1dPass& p : passes) dims.push_back(p.out_dims(dims.back()));
  }
  Dims out() const { return dims.back(); }
  size_t max_tmp() const {
    size_t m = 0;
    for (const Dims& d : dims) m = std::max(m, size_t(d.numel()));
    return m;
  }
  // y from x (n images); tmp holds max_tmp() * n floats twice (ping, pong). The first pass
  // applies pre_scale [n][c] and bias where given.
  void forward(const float* x, int n, const float* pre_scale, const float* bias, float* tmp0,
               float* tmp1, float* y, cudaStream_t st) const {
    const float* cur = x;
    for (size_t i = 0; i < passes.size(); ++i) {
      float* dst = i + 1 == passes.size() ? y : (i % 2 == 0 ? tmp0 : tmp1);
      launch_fir1d(cur, batched(dims[i], n), DType::F32, taps[i], i == 0 ? pre_scale : nullptr,
                   i == 0 ? bias : nullptr, passes[i], dst, st);
      cur = dst;
    }
  }
  // dx from dy, through the transposed passes in reverse order.
  void backward(const float* dy, int n, float* tmp0, float* tmp1, float* dx,
                cudaStream_t st) const {
    const float* cur = dy;
    for (size_t k = 0; k < passes.size(); ++k) {
      const size_t i = passes.size() - 1 - k;
      const Fir1dPass q = fir1d_transposed(passes[i], passes[i].along_h ? dims[i].h : dims[i].w);
      float* dst = k + 1 == passes.size() ? dx : (k % 2 == 0 ? tmp0 : tmp1);
      launch_fir1d(cur, batched(dims[i + 1], n), DType::F32, flipped[i], nullptr, nullptr, q, dst,
                   st);
      cur = dst;
    }
  }
};

// ---- The discriminator ---------------------------------------------------------------------

// A value of D: per-image dims; x and its gradient g hold 2N images (primal, then tangent).
struct DVal {
  Dims d;
  float *x = nullptr, *g = nullptr;
  size_t per() const { return size_t(d.numel()); }
};

enum class DKind { Fir, Conv, Mbstd, Flatten, Fc };
const char* step_kind(DKind k) {
  switch (k) {
    case DKind::Fir:
      return "fir";
    case DKind::Conv:
      return "conv";
    case DKind::Mbstd:
      return "mbstd";
    case DKind::Flatten:
      return "flatten";
    case DKind::Fc:
      return "fc";
  }
  return "?";
}

struct DStep {
  DKind kind;
  std::string name;  // the module (parameters name.weight, name.bias)
  int in = -1, out = -1, z = -1;
  bool grad_in_acc = false;  // this step's input gradient adds to another step's
  // Fir
  FirChain fir;
  // Conv / Fc: the activation after (pre_gain is the weight gain), bias or not
  BiasAct act;
  bool bias = true;
  ConvSpec spec[2];                                // at N and at 2N
  float* v = nullptr;                              // the pre-activation, 2N
  ConvOp* fwd[2] = {nullptr, nullptr};             // primal half, tangent half (both at N)
  ConvBackwardOp* data[2] = {nullptr, nullptr};    // at N, at 2N
  ConvBackwardOp* filter[2] = {nullptr, nullptr};  // at N, at 2N
  const float* zeros = nullptr;
  // Fc
  int fc_in = 0, fc_out = 0;
};

struct Discriminator {
  int N = 0, R = 0;
  std::vector<DVal> vals;
  std::vector<DStep> steps;
  Params params;
  float *tmp0 = nullptr, *tmp1 = nullptr, *gtmp = nullptr, *scratch = nullptr;
  int image = 0, logits = 0;
  int group = 4;

  int add_val(const Dims& d) {
    vals.push_back(DVal{d});
    return int(vals.size()) - 1;
  }
};

// The structure of NVlabs' Discriminator (resnet): steps and values, no memory yet.
void plan_discriminator(Discriminator& D, const SgTrainOptions& o, const float* fir) {
  const int R = o.resolution;
  auto ch = [&](int res) { return std::min(o.d_channel_base / res, o.d_channel_max); };
  int x = D.image = D.add_val(Dims{1, 3, R, R});
  auto conv = [&](const std::string& name, int in, int cout, int k, int stride, int pad, bool bias,
                  BiasAct act, int z = -1) {
    const Dims di = D.vals[in].d;
    DStep s;
    s.kind = DKind::Conv;
    s.name = name, s.in = in, s.z = z, s.bias = bias, s.act = act;
    s.act.pre_gain = float(1.0 / std::sqrt(double(di.c) * k * k));
    const Dims dout{1, cout, (di.h + 2 * pad - k) / stride + 1, (di.w + 2 * pad - k) / stride + 1};
    s.out = D.add_val(dout);
    for (int b = 0; b < 2; ++b) {
      ConvSpec& c = s.spec[b];
      c.name = name;
      c.x = batched(di, D.N * (b + 1)), c.y = batched(dout, D.N * (b + 1));
      c.kernel = c.kernel_w = k, c.stride = stride, c.pad = c.pad_w = pad;
      c.precision = o.precision;
    }
    D.params.add(name + ".weight", {cout, di.c, k, k});
    if (bias) D.params.add(name + ".bias", {cout});
    D.steps.push_back(s);
    return s.out;
  };
  auto firstep = [&](int in, int down, int pad) {
    DStep s;
    s.kind = DKind::Fir, s.in = in;
    s.fir.in = D.vals[in].d;
    for (bool h : {false, true}) {
      Fir1dPass p;
      p.along_h = h, p.down = down, p.pad0 = p.pad1 = pad, p.taps = 4;
      s.fir.passes.push_back(p);
      s.fir.taps.push_back(fir), s.fir.flipped.push_back(fir);  // symmetric
    }
    s.fir.finish();
    s.out = D.add_val(s.fir.out());
    D.steps.push_back(s);
    return s.out;
  };
  BiasAct lrelu;
  lrelu.clamp = o.conv_clamp;
  BiasAct linear;
  linear.slope = 1.f, linear.gain = 1.f;
  for (int res = R; res >= 8; res /= 2) {
    const std::string b = "b" + std::to_string(res);
    const int tmp = ch(res), out = ch(res / 2);
    if (res == R) x = conv(b + ".fromrgb", x, tmp, 1, 1, 0, true, lrelu);
    // y = skip(x, gain sqrt(0.5)); x = conv1(conv0(x), gain sqrt(0.5)); x = y + x
    BiasAct skip = linear;
    skip.gain = kSqrtHalf;
    const int y = conv(b + ".skip", firstep(x, 2, 1), out, 1, 1, 0, false, skip);
    const int t0 = conv(b + ".conv0", x, tmp, 3, 1, 1, true, lrelu);
    BiasAct a1 = lrelu;
    a1.gain = kSqrt2 * kSqrtHalf, a1.clamp = o.conv_clamp * kSqrtHalf;
    x = conv(b + ".conv1", firstep(t0, 1, 2), out, 3, 2, 0, true, a1, y);
  }
  // Epilogue b4: mbstd, conv, fc, out.
  const Dims d4 = D.vals[x].d;
  {
    DStep s;
    s.kind = DKind::Mbstd, s.in = x;
    s.out = D.add_val(Dims{1, d4.c + 1, d4.h, d4.w});
    D.steps.push_back(s);
    x = s.out;
  }
  x = conv("b4.conv", x, d4.c, 3, 1, 1, true, lrelu);
  {
    DStep s;
    s.kind = DKind::Flatten, s.in = x;
    s.out = D.add_val(Dims{1, d4.c * d4.h * d4.w, 1, 1});
    D.steps.push_back(s);
    x = s.out;
  }
  auto fc = [&](const std::string& name, int in, int out, BiasAct act) {
    DStep s;
    s.kind = DKind::Fc, s.name = name, s.in = in, s.act = act;
    s.fc_in = D.vals[in].d.c, s.fc_out = out;
    s.act.pre_gain = 1.f;  // the weight gain is the fc kernel's
    s.out = D.add_val(Dims{1, out, 1, 1});
    D.params.add(name + ".weight", {out, s.fc_in});
    D.params.add(name + ".bias", {out});
    D.steps.push_back(s);
    return s.out;
  };
  BiasAct fc_lrelu;  // FullyConnectedLayer: lrelu x sqrt(2), no clamp
  x = fc("b4.fc", x, d4.c, fc_lrelu);
  D.logits = fc("b4.out", x, 1, linear);
  // Which input gradients add to another's: the backward visits steps in reverse, and the
  // first to write a value's gradient overwrites it.
  std::vector<bool> written(D.vals.size(), false);
  for (auto it = D.steps.rbegin(); it != D.steps.rend(); ++it) {
    it->grad_in_acc = written[it->in];
    written[it->in] = true;
    if (it->z >= 0) written[it->z] = true;  // z's gradient: copied from the output's
  }
}

}  // namespace

std::vector<ParamSpec> stylegan2_discriminator_params(int resolution, int channel_base,
                                                      int channel_max) {
  SgTrainOptions o;
  o.resolution = resolution, o.d_channel_base = channel_base, o.d_channel_max = channel_max;
  Discriminator D;
  D.N = 1;
  plan_discriminator(D, o, nullptr);
  std::vector<ParamSpec> out;
  for (const Params::Entry& e : D.params.entries) {
    ParamSpec p;
    p.name = e.name, p.shape = e.shape;
    p.role = e.shape.size() == 1 ? ParamRole::Bias : ParamRole::Weight;
    out.push_back(p);
  }
  return out;
}

HostWeights stylegan2_discriminator_random(int resolution, uint64_t seed, int channel_base,
                                           int channel_max) {
  HostWeights w;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const ParamSpec& p : stylegan2_discriminator_params(resolution, channel_base, channel_max)) {
    std::vector<float>& v = w[p.name];
    v.assign(size_t(p.numel()), 0.f);
    if (p.role == ParamRole::Weight)
      for (float& x : v) x = normal(rng);
  }
  return w;
}

// ---- The generator -------------------------------------------------------------------------

namespace {

struct GLayer {
  std::string name;
  bool torgb = false;
  int cin = 0, cout = 0, k = 3;
  Dims in, conv;  // per image: the input, the conv's output
  float weight_gain = 1.f, style_gain = 1.f, out_scale = 1.f;
  FirChain up, down;
  BiasAct act;
  // Device buffers (batch N): x is the previous layer's output.
  float *styles, *sn, *xs, *wp, *wsq, *dcoef, *xm, *c, *v, *a, *y, *ema, *up_f, *down_f;
  float* g_ema_mag = nullptr;  // G_ema's copy of magnitude_ema
  float *up_flip, *down_flip;
  ConvSpec spec;
  ConvOp* fwd = nullptr;
  ConvBackwardOp *data = nullptr, *filter = nullptr;
  const float* zeros = nullptr;
};

// StyleganTrainer::profile_sections: CUDA events between the steps of the passes, recorded only
// while `on`; a section's time is from the event before it to its own.
struct Sections {
  Sections() = default;
  Sections(const Sections&) = delete;  // owns its events
  Sections& operator=(const Sections&) = delete;
  bool on = false;
  std::string prefix;  // the phase
  std::vector<cudaEvent_t> events;
  std::vector<std::string> labels;  // labels[i]: the section that events[i] ends
  size_t n = 0;
  ~Sections() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
  void record(const std::string& label, cudaStream_t st) {
    if (n == events.size()) {
      cudaEvent_t e;
      CNN_CHECK_CUDA(cudaEventCreate(&e));
      events.push_back(e);
      labels.emplace_back();
    }
    labels[n] = label;
    CNN_CHECK_CUDA(cudaEventRecord(events[n], st));
    ++n;
  }
  void start(cudaStream_t st) {
    if (on) record("", st);
  }
  void end(const std::string& what, const std::string& layer, cudaStream_t st) {
    if (on) record(prefix + " " + what + (layer.empty() ? "" : " | " + layer), st);
  }
};

}  // namespace

struct StyleganTrainer::Impl {
  GpuContext& ctx;
  SgTrainOptions opt;
  DeviceHeap heap;
  OpSet ops;
  std::vector<LayerRecord> records;
  size_t workspace_limit = 0;  // the tuning scratch prepare() could allocate
  int N = 0;
  // G
  Params gp;
  std::vector<std::string> map_names;
  std::vector<float> map_wg, map_bg;
  float *z_gmain, *z_dmain, *zn, *w, *gw;
  std::vector<float*> map_h, map_a;  // per mapping layer: pre-activation, output
  float* w_avg = nullptr;
  float* ema_w_avg = nullptr;  // G_ema's copy of w_avg (NVlabs copies G's buffers each iteration)
  // the input
  std::string in_name;
  int in_c = 0, in_size = 0;
  float in_sr = 0, in_bw = 0, in_wg = 1;
  float *in_t, *in_fp, *in_feat, *in_x, *in_transform, *in_freqs, *in_phases, *in_gt, *in_gfp,
      *in_gfeat;
  ConvSpec in_spec;
  ConvOp* in_fwd = nullptr;
  ConvBackwardOp *in_data = nullptr, *in_filter = nullptr;
  std::vector<GLayer> layers;
  float *g_a, *g_b, *g_c, *gwp, *gtmp0, *gtmp1, *partials, *gw2;
  float *g_ddcoef, *g_dxs, *g_dsn, *g_dstyles, *g_dwsq;
  float* red = nullptr;  // the reductions' scratch (kReduceScratch floats)
  float magnitude_beta = 1.f;
  float* img = nullptr;  // G's output [N][R][R][3]
  // D
  Discriminator D;
  float *reals, *d_fir;
  // loss: [0] Gmain's, [1] Dmain's on the fakes, [2] on the reals. logits_saved: Dmain's
  // logits on the fakes, then on the reals (Gmain's and Dreg's are the logits value's). r1: the
  // last Dreg's penalties.
  float *loss, *logits_saved, *r1, *ones;
  // Adam
  int *g_step, *d_step;
  // Outputs of the last phase run.
  std::string phase;
  Sections sec;

  Impl(GpuContext& c, const SgTrainOptions& o) : ctx(c), opt(o), N(o.batch) {}

  float* copy(const std::vector<float>& h) {
    float* p = heap.floats(h.size());
    CNN_CHECK_CUDA(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return p;
  }

  void build_g(const HostWeights& w);
  void build_d(const HostWeights& w);
  void prepare();

  void g_forward(const float* z, bool update_emas, cudaStream_t st);
  void g_backward(cudaStream_t st);
  void d_forward(int half, const float* image, cudaStream_t st);
  void d_backward(int b, bool wgrad, cudaStream_t st);
};

void StyleganTrainer::Impl::build_g(const HostWeights& wt) {
  const Graph g = build_network("stylegan3_t", opt.resolution);
  auto tensor = [&](const std::string& name) -> const std::vector<float>& {
    auto it = wt.find(name);
    if (it == wt.end()) throw UserError("stylegan3_t training: the weights have no " + name);
    return it->second;
  };
  for (const ParamSpec& p : g.params())
    if (p.trainable) gp.add(p.name, p.shape);
  gp.allocate(heap, true);
  red = heap.floats(kReduceScratch);
  gp.upload(wt, "stylegan3_t training");
  magnitude_beta = float(std::pow(0.5, double(N) / 20000.0));
  const int wdim = 512;
  z_gmain = heap.floats(size_t(N) * wdim), z_dmain = heap.floats(size_t(N) * wdim);
  zn = heap.floats(size_t(N) * wdim), w = heap.floats(size_t(N) * wdim);
  gw = heap.floats(size_t(N) * wdim);
  w_avg = copy(tensor("mapping.w_avg"));
  ema_w_avg = copy(tensor("mapping.w_avg"));
  size_t max_act = 0, max_small = 0;
  int prev_c = 0;
  Dims prev{};
  for (const Node& n : g.nodes()) {
    if (n.kind == OpKind::Linear) {
      map_names.push_back(n.name);
      map_wg.push_back(n.weight_gain), map_bg.push_back(n.bias_gain);
      map_h.push_back(heap.floats(size_t(N) * wdim));
      map_a.push_back(heap.floats(size_t(N) * wdim));
    } else if (n.kind == OpKind::FourierInput) {
      in_name = n.name, in_c = n.out.c, in_size = n.out.h;
      in_sr = float(n.sg3.fs), in_bw = float(n.sg3.up_cutoff), in_wg = n.weight_gain;
      in_transform = copy(tensor(n.name + ".transform"));
      in_freqs = copy(tensor(n.name + ".freqs"));
      in_phases = copy(tensor(n.name + ".phases"));
      in_t = heap.floats(size_t(N) * 4), in_gt = heap.floats(size_t(N) * 4);
      in_fp = heap.floats(size_t(N) * in_c * 4), in_gfp = heap.floats(size_t(N) * in_c * 4);
      const size_t act = size_t(N) * in_c * in_size * in_size;
      in_feat = heap.floats(act), in_gfeat = heap.floats(act), in_x = heap.floats(act);
      in_spec.name = n.name;
      in_spec.x = in_spec.y = Dims{N, in_c, in_size, in_size};
      in_spec.precision = opt.precision;
      const float* zeros = heap.floats(size_t(in_c));
      in_fwd = ops.conv(in_spec, in_feat, gp.at(n.name + ".weight"), zeros, in_x);
      prev = Dims{1, in_c, in_size, in_size}, prev_c = in_c;
      max_act = std::max(max_act, act);
    } else if (n.kind == OpKind::FilteredModConv) {
      const Sg3Spec& f = n.sg3;
      if (f.radial) throw UserError("stylegan3 training: only -T (no radial filters)");
      GLayer L;
      L.name = n.name, L.torgb = f.torgb, L.k = n.kernel;
      L.cin = prev_c, L.cout = n.out.c, L.in = prev;
      L.conv = Dims{1, L.cout, prev.h + L.k - 1, prev.w + L.k - 1};
      L.weight_gain = n.weight_gain, L.style_gain = n.style_gain, L.out_scale = f.out_scale;
      L.act.pre_gain = 1.f;
      L.act.slope = f.torgb ? 1.f : 0.2f;
      L.act.gain = f.torgb ? 1.f : kSqrt2;
      L.act.clamp = n.clamp;
      auto design = [&](int taps, double cutoff, double width) -> std::pair<float*, float*> {
        if (taps <= 1) return {nullptr, nullptr};
        const std::vector<double> t = design_lowpass_filter(taps, cutoff, width, f.fs);
        std::vector<float> a(t.begin(), t.end()), b(a.rbegin(), a.rend());
        return {copy(a), copy(b)};
      };
      std::tie(L.up_f, L.up_flip) = design(f.up_taps, f.up_cutoff, f.up_width);
      std::tie(L.down_f, L.down_flip) = design(f.down_taps, f.down_cutoff, f.down_width);
      L.up.in = L.conv;
      if (f.up > 1 || f.up_taps > 1 || f.pad_lo || f.pad_hi)
        for (bool h : {false, true}) {
          Fir1dPass p;
          p.along_h = h, p.up = f.up, p.taps = f.up_taps, p.pad0 = f.pad_lo, p.pad1 = f.pad_hi;
          p.gain = float(f.up);  // up^2 over the two axes
          L.up.passes.push_back(p);
          L.up.taps.push_back(L.up_f), L.up.flipped.push_back(L.up_flip);
        }
      L.up.finish();
      L.down.in = L.up.out();
      if (f.down > 1 || f.down_taps > 1)
        for (bool h : {false, true}) {
          Fir1dPass p;
          p.along_h = h, p.down = f.down, p.taps = f.down_taps;
          L.down.passes.push_back(p);
          L.down.taps.push_back(L.down_f), L.down.flipped.push_back(L.down_flip);
        }
      L.down.finish();
      if (L.down.out().h != n.out.h || L.down.out().w != n.out.w)
        throw std::logic_error("stylegan_train: " + n.name + " gives " + L.down.out().str());
      const size_t nc = size_t(N) * L.cin, no = size_t(N) * L.cout;
      L.styles = heap.floats(nc), L.sn = heap.floats(nc), L.xs = heap.floats(nc);
      L.dcoef = heap.floats(no);
      L.wp = heap.floats(size_t(L.cout) * L.cin * L.k * L.k);
      L.wsq = heap.floats(size_t(L.cout) * L.cin);
      L.xm = heap.floats(size_t(N) * L.in.numel());
      L.c = heap.floats(size_t(N) * L.conv.numel());
      L.v = heap.floats(size_t(N) * L.up.out().numel());
      L.a = heap.floats(size_t(N) * L.up.out().numel());
      L.y = heap.floats(size_t(N) * L.down.out().numel());
      L.ema = copy(tensor(n.name + ".magnitude_ema"));
      L.g_ema_mag = copy(tensor(n.name + ".magnitude_ema"));
      L.spec.name = n.name;
      L.spec.x = batched(L.in, N), L.spec.y = batched(L.conv, N);
      L.spec.kernel = L.spec.kernel_w = L.k, L.spec.pad = L.spec.pad_w = L.k - 1;
      L.spec.precision = opt.precision;
      L.zeros = heap.floats(size_t(L.cout));
      max_act = std::max({max_act, size_t(N) * L.conv.numel(), size_t(N) * L.up.max_tmp(),
                          size_t(N) * L.down.max_tmp(), size_t(N) * L.in.numel()});
      max_small =
          std::max({max_small, size_t(L.cout) * L.cin * L.k * L.k, nc, no, size_t(L.cout) * L.cin});
      prev = n.out, prev_c = n.out.c;
      layers.push_back(L);
    }
  }
  g_a = heap.floats(max_act), g_b = heap.floats(max_act), g_c = heap.floats(max_act);
  gtmp0 = heap.floats(max_act), gtmp1 = heap.floats(max_act);
  gwp = heap.floats(max_small);
  g_ddcoef = heap.floats(max_small), g_dxs = heap.floats(max_small);
  g_dsn = heap.floats(max_small), g_dstyles = heap.floats(max_small);
  g_dwsq = heap.floats(max_small);
  gw2 = heap.floats(size_t(N) * wdim);
  partials = heap.floats(256);
  img = layers.back().y;
  // The conv ops: forward; the backward's data into g_b, filter into gwp.
  for (size_t i = 0; i < layers.size(); ++i) {
    GLayer& L = layers[i];
    L.fwd = ops.conv(L.spec, L.xm, L.wp, L.zeros, L.c);
    L.data = ops.data(L.spec, g_a, L.wp, g_b, false);
    L.filter = ops.filter(L.spec, L.xm, g_a, gwp, false);
  }
  in_data = ops.data(in_spec, g_a, gp.at(in_name + ".weight"), in_gfeat, false);
  in_filter = ops.filter(in_spec, in_feat, g_a, gp.grad(in_name + ".weight"), true);
}

void StyleganTrainer::Impl::build_d(const HostWeights& wt) {
  D.N = N;
  D.group = std::min(opt.mbstd_group, N);
  if (N % D.group)
    throw UserError("stylegan3_t training: the batch must divide by the mbstd group");
  d_fir = copy(fir_1d(stylegan2_fir_1d()));
  plan_discriminator(D, opt, d_fir);
  D.params.allocate(heap, false);
  D.params.upload(wt, "the discriminator");
  size_t max_tmp = 0;
  for (DVal& v : D.vals) {
    v.x = heap.floats(2 * size_t(N) * v.per());
    v.g = heap.floats(2 * size_t(N) * v.per());
  }
  for (DStep& s : D.steps)
    if (s.kind == DKind::Fir) max_tmp = std::max(max_tmp, s.fir.max_tmp());
  for (const DVal& v : D.vals) max_tmp = std::max(max_tmp, v.per());
  D.tmp0 = heap.floats(2 * size_t(N) * max_tmp), D.tmp1 = heap.floats(2 * size_t(N) * max_tmp);
  D.gtmp = heap.floats(2 * size_t(N) * max_tmp);
  D.scratch = heap.floats(2 * size_t(N) * max_tmp);
  for (DStep& s : D.steps) {
    if (s.kind != DKind::Conv && s.kind != DKind::Fc) continue;
    const DVal &in = D.vals[s.in], &out = D.vals[s.out];
    s.v = heap.floats(2 * size_t(N) * out.per());
    if (s.kind == DKind::Fc) continue;
    s.zeros = heap.floats(size_t(out.d.c));
    const float* w = D.params.at(s.name + ".weight");
    float* gw = D.params.grad(s.name + ".weight");
    const size_t off_in = size_t(N) * in.per(), off_out = size_t(N) * out.per();
    s.fwd[0] = ops.conv(s.spec[0], in.x, w, s.zeros, D.scratch);
    s.fwd[1] = ops.conv(s.spec[0], in.x + off_in, w, s.zeros, D.scratch + off_out);
    const bool first = s.in == D.image;
    for (int b = 0; b < 2; ++b) {
      s.data[b] = ops.data(s.spec[b], D.gtmp, w, first ? D.vals[s.in].g : in.g, s.grad_in_acc);
      s.filter[b] = ops.filter(s.spec[b], in.x, D.gtmp, gw, true);
    }
  }
  reals = heap.floats(size_t(N) * D.vals[D.image].per());
  loss = heap.floats(4), logits_saved = heap.floats(2 * size_t(N)), r1 = heap.floats(size_t(N));
  ones = copy(std::vector<float>(size_t(N), 1.f));
}

void StyleganTrainer::Impl::prepare() {
  // The scratch engines are chosen within: opt.workspace_bytes, or where that does not fit beside
  // the trainer's own buffers (the largest batches of a --max_batch search), halved until it does,
  // down to kMinScratch (then the allocation's own error). Engines over it are not offered, so
  // the batch runs with slower ones rather than not at all; workspace_limit() says which.
  constexpr size_t kMinScratch = size_t(32) << 20;
  TuneScratch scratch;
  scratch.bytes = opt.workspace_bytes;
  for (;;) {
    const cudaError_t e = cudaMalloc(&scratch.ptr, scratch.bytes);
    if (e == cudaSuccess) break;
    cudaGetLastError();  // an allocation failure is not sticky: cleared before the next try
    scratch.ptr = nullptr;
    if (scratch.bytes <= kMinScratch)  // the allocation's own error
      throw_cuda_error(int(e), "cudaMalloc(&scratch.ptr, scratch.bytes)", __FILE__, __LINE__);
    scratch.bytes = std::max(kMinScratch, scratch.bytes / 2);
  }
  workspace_limit = scratch.bytes;
  size_t ws = 0;
  // The trainer runs eagerly, never replayed from a CUDA graph: the plans' replay check (each
  // output downloaded twice; seconds per op at 256 px) guards nothing here, and autotune's
  // eager times are the ones that count.
  const bool check_replays = ctx.check_replays;
  const double graph_tune = ctx.graph_tune_below_us;
  ctx.check_replays = false;
  ctx.graph_tune_below_us = 0;
  try {
    for (auto& op : ops.ops) {
      op->prepare(ctx, opt.engine, 4, scratch);
      ws = std::max(ws, op->workspace_bytes());
      records.push_back(op->record());
    }
  } catch (...) {
    ctx.check_replays = check_replays;
    ctx.graph_tune_below_us = graph_tune;
    cudaFree(scratch.ptr);
    throw;
  }
  ctx.check_replays = check_replays;
  ctx.graph_tune_below_us = graph_tune;
  cudaFree(scratch.ptr);
  float* w = heap.floats((ws + 3) / 4);
  for (auto& op : ops.ops) op->bind_workspace(w, ws);
  g_step = reinterpret_cast<int*>(heap.floats(1));
  d_step = reinterpret_cast<int*>(heap.floats(1));
}

// ---- G forward and backward ------------------------------------------------------------------

void StyleganTrainer::Impl::g_forward(const float* z, bool update_emas, cudaStream_t st) {
  const int wdim = 512;
  sec.end("G other", "", st);
  launch_normalize_2nd_moment(z, zn, N, wdim, DType::F32, st);
  const float* x = zn;
  BiasAct lrelu;  // mapping: lrelu x sqrt(2), no clamp
  for (size_t l = 0; l < map_names.size(); ++l) {
    launch_fc_forward(x, N, wdim, gp.at(map_names[l] + ".weight"), gp.at(map_names[l] + ".bias"),
                      wdim, map_wg[l], map_bg[l], 1.f, map_h[l], st);
    launch_bias_act_fwd(map_h[l], nullptr, nullptr, nullptr, nullptr, N, wdim, 1, lrelu, nullptr,
                        l + 1 == map_names.size() ? w : map_a[l], st);
    x = l + 1 == map_names.size() ? w : map_a[l];
  }
  if (update_emas) launch_mean_ema(w, N, wdim, 0.998f, w_avg, st);
  // The input.
  launch_fc_forward(w, N, wdim, gp.at(in_name + ".affine.weight"), gp.at(in_name + ".affine.bias"),
                    4, in_wg, 1.f, 1.f, in_t, st);
  launch_fourier_prepare(in_t, in_transform, in_freqs, in_phases, N, in_c, in_sr, in_bw, in_fp, st);
  launch_fourier_features_f32(in_fp, N, in_c, in_size, in_sr, float(1.0 / std::sqrt(double(in_c))),
                              in_feat, st);
  in_fwd->run(st);
  sec.end("G fwd mapping+input", "", st);
  const float* cur = in_x;
  for (GLayer& L : layers) {
    const int nc = N * L.cin;
    launch_fc_forward(w, N, wdim, gp.at(L.name + ".affine.weight"), gp.at(L.name + ".affine.bias"),
                      L.cin, L.weight_gain, 1.f, L.style_gain, L.styles, st);
    if (update_emas)
      launch_magnitude_ema(cur, int64_t(N) * L.in.numel(), magnitude_beta, partials, L.ema, st);
    const float* W = gp.at(L.name + ".weight");
    const int kk = L.k * L.k;
    if (!L.torgb) {
      launch_row_rms_normalize(W, L.cout, kk * L.cin, L.wp, st);
      launch_all_rms_normalize(L.styles, nc, L.sn, st);
      launch_wsq(L.wp, L.cout, kk, L.cin, L.wsq, st);
      launch_demod(L.sn, L.wsq, N, L.cin, L.cout, L.dcoef, st);
      launch_scale_by_rsqrt(L.sn, nc, L.ema, L.xs, st);
    } else {
      CNN_CHECK_CUDA(cudaMemcpyAsync(L.wp, W, size_t(L.cout) * kk * L.cin * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st));
      launch_scale_by_rsqrt(L.styles, nc, L.ema, L.xs, st);
    }
    launch_channel_scale(cur, L.xm, batched(L.in, N), DType::F32, L.xs, st);
    sec.end("G fwd modulate", L.name, st);
    L.fwd->run(st);
    sec.end("G fwd conv", L.name, st);
    const float* dscale = L.torgb ? nullptr : L.dcoef;
    const float* bias = gp.at(L.name + ".bias");
    if (L.up.passes.empty()) {
      BiasAct id;
      id.slope = 1.f, id.gain = 1.f;
      launch_bias_act_fwd(L.c, dscale, bias, nullptr, nullptr, int64_t(N) * L.conv.h * L.conv.w,
                          L.cout, L.conv.h * L.conv.w, id, nullptr, L.v, st);
    } else {
      L.up.forward(L.c, N, dscale, bias, gtmp0, gtmp1, L.v, st);
    }
    sec.end("G fwd up", L.name, st);
    const Dims ud = L.up.out();
    launch_bias_act_fwd(L.v, nullptr, nullptr, nullptr, nullptr, int64_t(N) * ud.h * ud.w, L.cout,
                        ud.h * ud.w, L.act, nullptr, L.a, st);
    sec.end("G fwd act", L.name, st);
    if (L.down.passes.empty()) {
      launch_scale(L.a, L.out_scale, int64_t(N) * ud.numel(), L.y, false, st);
    } else {
      L.down.forward(L.a, N, nullptr, nullptr, gtmp0, gtmp1, L.y, st);
      if (L.out_scale != 1.f)
        launch_scale(L.y, L.out_scale, int64_t(N) * L.down.out().numel(), L.y, false, st);
    }
    sec.end("G fwd down", L.name, st);
    cur = L.y;
  }
}

// From the gradient of the image (D's image value's gradient, first half) into G's parameters.
void StyleganTrainer::Impl::g_backward(cudaStream_t st) {
  const int wdim = 512;
  sec.end("G other", "", st);
  CNN_CHECK_CUDA(cudaMemsetAsync(gw, 0, size_t(N) * wdim * sizeof(float), st));
  // g_a: the current layer's output gradient (first the image's, NHWC like G's output).
  const float* gimg = D.vals[D.image].g;
  CNN_CHECK_CUDA(cudaMemcpyAsync(g_a, gimg, size_t(N) * layers.back().down.out().numel() * 4,
                                 cudaMemcpyDeviceToDevice, st));
  for (size_t i = layers.size(); i-- > 0;) {
    GLayer& L = layers[i];
    const float* x_in = i == 0 ? in_x : layers[i - 1].y;
    const Dims ud = L.up.out();
    const int64_t n_out = int64_t(N) * L.down.out().numel();
    const int64_t up_rows = int64_t(N) * ud.h * ud.w, conv_rows = int64_t(N) * L.conv.h * L.conv.w;
    // y = down(a) * out_scale: g_a -> g_b (a's gradient)
    if (L.down.passes.empty()) {
      launch_scale(g_a, L.out_scale, n_out, g_b, false, st);
    } else {
      if (L.out_scale != 1.f) launch_scale(g_a, L.out_scale, n_out, g_a, false, st);
      L.down.backward(g_a, N, gtmp0, gtmp1, g_b, st);
    }
    sec.end("G bwd down", L.name, st);
    // a = act(v): g_b -> g_b (v's gradient)
    launch_bias_act_bwd(g_b, L.v, up_rows, up_rows, L.cout, ud.h * ud.w, nullptr, L.act, g_b,
                        nullptr, false, st);
    sec.end("G bwd act", L.name, st);
    // v = up(c * dcoef + bias): g_b -> g_c (u's gradient, u = c * dcoef + bias)
    if (L.up.passes.empty())
      CNN_CHECK_CUDA(
          cudaMemcpyAsync(g_c, g_b, size_t(conv_rows) * L.cout * 4, cudaMemcpyDeviceToDevice, st));
    else
      L.up.backward(g_b, N, gtmp0, gtmp1, g_c, st);
    sec.end("G bwd up", L.name, st);
    launch_column_sum(g_c, conv_rows, L.cout, 1.f, gp.grad(L.name + ".bias"), red, st);
    if (!L.torgb) {
      CNN_CHECK_CUDA(cudaMemsetAsync(g_ddcoef, 0, size_t(N) * L.cout * 4, st));
      launch_channel_dot(g_c, L.c, N, L.conv.h * L.conv.w, L.cout, g_ddcoef, red, st);
      launch_channel_scale(g_c, g_a, batched(L.conv, N), DType::F32, L.dcoef, st);
    } else {
      CNN_CHECK_CUDA(
          cudaMemcpyAsync(g_a, g_c, size_t(conv_rows) * L.cout * 4, cudaMemcpyDeviceToDevice, st));
    }
    sec.end("G bwd bias+demod", L.name, st);
    // The conv: g_a (its output's gradient) -> g_b (xm's), gwp (wp's).
    L.data->run(st);
    sec.end("G bwd conv data", L.name, st);
    L.filter->run(st);
    sec.end("G bwd conv filter", L.name, st);
    // xm = x * xs: g_b -> g_a (x's gradient: the previous layer's output), g_dxs.
    const int kk = L.k * L.k, nc = N * L.cin;
    CNN_CHECK_CUDA(cudaMemsetAsync(g_dxs, 0, size_t(nc) * 4, st));
    launch_channel_dot(g_b, x_in, N, L.in.h * L.in.w, L.cin, g_dxs, red, st);
    launch_channel_scale(g_b, g_a, batched(L.in, N), DType::F32, L.xs, st);
    const float* W = gp.at(L.name + ".weight");
    float* gW = gp.grad(L.name + ".weight");
    if (!L.torgb) {
      launch_demod_bwd(L.sn, L.wsq, L.dcoef, g_ddcoef, g_dxs, L.ema, N, L.cin, L.cout, g_dsn,
                       g_dwsq, st);
      launch_wsq_bwd(L.wp, g_dwsq, L.cout, kk, L.cin, gwp, st);
      launch_row_rms_normalize_bwd(W, gwp, L.cout, kk * L.cin, gW, st);
      launch_all_rms_normalize_bwd(L.styles, g_dsn, nc, g_dstyles, st);
    } else {
      launch_scale_by_rsqrt(g_dxs, nc, L.ema, g_dstyles, st);
      launch_scale(gwp, 1.f, int64_t(L.cout) * kk * L.cin, gW, true, st);
    }
    launch_fc_backward(w, g_dstyles, N, wdim, gp.at(L.name + ".affine.weight"), L.cin,
                       L.weight_gain, 1.f, L.style_gain, gw, true,
                       gp.grad(L.name + ".affine.weight"), gp.grad(L.name + ".affine.bias"), st);
    sec.end("G bwd modulate", L.name, st);
  }
  // The input: g_a is in_x's gradient.
  in_data->run(st);
  in_filter->run(st);
  CNN_CHECK_CUDA(cudaMemsetAsync(in_gfp, 0, size_t(N) * in_c * 4 * 4, st));
  launch_fourier_features_backward(in_fp, in_gfeat, N, in_c, in_size, in_sr,
                                   float(1.0 / std::sqrt(double(in_c))), in_gfp, st);
  launch_fourier_prepare_backward(in_t, in_transform, in_freqs, in_phases, in_gfp, N, in_c, in_sr,
                                  in_bw, in_gt, st);
  launch_fc_backward(w, in_gt, N, wdim, gp.at(in_name + ".affine.weight"), 4, in_wg, 1.f, 1.f, gw,
                     true, gp.grad(in_name + ".affine.weight"), gp.grad(in_name + ".affine.bias"),
                     st);
  // The mapping, from w's gradient.
  BiasAct lrelu;
  for (size_t l = map_names.size(); l-- > 0;) {
    launch_bias_act_bwd(gw, map_h[l], N, N, wdim, 1, nullptr, lrelu, gw, nullptr, false, st);
    const float* x = l == 0 ? zn : map_a[l - 1];
    launch_fc_backward(x, gw, N, wdim, gp.at(map_names[l] + ".weight"), wdim, map_wg[l], map_bg[l],
                       1.f, l == 0 ? nullptr : gw2, false, gp.grad(map_names[l] + ".weight"),
                       gp.grad(map_names[l] + ".bias"), st);
    if (l > 0)
      CNN_CHECK_CUDA(cudaMemcpyAsync(gw, gw2, size_t(N) * wdim * 4, cudaMemcpyDeviceToDevice, st));
  }
  sec.end("G bwd input+mapping", "", st);
}

// ---- D forward and backward ------------------------------------------------------------------

// half 0: the primal batch (the first N images of every value); 1: the tangent batch, D's
// derivative along the image's tangent half (no biases, each activation's derivative at the
// primal pre-activation, mbstd's tangent formula).
void StyleganTrainer::Impl::d_forward(int half, const float* image, cudaStream_t st) {
  sec.end("D other", "", st);
  const char* fwd = half ? "D tangent fwd" : "D fwd";
  DVal& im = D.vals[D.image];
  const size_t off_img = size_t(half) * N * im.per();
  if (image)
    CNN_CHECK_CUDA(cudaMemcpyAsync(im.x + off_img, image, size_t(N) * im.per() * 4,
                                   cudaMemcpyDeviceToDevice, st));
  for (DStep& s : D.steps) {
    DVal &in = D.vals[s.in], &out = D.vals[s.out];
    const size_t oi = size_t(half) * N * in.per(), oo = size_t(half) * N * out.per();
    switch (s.kind) {
      case DKind::Fir:
        s.fir.forward(in.x + oi, N, nullptr, nullptr, D.tmp0, D.tmp1, out.x + oo, st);
        break;
      case DKind::Conv: {
        s.fwd[half]->run(st);  // into D.scratch (+ oo)
        const int hw = out.d.h * out.d.w;
        const float* z = s.z >= 0 ? D.vals[s.z].x + oo : nullptr;
        const float* b = s.bias ? D.params.at(s.name + ".bias") : nullptr;
        launch_bias_act_fwd(D.scratch + oo, nullptr, b, z, half ? s.v : nullptr, int64_t(N) * hw,
                            out.d.c, hw, s.act, half ? nullptr : s.v, out.x + oo, st);
        break;
      }
      case DKind::Mbstd:
        if (half == 0)
          launch_mbstd_forward(in.x, N, in.d.h, in.d.w, in.d.c, D.group, out.x, st);
        else
          launch_mbstd_forward_dual(in.x, N, in.d.h, in.d.w, in.d.c, D.group, out.x, st);
        break;
      case DKind::Flatten: {
        launch_nhwc_to_nchw(in.x + oi, N, in.d.h * in.d.w, in.d.c, out.x + oo, st);
        break;
      }
      case DKind::Fc: {
        const float wg = float(1.0 / std::sqrt(double(s.fc_in)));
        launch_fc_forward(in.x + oi, N, s.fc_in, D.params.at(s.name + ".weight"),
                          half ? nullptr : D.params.at(s.name + ".bias"), s.fc_out, wg, 1.f, 1.f,
                          D.scratch + oo, st);
        launch_bias_act_fwd(D.scratch + oo, nullptr, nullptr, nullptr, half ? s.v : nullptr, N,
                            s.fc_out, 1, s.act, half ? nullptr : s.v, out.x + oo, st);
        break;
      }
    }
    sec.end(std::string(fwd) + " " + step_kind(s.kind), s.name, st);
  }
}

// The backward from the logits' gradient (D.vals[logits].g, b = 0: N rows, 1: 2N rows), into
// the image's gradient and, where wgrad, the parameters' (biases from the primal rows only).
void StyleganTrainer::Impl::d_backward(int b, bool wgrad, cudaStream_t st) {
  const int rows_n = N * (b + 1);
  sec.end("D other", "", st);
  const char* bwd = b ? "D double bwd" : "D bwd";
  for (auto it = D.steps.rbegin(); it != D.steps.rend(); ++it) {
    DStep& s = *it;
    DVal &in = D.vals[s.in], &out = D.vals[s.out];
    const bool first = s.in == D.image;
    switch (s.kind) {
      case DKind::Fir:
        if (s.grad_in_acc) {
          s.fir.backward(out.g, rows_n, D.tmp0, D.tmp1, D.scratch, st);
          launch_scale(D.scratch, 1.f, int64_t(rows_n) * in.per(), in.g, true, st);
        } else {
          s.fir.backward(out.g, rows_n, D.tmp0, D.tmp1, in.g, st);
        }
        break;
      case DKind::Conv: {
        const int hw = out.d.h * out.d.w;
        if (s.z >= 0)
          launch_scale(out.g, 1.f, int64_t(rows_n) * out.per(), D.vals[s.z].g, false, st);
        // D.gtmp: the conv output's gradient (times the weight gain).
        launch_bias_act_bwd(out.g, s.v, int64_t(N) * hw, int64_t(rows_n) * hw, out.d.c, hw, nullptr,
                            s.act, nullptr, D.gtmp, false, st);
        if (wgrad) {
          if (s.bias)
            launch_column_sum(D.gtmp, int64_t(N) * hw, out.d.c, 1.f / s.act.pre_gain,
                              D.params.grad(s.name + ".bias"), red, st);
          sec.end(std::string(bwd) + " conv act+bias", s.name, st);
          s.filter[b]->run(st);
          sec.end(std::string(bwd) + " conv filter", s.name, st);
        }
        if (!first || !wgrad) s.data[b]->run(st);
        break;
      }
      case DKind::Mbstd:
        if (b == 0)
          launch_mbstd_backward(in.x, out.g, N, in.d.h, in.d.w, in.d.c, D.group, in.g, st);
        else
          launch_mbstd_backward_dual(in.x, out.g, N, in.d.h, in.d.w, in.d.c, D.group, in.g, st);
        break;
      case DKind::Flatten:
        launch_nchw_to_nhwc(out.g, rows_n, in.d.h * in.d.w, in.d.c, in.g, s.grad_in_acc, st);
        break;
      case DKind::Fc: {
        const float wg = float(1.0 / std::sqrt(double(s.fc_in)));
        launch_bias_act_bwd(out.g, s.v, N, rows_n, s.fc_out, 1, nullptr, s.act, nullptr, D.gtmp,
                            false, st);
        if (wgrad)
          launch_column_sum(D.gtmp, N, s.fc_out, 1.f, D.params.grad(s.name + ".bias"), red, st);
        launch_fc_backward(in.x, D.gtmp, rows_n, s.fc_in, D.params.at(s.name + ".weight"), s.fc_out,
                           wg, 1.f, 1.f, in.g, s.grad_in_acc,
                           wgrad ? D.params.grad(s.name + ".weight") : nullptr, nullptr, st);
        break;
      }
    }
    const char* step = s.kind != DKind::Conv ? step_kind(s.kind)
                       : wgrad               ? "conv data"
                                             : "conv act+data";
    sec.end(std::string(bwd) + " " + step, s.name, st);
  }
}

// ---- Phases ------------------------------------------------------------------------------------

StyleganTrainer::StyleganTrainer(GpuContext& ctx, const SgTrainOptions& opt, const HostWeights& g,
                                 const HostWeights& d)
    : impl_(std::make_unique<Impl>(ctx, opt)) {
  if (opt.precision != Precision::FP32 && opt.precision != Precision::TF32)
    throw UserError("stylegan3_t training: precision fp32 or tf32 (fp16 is not written yet)");
  if (opt.batch < 1) throw UserError("stylegan3_t training: the batch must be positive");
  impl_->build_g(g);
  impl_->build_d(d);
  impl_->prepare();
}

StyleganTrainer::~StyleganTrainer() = default;

void StyleganTrainer::set_inputs(const std::vector<float>& z_gmain,
                                 const std::vector<float>& z_dmain,
                                 const std::vector<float>& reals_nchw) {
  Impl& m = *impl_;
  const int R = m.opt.resolution;
  const size_t nz = size_t(m.N) * 512, ni = size_t(m.N) * 3 * R * R;
  if (z_gmain.size() != nz || z_dmain.size() != nz || reals_nchw.size() != ni)
    throw UserError("stylegan3_t training: inputs of the wrong size (z [" + std::to_string(m.N) +
                    "][512], reals [" + std::to_string(m.N) + "][3][" + std::to_string(R) + "][" +
                    std::to_string(R) + "])");
  CNN_CHECK_CUDA(cudaMemcpy(m.z_gmain, z_gmain.data(), nz * 4, cudaMemcpyHostToDevice));
  CNN_CHECK_CUDA(cudaMemcpy(m.z_dmain, z_dmain.data(), nz * 4, cudaMemcpyHostToDevice));
  const std::vector<float> nhwc = nchw_to_nhwc(reals_nchw, Dims{m.N, 3, R, R});
  CNN_CHECK_CUDA(cudaMemcpy(m.reals, nhwc.data(), ni * 4, cudaMemcpyHostToDevice));
}

namespace {

AdamRef adam_of(double lr, double beta1, double beta2, double eps) {
  AdamRef h;
  h.lr = lr, h.beta1 = beta1, h.beta2 = beta2, h.eps = eps;
  h.nan_to_num = true;  // NVlabs' training loop, before every optimizer step
  return h;
}

}  // namespace

void StyleganTrainer::gmain(cudaStream_t st) {
  Impl& m = *impl_;
  CNN_CHECK_CUDA(cudaMemsetAsync(m.gp.g, 0, m.gp.total * sizeof(float), st));
  m.g_forward(m.z_gmain, false, st);
  m.d_forward(0, m.img, st);
  DVal& lg = m.D.vals[m.D.logits];
  launch_softplus_loss(lg.x, m.N, -1.f, 1.f, m.loss, lg.g, st);
  m.d_backward(0, false, st);
  m.g_backward(st);
  m.phase = "Gmain";
}

void StyleganTrainer::dmain(cudaStream_t st) {
  Impl& m = *impl_;
  CNN_CHECK_CUDA(cudaMemsetAsync(m.D.params.g, 0, m.D.params.total * sizeof(float), st));
  m.g_forward(m.z_dmain, true, st);
  DVal& lg = m.D.vals[m.D.logits];
  const size_t nb = size_t(m.N) * sizeof(float);
  m.d_forward(0, m.img, st);
  CNN_CHECK_CUDA(cudaMemcpyAsync(m.logits_saved, lg.x, nb, cudaMemcpyDeviceToDevice, st));
  launch_softplus_loss(lg.x, m.N, 1.f, 1.f, m.loss + 1, lg.g, st);
  m.d_backward(0, true, st);
  m.d_forward(0, m.reals, st);
  CNN_CHECK_CUDA(cudaMemcpyAsync(m.logits_saved + m.N, lg.x, nb, cudaMemcpyDeviceToDevice, st));
  launch_softplus_loss(lg.x, m.N, -1.f, 1.f, m.loss + 2, lg.g, st);
  m.d_backward(0, true, st);
  m.phase = "Dmain";
}

void StyleganTrainer::dreg(cudaStream_t st) {
  Impl& m = *impl_;
  Discriminator& D = m.D;
  CNN_CHECK_CUDA(cudaMemsetAsync(D.params.g, 0, D.params.total * sizeof(float), st));
  DVal &lg = D.vals[D.logits], &im = D.vals[D.image];
  const size_t per = im.per(), nb = size_t(m.N) * sizeof(float);
  // v = d(sum of the logits)/d(reals): one backward from ones.
  m.d_forward(0, m.reals, st);
  CNN_CHECK_CUDA(cudaMemcpyAsync(m.logits_saved, lg.x, nb, cudaMemcpyDeviceToDevice, st));
  CNN_CHECK_CUDA(cudaMemsetAsync(lg.g, 0, 2 * nb, st));
  CNN_CHECK_CUDA(cudaMemcpyAsync(lg.g, m.ones, nb, cudaMemcpyDeviceToDevice, st));
  m.d_backward(0, false, st);
  // R1 penalty per image: |v_n|^2.
  CNN_CHECK_CUDA(cudaMemsetAsync(m.r1, 0, nb, st));
  launch_channel_dot(im.g, im.g, m.N, int(per), 1, m.r1, m.red, st);
  // The tangent half: the image's gradient, then D's derivative along it.
  CNN_CHECK_CUDA(cudaMemcpyAsync(im.x + size_t(m.N) * per, im.g, size_t(m.N) * per * 4,
                                 cudaMemcpyDeviceToDevice, st));
  m.d_forward(1, nullptr, st);
  // loss = mean over n of gamma / 2 |v_n|^2, times the interval; its gradient with respect to
  // each tangent logit is interval * gamma / N (the primal logits: 0).
  const float seed = float(m.opt.r1_interval) * m.opt.gamma / float(m.N);
  CNN_CHECK_CUDA(cudaMemsetAsync(lg.g, 0, nb, st));
  launch_scale(m.ones, seed, m.N, lg.g + m.N, false, st);
  m.d_backward(1, true, st);
  m.phase = "Dreg";
}

void StyleganTrainer::iteration(int index, cudaStream_t st) {
  Impl& m = *impl_;
  const SgTrainOptions& o = m.opt;
  const AdamRef g_adam = adam_of(o.g_lr, o.beta1, o.beta2, o.eps);
  const double ratio = double(o.r1_interval) / (o.r1_interval + 1);
  const AdamRef d_adam =
      adam_of(o.d_lr * ratio, std::pow(o.beta1, ratio), std::pow(o.beta2, ratio), o.eps);
  if (o.fresh_latents) {  // two latent batches per iteration, each from its own counter range
    const int64_t nz = int64_t(m.N) * 512;
    launch_randn(m.z_gmain, nz, o.latent_seed, uint64_t(2 * index) * uint64_t(nz), st);
    launch_randn(m.z_dmain, nz, o.latent_seed, uint64_t(2 * index + 1) * uint64_t(nz), st);
  }
  auto adam = [&](Params& p, int* step, const AdamRef& h) {
    launch_step_advance(step, nullptr, st);
    StepControl c;
    c.step = step;
    launch_adam_step(p.p, p.m, p.v, p.g, DType::F32, int64_t(p.total), h, c, nullptr, DType::F32,
                     st);
  };
  gmain(st);
  adam(m.gp, m.g_step, g_adam);
  dmain(st);
  adam(m.D.params, m.d_step, d_adam);
  if (index % o.r1_interval == 0) {
    dreg(st);
    adam(m.D.params, m.d_step, d_adam);
  }
  // G_ema: ema_kimg = batch * 10 / 32, beta = 0.5 ^ (batch / ema_nimg).
  const double ema_nimg = o.batch * 10.0 / 32.0 * 1000.0;
  launch_lerp_into(m.gp.p, float(std::pow(0.5, o.batch / ema_nimg)), int64_t(m.gp.total), m.gp.ema,
                   st);
  // and G's buffers copied into G_ema as they are (NVlabs' training loop: w_avg, magnitude_ema).
  CNN_CHECK_CUDA(
      cudaMemcpyAsync(m.ema_w_avg, m.w_avg, 512 * sizeof(float), cudaMemcpyDeviceToDevice, st));
  for (const GLayer& L : m.layers)
    CNN_CHECK_CUDA(
        cudaMemcpyAsync(L.g_ema_mag, L.ema, sizeof(float), cudaMemcpyDeviceToDevice, st));
}

std::vector<SafetensorOut> StyleganTrainer::results(const std::string& phase) const {
  const Impl& m = *impl_;
  if (phase != m.phase)
    throw std::logic_error("StyleganTrainer::results: the last phase run was " + m.phase);
  std::vector<SafetensorOut> out;
  const int64_t n = m.N;
  auto put = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> v) {
    out.push_back(SafetensorOut{phase + "." + name, std::move(shape), std::move(v)});
  };
  const Params& p = phase == "Gmain" ? m.gp : m.D.params;
  for (const Params::Entry& e : p.entries) put("grad." + e.name, e.shape, p.download(p.g, e));
  const DVal& lg = m.D.vals[m.D.logits];
  const std::vector<float> loss = host_of(m.loss, 3);
  if (phase == "Gmain") {
    put("loss", {1}, {loss[0]});
    put("logits", {n}, host_of(lg.x, size_t(n)));
  } else if (phase == "Dmain") {
    const std::vector<float> l = host_of(m.logits_saved, size_t(2 * n));
    put("loss_gen", {1}, {loss[1]});
    put("loss_real", {1}, {loss[2]});
    put("logits_gen", {n}, std::vector<float>(l.begin(), l.begin() + n));
    put("logits_real", {n}, std::vector<float>(l.begin() + n, l.end()));
    put("mapping.w_avg", {512}, host_of(m.w_avg, 512));
    for (const GLayer& L : m.layers) put(L.name + ".magnitude_ema", {1}, host_of(L.ema, 1));
  } else {
    const int R = m.opt.resolution;
    put("logits", {n}, host_of(m.logits_saved, size_t(n)));
    put("r1_penalty", {n}, host_of(m.r1, size_t(n)));
    const DVal& im = m.D.vals[m.D.image];
    put("r1_grads", {n, 3, R, R},
        nhwc_to_nchw(host_of(im.x + size_t(n) * im.per(), size_t(n) * im.per()),
                     Dims{int(n), 3, R, R}));
    put("tangent_logits", {n}, host_of(lg.x + n, size_t(n)));
  }
  return out;
}

int64_t StyleganTrainer::g_params() const {
  int64_t t = 0;
  for (const auto& e : impl_->gp.entries) t += int64_t(e.count);
  return t;
}
int64_t StyleganTrainer::d_params() const {
  int64_t t = 0;
  for (const auto& e : impl_->D.params.entries) t += int64_t(e.count);
  return t;
}
size_t StyleganTrainer::device_bytes() const {
  return impl_->heap.bytes();
}
size_t StyleganTrainer::workspace_limit() const {
  return impl_->workspace_limit;
}
const std::vector<LayerRecord>& StyleganTrainer::layers() const {
  return impl_->records;
}

std::vector<std::pair<std::string, double>> StyleganTrainer::profile_sections(cudaStream_t st) {
  Impl& m = *impl_;
  std::map<std::string, double> ms;
  std::vector<std::string> order;
  const std::pair<const char*, void (StyleganTrainer::*)(cudaStream_t)> phases[] = {
      {"Gmain", &StyleganTrainer::gmain},
      {"Dmain", &StyleganTrainer::dmain},
      {"Dreg", &StyleganTrainer::dreg}};
  m.sec.on = true;
  try {
    for (const auto& [name, run] : phases) {
      m.sec.prefix = name;
      m.sec.n = 0;
      m.sec.start(st);
      (this->*run)(st);
      m.sec.end("other", "", st);
      CNN_CHECK_CUDA(cudaStreamSynchronize(st));
      for (size_t i = 1; i < m.sec.n; ++i) {
        float t = 0;
        CNN_CHECK_CUDA(cudaEventElapsedTime(&t, m.sec.events[i - 1], m.sec.events[i]));
        const std::string& label = m.sec.labels[i];
        if (!ms.count(label)) order.push_back(label);
        ms[label] += t;
      }
    }
  } catch (...) {
    m.sec.on = false;
    throw;
  }
  m.sec.on = false;
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& label : order) out.push_back({label, ms[label]});
  return out;
}

}  // namespace cnnbench
