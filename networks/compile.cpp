#include "networks/compile.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "harness/check.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/storage.h"
#include "networks/schedule.h"

namespace cnnbench {

namespace {

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
  }
  void run(cudaStream_t stream) override {
    if (kind_ == OpKind::MaxPool)
      launch_maxpool(t_, x_, y_, s_, stream);
    else if (kind_ == OpKind::AvgPool)
      launch_avgpool(t_, x_, y_, s_, stream);
    else
      launch_global_avgpool(t_, x_, y_, s_.x, stream);
  }

 private:
  OpKind kind_;
  DType t_;
  PoolSpec s_;
  const void* x_;
  void* y_;
};

// A BatchNorm, add or ReLU that no conv absorbed.
class EpilogueOp : public Op {
 public:
  EpilogueOp(const std::string& name, const std::string& op, DType t, const Dims& d, const void* x,
             const void* scale, const void* bias, const void* z, bool relu, void* y)
      : t_(t), d_(d), x_(x), scale_(scale), bias_(bias), z_(z), relu_(relu), y_(y) {
    record_.name = name;
    out_ = y;
    out_bytes_ = size_t(d.numel()) * dtype_size(t);
    record_.op = op;
    record_.shape = d.str();
    record_.engine = "cnnbench kernel";
  }
  void run(cudaStream_t stream) override {
    launch_epilogue(t_, y_, x_, scale_, bias_, z_, relu_, d_.numel(), d_.c, stream);
  }

 private:
  DType t_;
  Dims d_;
  const void *x_, *scale_, *bias_, *z_;
  bool relu_;
  void* y_;
};

// One op to emit: a group of graph nodes executed together, emitted where its last node stands.
Dims batched(Dims d, int n) {
  d.n = n;
  return d;
}

const std::vector<float>& tensor_of(const HostWeights& w, const std::string& name) {
  auto it = w.find(name);
  if (it == w.end()) throw UserError("weights have no tensor '" + name + "'");
  return it->second;
}

// Inference BatchNorm as y = x * scale + shift, in double.
struct BnFold {
  std::vector<double> scale, shift;
};
BnFold fold_bn(const HostWeights& w, const Node& bn) {
  const auto& gamma = tensor_of(w, bn.name + ".weight");
  const auto& beta = tensor_of(w, bn.name + ".bias");
  const auto& mean = tensor_of(w, bn.name + ".running_mean");
  const auto& var = tensor_of(w, bn.name + ".running_var");
  BnFold f;
  for (size_t k = 0; k < gamma.size(); ++k) {
    f.scale.push_back(double(gamma[k]) / std::sqrt(double(var[k]) + bn.eps));
    f.shift.push_back(double(beta[k]) - double(mean[k]) * f.scale.back());
  }
  return f;
}

}  // namespace

Model::Model(GpuContext& ctx, const Graph& g, const HostWeights& weights, const CompileOptions& opt)
    : ctx_(ctx), opt_(opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const DType t = storage_type(opt.precision);
  const int N = opt.batch;
  const auto& nodes = g.nodes();
  flops_per_image_ = 2.0 * double(g.macs());

  // 1. Group nodes into ops, in the order they run.
  const Schedule sched = schedule_ops(g);
  const std::vector<OpGroup>& groups = sched.groups;
  const std::vector<int>& order = sched.order;

  // 2. Values and their lifetimes (in emission steps). Flatten aliases its input.
  auto source = [&](int id) {
    while (nodes[id].kind == OpKind::Flatten) id = nodes[id].inputs[0];
    return id;
  };
  std::vector<int> def(nodes.size(), -1), last(nodes.size(), -1);
  const int steps = int(order.size());
  def[g.input_id()] = 0;
  for (int s = 0; s < steps; ++s) {
    const OpGroup& grp = groups[order[s]];
    def[grp.anchor] = s;
    for (int v : grp.in) last[source(v)] = std::max(last[source(v)], s);
  }
  last[g.input_id()] = steps;        // the input persists across replays
  last[source(g.output())] = steps;  // and so does the output
  std::vector<int> buffer(nodes.size(), -1);
  for (size_t id = 0; id < nodes.size(); ++id) {
    if (def[id] < 0) continue;
    const size_t bytes = size_t(batched(nodes[id].out, N).numel()) * dtype_size(t);
    buffer[id] = arena_.add_activation(bytes, def[id], std::max(last[id], def[id]));
  }
  input_buf_ = buffer[g.input_id()];
  output_buf_ = buffer[source(g.output())];
  input_dims_ = batched(nodes[g.input_id()].out, N);
  output_dims_ = batched(nodes[g.output()].out, N);

  // 3. Weights, in device layout and storage type: conv KRSC with BatchNorm folded in.
  struct PendingUpload {
    int buffer;
    std::vector<uint8_t> bytes;
  };
  std::vector<PendingUpload> uploads;
  auto add_weights = [&](const std::vector<float>& v) {
    std::vector<uint8_t> bytes = to_storage(v, t);
    const int id = arena_.add_weights(bytes.size());
    uploads.push_back({id, std::move(bytes)});
    return id;
  };
  std::vector<int> wbuf(groups.size(), -1), bbuf(groups.size(), -1), sbuf(groups.size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const OpGroup& grp = groups[gi];
    const Node& n = nodes[grp.head];
    if (grp.kind == OpKind::Conv) {
      const Dims in = nodes[n.inputs[0]].out;
      const int K = n.out.c, C = in.c / n.groups, R = n.kernel, S = n.kernel;
      const std::vector<float>& w = tensor_of(weights, n.name + ".weight");
      std::vector<double> scale(K, 1.0), shift(K, 0.0);
      if (n.bias) {
        const auto& b = tensor_of(weights, n.name + ".bias");
        for (int k = 0; k < K; ++k) shift[k] = b[k];
      }
      if (grp.bn >= 0) {
        const BnFold f = fold_bn(weights, nodes[grp.bn]);
        for (int k = 0; k < K; ++k)
          shift[k] = f.shift[k] + shift[k] * f.scale[k], scale[k] = f.scale[k];
      }
      std::vector<float> krsc(w.size()), bias(K);
      for (int k = 0; k < K; ++k) {
        bias[k] = float(shift[k]);
        for (int c = 0; c < C; ++c)
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s)
              krsc[((size_t(k) * R + r) * S + s) * C + c] =
                  float(double(w[((size_t(k) * C + c) * R + r) * S + s]) * scale[k]);
      }
      wbuf[gi] = add_weights(krsc);
      bbuf[gi] = add_weights(bias);
    } else if (grp.kind == OpKind::Linear) {
      std::vector<float> w = tensor_of(weights, n.name + ".weight");
      // A flatten of C x H x W in NHWC storage reads (h, w, c); PyTorch's columns are (c, h, w).
      const Dims pre = nodes[source(n.inputs[0])].out;
      if (pre.h * pre.w > 1) {
        const int out = n.out.c, hw = pre.h * pre.w, C = pre.c;
        std::vector<float> p(w.size());
        for (int o = 0; o < out; ++o)
          for (int c = 0; c < C; ++c)
            for (int i = 0; i < hw; ++i)
              p[(size_t(o) * hw + i) * C + c] = w[(size_t(o) * C + c) * hw + i];
        w.swap(p);
      }
      wbuf[gi] = add_weights(w);
      if (n.bias) bbuf[gi] = add_weights(tensor_of(weights, n.name + ".bias"));
    } else if (grp.kind == OpKind::BatchNorm) {
      const BnFold f = fold_bn(weights, n);
      sbuf[gi] = add_weights(std::vector<float>(f.scale.begin(), f.scale.end()));
      bbuf[gi] = add_weights(std::vector<float>(f.shift.begin(), f.shift.end()));
    }
  }

  arena_.plan();
  arena_.allocate();
  for (const PendingUpload& u : uploads)
    CNN_CHECK_CUDA(
        cudaMemcpy(arena_.ptr(u.buffer), u.bytes.data(), u.bytes.size(), cudaMemcpyHostToDevice));

  // 4. The ops, bound to their buffers.
  auto ptr = [&](int node) { return arena_.ptr(buffer[source(node)]); };
  auto wptr = [&](int id) -> void* { return id >= 0 ? arena_.ptr(id) : nullptr; };
  for (int gi : order) {
    const OpGroup& grp = groups[gi];
    const Node& n = nodes[grp.head];
    const std::string name =
        n.name.empty() ? std::string(op_kind_name(n.kind)) + "#" + std::to_string(grp.head)
                       : n.name;
    void* y = arena_.ptr(buffer[grp.anchor]);
    switch (grp.kind) {
      case OpKind::Conv: {
        ConvSpec s;
        s.name = name;
        s.x = batched(nodes[n.inputs[0]].out, N);
        s.y = batched(n.out, N);
        s.kernel = n.kernel, s.stride = n.stride, s.pad = n.pad, s.dilation = n.dilation;
        s.groups = n.groups;
        s.precision = opt.precision;
        s.residual = grp.residual >= 0;
        s.relu = grp.relu;
        ConvBuffers b{ptr(n.inputs[0]), wptr(wbuf[gi]), wptr(bbuf[gi]),
                      s.residual ? ptr(grp.residual) : nullptr, y};
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
        s.relu = grp.relu;
        ops_.push_back(
            std::make_unique<LinearOp>(s, ptr(n.inputs[0]), wptr(wbuf[gi]), wptr(bbuf[gi]), y));
        break;
      }
      case OpKind::MaxPool:
      case OpKind::AvgPool:
      case OpKind::GlobalAvgPool: {
        PoolSpec s;
        s.x = batched(nodes[n.inputs[0]].out, N);
        s.y = batched(n.out, N);
        s.kernel = n.kernel, s.stride = n.stride, s.pad = n.pad;
        s.count_include_pad = n.count_include_pad;
        ops_.push_back(std::make_unique<PoolOp>(name, grp.kind, t, s, ptr(n.inputs[0]), y));
        break;
      }
      case OpKind::BatchNorm:
        ops_.push_back(std::make_unique<EpilogueOp>(
            name, grp.relu ? "batchnorm+relu" : "batchnorm", t, batched(n.out, N), ptr(n.inputs[0]),
            wptr(sbuf[gi]), wptr(bbuf[gi]), nullptr, grp.relu, y));
        break;
      case OpKind::Add:
        ops_.push_back(std::make_unique<EpilogueOp>(name, grp.relu ? "add+relu" : "add", t,
                                                    batched(n.out, N), ptr(n.inputs[0]), nullptr,
                                                    nullptr, ptr(n.inputs[1]), grp.relu, y));
        break;
      case OpKind::ReLU:
        ops_.push_back(std::make_unique<EpilogueOp>(name, "relu", t, batched(n.out, N),
                                                    ptr(n.inputs[0]), nullptr, nullptr, nullptr,
                                                    true, y));
        break;
      default:
        throw std::logic_error("compile: unexpected op");
    }
  }

  // 5. Engines. Autotune runs layer by layer on a real input, so each layer is timed on the data
  // it will see.
  set_input(random_uniform(opt.input_seed, "input", size_t(input_dims_.numel()), -1.f, 1.f));
  TuneScratch scratch;
  scratch.bytes = opt.tune_scratch_bytes;
  CNN_CHECK_CUDA(cudaMalloc(&scratch.ptr, scratch.bytes));
  try {
    for (auto& op : ops_) {
      op->prepare(ctx, opt.engine, opt.top_k, scratch);
      op->run(ctx.stream);  // the next op is prepared (and checked) on real data
    }
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  } catch (...) {
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

void Model::forward(cudaStream_t stream) {
  for (auto& op : ops_) {
    nvtxRangePushA(op->record().name.c_str());
    op->run(stream);
    nvtxRangePop();
  }
}

std::vector<std::pair<std::string, double>> Model::verify_layers(int samples, uint64_t seed,
                                                                 bool graph) {
  std::vector<std::pair<std::string, double>> out;
  for (auto& op : ops_) {
    // Poisoned first (NaN), so an output element left unwritten fails.
    if (op->output())
      CNN_CHECK_CUDA(cudaMemsetAsync(op->output(), 0xFF, op->output_bytes(), ctx_.stream));
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

std::vector<std::pair<std::string, double>> Model::graph_prefix_check() {
  std::vector<std::pair<std::string, double>> out;
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
    CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    if (arena_.workspace())
      CNN_CHECK_CUDA(
          cudaMemsetAsync(arena_.workspace(), 0x7F, arena_.workspace_bytes(), ctx_.stream));
    CNN_CHECK_CUDA(cudaMemsetAsync(last.output(), 0xFF, last.output_bytes(), ctx_.stream));
    CNN_CHECK_CUDA(cudaGraphLaunch(exec, ctx_.stream));
    const std::vector<float> replayed = download(last.output(), count, t);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    out.push_back({last.record().name, relative_l2(replayed, eager)});
  }
  return out;
}

void Model::set_input(const std::vector<float>& nchw) {
  const Dims d = input_dims_;
  if (int64_t(nchw.size()) != d.numel())
    throw UserError("input has " + std::to_string(nchw.size()) + " values but " + d.str() +
                    " needs " + std::to_string(d.numel()));
  std::vector<float> nhwc(nchw.size());
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w)
          nhwc[((size_t(n) * d.h + h) * d.w + w) * d.c + c] =
              nchw[((size_t(n) * d.c + c) * d.h + h) * d.w + w];
  const std::vector<uint8_t> bytes = to_storage(nhwc, storage_type(opt_.precision));
  CNN_CHECK_CUDA(
      cudaMemcpy(arena_.ptr(input_buf_), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}

std::vector<float> Model::output() const {
  const Dims d = output_dims_;
  const DType t = storage_type(opt_.precision);
  std::vector<uint8_t> bytes(size_t(d.numel()) * dtype_size(t));
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  CNN_CHECK_CUDA(
      cudaMemcpy(bytes.data(), arena_.ptr(output_buf_), bytes.size(), cudaMemcpyDeviceToHost));
  const std::vector<float> nhwc = from_storage(bytes, t);
  if (d.h * d.w == 1) return nhwc;
  std::vector<float> nchw(nhwc.size());
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w)
          nchw[((size_t(n) * d.c + c) * d.h + h) * d.w + w] =
              nhwc[((size_t(n) * d.h + h) * d.w + w) * d.c + c];
  return nchw;
}

std::vector<LayerRecord> Model::layers() const {
  std::vector<LayerRecord> out;
  for (const auto& op : ops_) out.push_back(op->record());
  return out;
}

}  // namespace cnnbench
