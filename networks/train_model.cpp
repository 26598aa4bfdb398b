#include "networks/train_model.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

#include "harness/check.h"
#include "kernels/conv.h"
#include "kernels/conv_backward.h"
#include "kernels/linear_backward.h"
#include "kernels/lrn.h"
#include "kernels/matmul.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/stem_wgrad.h"
#include "kernels/stem_wgrad_op.h"
#include "kernels/storage.h"
#include "kernels/timing.h"
#include "kernels/train_kernels.h"
#include "networks/compile.h"

namespace cnnbench {

namespace {

int64_t rows_of(const Dims& d) {
  return int64_t(d.n) * d.h * d.w;
}

// Whether this slice trains node n; the reason when not.
std::string unsupported(const Graph& g, const Node& n) {
  const std::string kind = op_kind_name(n.kind);
  switch (n.kind) {
    case OpKind::Input:
    case OpKind::BatchNorm:
    case OpKind::ReLU:
    case OpKind::SiLU:
    case OpKind::Sigmoid:
    case OpKind::Scale:
    case OpKind::Dropout:
    case OpKind::Add:
    case OpKind::MaxPool:
    case OpKind::GlobalAvgPool:
    case OpKind::Flatten:
    case OpKind::Concat:
    case OpKind::AvgPool:
    case OpKind::LRN:
    case OpKind::Conv:  // grouped and depthwise too, with or without bias
      return "";
    case OpKind::AdaptiveAvgPool: {  // to 1x1 (the global mean), or the identity (an alias)
      const Dims in = g.node(n.inputs[0]).out;
      const bool identity = in.h == n.out.h && in.w == n.out.w;
      return (n.out.h == 1 && n.out.w == 1) || identity ? "" : "adaptive_avgpool to more than 1x1";
    }
    case OpKind::Linear:  // on a flatten of C x H x W too (VGG's, AlexNet's first)
      return n.bias ? "" : "linear without bias";
    default:
      return kind;
  }
}

}  // namespace

TrainModel::TrainModel(GpuContext& ctx, const Graph& g, const HostWeights& weights,
                       const TrainOptions& opt)
    : ctx_(ctx), opt_(opt) {
  if (opt.batch < 1) throw UserError("training: batch must be positive");
  auto mark = [this, last = std::chrono::steady_clock::now()](const char* phase) mutable {
    const auto now = std::chrono::steady_clock::now();
    phases_.emplace_back(phase, std::chrono::duration<double>(now - last).count());
    last = now;
  };
  const auto& nodes = g.nodes();
  for (const Node& n : nodes) {
    const std::string why = unsupported(g, n);
    if (!why.empty())
      throw UserError("training: " + why + " not supported yet" +
                      (n.name.empty() ? "" : " (" + n.name + ")"));
  }
  // Concats copy their inputs in and their gradients out; BatchNorm runs with the ReLU after it.
  plan_ = plan_training(g, false, opt.fuse_bn_act, opt.relu_masks && bn_relu_masks_available());
  const DType t = storage_type(opt.precision);  // F32 for fp32 and tf32
  const size_t esize = dtype_size(t);
  const bool mixed = t != DType::F32;   // fp16, bf16: fp32 master weights, working copies in t
  const bool scaled = t == DType::F16;  // fp16 also scales the loss
  const int N = opt.batch;
  auto src = [&](int id) { return plan_.source[id]; };
  // What a linear's input holds, in memory order: a flatten or a dropout of it keeps the order of
  // the value it came from.
  auto flat_source = [&](int id) {
    int v = src(id);
    while (nodes[v].kind == OpKind::Dropout) v = src(nodes[v].inputs[0]);
    return v;
  };
  auto dims = [&](int id) { return batched(nodes[src(id)].out, N); };
  input_dims_ = batched(nodes[g.input_id()].out, N);
  classes_ = nodes[g.output()].out.c;

  // 1. Buffers. Parameters, their gradients and state, the image, the labels and the losses are
  // persistent. Values, their gradients and batch statistics live as plan_training_memory says
  // (from their first write to their last read, in plan steps), sharing memory where lifetimes do
  // not overlap; with opt.reuse_memory off each gets its own buffer for the whole run.
  std::vector<int> value(nodes.size(), -1), grad(nodes.size(), -1), mean(nodes.size(), -1),
      invstd(nodes.size(), -1), zero_bias(nodes.size(), -1), gate32(nodes.size(), -1),
      dgate32(nodes.size(), -1), mask(nodes.size(), -1), relu_mask(nodes.size(), -1),
      places(nodes.size(), -1);
  std::vector<uint64_t> dropout_offset(nodes.size(), 0);  // each dropout's elements in the stream
  uint64_t dropout_elements = 0;
  bool reuse = opt.reuse_memory;
  for (size_t id = 0; id < nodes.size(); ++id)  // views into a concat's buffer: not planned yet
    if (plan_.active[id] && plan_.view[src(int(id))].root != src(int(id))) reuse = false;
  // The values and gradients the step's ops write, read or keep.
  std::vector<bool> uses_value(nodes.size(), false), uses_grad(nodes.size(), false);
  for (const TrainOp& op : plan_.ops) {
    if (op.pass == TrainPass::Forward) uses_value[src(op.value_written())] = true;
    for (int v : op.reads) uses_value[src(v)] = true;
    for (const SavedRef& r : op.saved)
      if (r.kind == SavedKind::Value) uses_value[src(r.node)] = true;
    for (int v : op.grad_reads) uses_grad[src(v)] = true;
    for (int v : op.grad_writes) uses_grad[src(v)] = true;
  }
  std::map<std::pair<int, TrainBufferKind>, TrainBuffer> planned;
  if (reuse) {
    TrainMemoryOptions mo;
    mo.batch = N;
    mo.precision = opt.precision;
    mo.optimizer = opt.optimizer;
    mo.sgd_momentum = opt.momentum != 0;
    for (const TrainBuffer& b : plan_training_memory(g, plan_, mo).buffers)
      planned[{b.node, b.kind}] = b;
    // A linear layer's one cuBLASLt backward writes dx at the filter step, before the data step
    // where the plan starts that gradient's life.
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      const TrainOp& op = plan_.ops[i];
      if (op.pass != TrainPass::Backward || op.part != BackwardPart::Filter ||
          nodes[op.node].kind != OpKind::Linear)
        continue;
      auto it = planned.find({src(nodes[op.node].inputs[0]), TrainBufferKind::Gradient});
      if (it != planned.end()) it->second.first = std::min(it->second.first, int(i));
    }
  }
  // A buffer of `bytes` for (node, kind): planned where the plan has it, else persistent.
  auto transient = [&](int node, TrainBufferKind kind, size_t bytes) {
    auto it = reuse ? planned.find({node, kind}) : planned.end();
    if (it == planned.end()) return arena_.add_weights(bytes);
    return arena_.add_activation(bytes, it->second.first, it->second.last);
  };
  auto pool_spec = [&](int id) {
    const Node& n = nodes[id];
    PoolSpec s;
    s.x = dims(n.inputs[0]);
    s.y = dims(id);
    s.kernel = n.kernel, s.stride = n.stride, s.pad = n.pad;
    s.count_include_pad = n.count_include_pad;
    return s;
  };
  size_t reduce_scratch = 0;
  // CNNBENCH_MAXPOOL_PLACES=0: the stem pool's backward reads its input again (as before
  // 2026-12-06) instead of the places its forward kept, for the A/B on the device.
  static const bool use_places = env_int_in("CNNBENCH_MAXPOOL_PLACES", 1, 0, 1) == 1;
  // Stems padded to tensor-core widths (TrainOptions::pad_channels), by conv node: the padded
  // input, weights and weight gradient buffers.
  struct Padded {
    int channels = 0, x = -1, w = -1, dw = -1;
    int wgrad_scratch = -1;  // our weight gradient's partial sums (where it may run)
    StemWgradSpec wgrad;
    // The weight gradient's race (stem_wgrad auto, autotune), set when the backward is built and
    // read by the forward's launch (which outlives this map: hence a shared slot).
    std::shared_ptr<StemWgradOp*> race = std::make_shared<StemWgradOp*>(nullptr);
  };
  // The padded stems' weight gradient (TrainOptions::stem_wgrad): by our kernel from the image
  // itself (kernels/stem_wgrad.h), the default since call 127 (H100, ResNet-50 fp16 at 256: 481.0
  // us against cuDNN's 876.9, the step 38.74 against 39.14 ms); cuDNN's on the padded copy; or,
  // under autotune, raced (kernels/stem_wgrad_op.h) where every process need not choose alike.
  const bool stem_wgrad = opt.stem_wgrad != KernelChoice::Cudnn;
  const bool wgrad_race = opt.stem_wgrad == KernelChoice::Auto &&
                          opt.engine == EngineMode::Autotune && !opt.fp32_weight_gradients;
  std::map<int, Padded> padded;
  struct Upload {
    int id;
    std::vector<float> host;
  };
  std::vector<Upload> uploads;
  // Working copies of conv and linear parameters (mixed precision), uploaded in t.
  std::vector<std::pair<int, std::vector<uint8_t>>> copy_uploads;
  // krsc: a conv weight (OIHW on the host, KRSC here), or a linear weight whose input is a flatten
  // of C x H x W: torchvision's columns are (c, h, w), a flatten of NHWC storage reads (h, w, c),
  // the same permutation with K = out, R x S = H x W.
  // Parameter gradients are placed together, after everything else of the parameters, in the
  // order the backward writes them (its plan op, then the parameter's role), so a data-parallel
  // all-reduce finds a stretch of them that is ready as one contiguous run (harness/dist.h).
  std::vector<int> grad_order(nodes.size(), int(plan_.ops.size()));
  for (size_t i = 0; i < plan_.ops.size(); ++i)
    if (plan_.ops[i].pass == TrainPass::Backward && plan_.ops[i].param_grads)
      grad_order[plan_.ops[i].node] = std::min(grad_order[plan_.ops[i].node], int(i));
  struct DeferredGrad {
    std::string name;
    size_t bytes;
    int order;
  };
  std::vector<DeferredGrad> deferred_grads;
  auto add_param = [&](const Node& n, size_t role, bool krsc, bool copy) -> Param& {
    const ParamSpec& spec = g.params().at(n.params.at(role));
    auto it = weights.find(spec.name);
    if (it == weights.end()) throw UserError("weights have no tensor '" + spec.name + "'");
    if (int64_t(it->second.size()) != spec.numel())
      throw UserError("weights: '" + spec.name + "' has the wrong size");
    Param p;
    p.count = spec.numel();
    const size_t bytes = size_t(p.count) * sizeof(float);
    p.value = arena_.add_weights(bytes);
    if (spec.trainable) {
      deferred_grads.push_back({spec.name, bytes, grad_order[&n - nodes.data()]});
      if (opt.optimizer == Optimizer::Adam) {
        p.momentum = arena_.add_weights(bytes);
        p.second = arena_.add_weights(bytes);
      } else if (opt.momentum != 0) {
        p.momentum = arena_.add_weights(bytes);
      }
    }
    std::vector<float> host = it->second;
    if (krsc) {  // OIHW (or [out][c][h][w]) to KRSC
      p.krsc = true;
      if (n.kind == OpKind::Linear) {
        const Dims pre = nodes[flat_source(n.inputs[0])].out;
        p.oihw = {n.out.c, pre.c, pre.h, pre.w};
      } else {
        const Dims in = nodes[n.inputs[0]].out;
        p.oihw = {n.out.c, in.c / n.groups, n.kernel, n.kernel_w};
      }
      host = nchw_to_nhwc(host, p.oihw);
    }
    if (mixed && copy) {
      p.work = arena_.add_weights(size_t(p.count) * esize);
      copy_uploads.push_back({p.work, to_storage(host, t)});
    }
    uploads.push_back({p.value, std::move(host)});
    return params_[spec.name] = p;
  };
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    if (!plan_.active[id] || src(int(id)) != int(id)) continue;
    const Dims d = dims(int(id));
    const size_t vbytes = size_t(d.numel()) * esize;
    // Only what some op touches: a fused BatchNorm's (and a fused add's) value and gradient exist
    // nowhere (TrainOp::fused_act). Until 2026-12-04 they got persistent buffers, unused, which
    // more than doubled ResNet-50's fp16 arena (25.2 GiB at batch 256 against a 10.4 GiB plan).
    if (int(id) == g.input_id())
      value[id] = arena_.add_weights(vbytes);  // set between steps
    else if (uses_value[id])
      value[id] = transient(int(id), TrainBufferKind::Value, vbytes);
    if (plan_.needs_grad[id] && uses_grad[id])
      grad[id] = transient(int(id), TrainBufferKind::Gradient, vbytes);
    if (n.kind == OpKind::Conv) {
      const Dims xd = dims(n.inputs[0]);
      const bool reads_image = src(n.inputs[0]) == g.input_id();  // the stem only
      const int Cp =
          opt.pad_channels && reads_image ? padded_channels(xd.c, n.groups, opt.precision) : 0;
      if (Cp > 0) {  // the padded input (read again by the weight gradient), weights, gradient
        const size_t rows = size_t(n.out.c) * n.kernel * n.kernel_w;
        Padded& pd = padded[id];
        pd.channels = Cp;
        pd.x = arena_.add_weights(size_t(rows_of(xd)) * Cp * esize);
        pd.w = arena_.add_weights(rows * Cp * esize);
        pd.dw = arena_.add_weights(rows * Cp * sizeof(float));
        padded_w_.push_back(pd.w);
        padded_dw_.push_back(pd.dw);
        StemWgradSpec& ws = pd.wgrad;
        ws.x = xd, ws.y = d, ws.kernel = n.kernel, ws.kernel_w = n.kernel_w, ws.stride = n.stride;
        ws.pad = n.pad, ws.pad_w = n.pad_w;
        if (stem_wgrad && n.groups == 1 && n.dilation == 1 && stem_wgrad_eligible(t, ws))
          pd.wgrad_scratch = arena_.add_weights(stem_wgrad_geometry(ws).scratch);
      }
      add_param(n, 0, true, true);
      if (n.bias) {
        add_param(n, 1, false, true);
        reduce_scratch = std::max(reduce_scratch, channel_reduce_scratch_bytes(rows_of(d), d.c));
      } else {
        zero_bias[id] = arena_.add_weights(size_t(n.out.c) * esize);  // ConvSpec always adds one
      }
    } else if (n.kind == OpKind::Scale) {
      // The gate [N][C] and its gradient in fp32, for the scale's backward kernel.
      gate32[id] = arena_.add_weights(size_t(N) * d.c * sizeof(float));
      dgate32[id] = arena_.add_weights(size_t(N) * d.c * sizeof(float));
      reduce_scratch =
          std::max(reduce_scratch, channel_reduce_scratch_bytes(int64_t(d.h) * d.w, d.c, N));
    } else if (n.kind == OpKind::MaxPool && use_places) {
      // The stem pool's first-maximum places (a byte an output element), written by the forward
      // and read by the backward instead of the pool's input: persistent, a fifth of y's fp16
      // bytes beside the activations (51 MB for ResNet-50 at 256).
      const PoolSpec ps = pool_spec(int(id));
      if (maxpool_places_apply(t, ps))
        places[id] = arena_.add_weights(std::max<size_t>(maxpool_places_bytes(ps), 16));
    } else if (n.kind == OpKind::Dropout) {
      mask[id] = transient(int(id), TrainBufferKind::DropoutMask, size_t(d.numel()));
      dropout_offset[id] = dropout_elements;
      dropout_elements += uint64_t(d.numel());
    } else if (n.kind == OpKind::Linear) {
      const Dims pre = nodes[flat_source(n.inputs[0])].out;
      add_param(n, 0, pre.h * pre.w > 1, true);
      add_param(n, 1, false, true);
    } else if (n.kind == OpKind::BatchNorm) {
      for (size_t role = 0; role < 4; ++role) add_param(n, role, false, false);  // not the counter
      mean[id] = transient(int(id), TrainBufferKind::BnStats, size_t(n.out.c) * sizeof(float));
      invstd[id] = transient(int(id), TrainBufferKind::BnStats, size_t(n.out.c) * sizeof(float));
      reduce_scratch = std::max(reduce_scratch, channel_reduce_scratch_bytes(rows_of(d), d.c));
    }
  }
  // The fused residual tails' ReLU masks (TrainOp::relu_mask), by the ReLU.
  for (const TrainOp& op : plan_.ops)
    if (op.pass == TrainPass::Forward && op.relu_mask)
      relu_mask[op.fused_act] = transient(op.fused_act, TrainBufferKind::ReluMask,
                                          relu_mask_bytes(dims(op.fused_act).numel(), esize));
  std::stable_sort(deferred_grads.begin(), deferred_grads.end(),
                   [](const DeferredGrad& a, const DeferredGrad& b) { return a.order < b.order; });
  for (const DeferredGrad& d : deferred_grads)
    params_.at(d.name).grad = arena_.add_weights(d.bytes);
  const int scratch_buf = arena_.add_weights(std::max<size_t>(reduce_scratch, 1));
  input_buf_ = value[g.input_id()];
  labels_buf_ = arena_.add_weights(size_t(N) * sizeof(int));
  std::vector<int> xent_scratch;
  for (size_t h = 0; h < plan_.heads.size(); ++h) {
    loss_bufs_.push_back(arena_.add_weights(sizeof(float)));
    xent_scratch.push_back(arena_.add_weights(xent_scratch_bytes(N)));
  }
  if (scaled) loss_scale_buf_ = arena_.add_weights(sizeof(LossScaleState));
  // Dropout's counter: each step draws fresh masks at offset *counter (advanced after the step).
  const int dropout_counter = dropout_elements ? arena_.add_weights(sizeof(uint64_t)) : -1;
  if (opt.optimizer == Optimizer::Adam) step_buf_ = arena_.add_weights(sizeof(int));
  arena_.plan();
  arena_.allocate();
  mark("plan and buffers");
  // Everything starts at zero: gradients, momentum, the zero biases, xent's counter.
  CNN_CHECK_CUDA(cudaMemset(static_cast<char*>(arena_.ptr(input_buf_)) - arena_.offset(input_buf_),
                            0, arena_.bytes(MemKind::Weights)));
  for (const Upload& u : uploads)
    CNN_CHECK_CUDA(cudaMemcpy(arena_.ptr(u.id), u.host.data(), u.host.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
  for (const auto& [id, bytes] : copy_uploads)
    CNN_CHECK_CUDA(cudaMemcpy(arena_.ptr(id), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  LossScaleState* const ls =
      scaled ? static_cast<LossScaleState*>(arena_.ptr(loss_scale_buf_)) : nullptr;
  auto reset_loss_scale = [&] {
    if (!ls) return;
    const LossScaleState init = loss_scale_initial_state(opt.initial_loss_scale);
    CNN_CHECK_CUDA(cudaMemcpy(ls, &init, sizeof init, cudaMemcpyHostToDevice));
  };
  reset_loss_scale();

  // 2. The step's launches, in plan order. `prep[i]`: the library op run_[i] runs, if any.
  auto vptr = [&](int id) {
    if (value[src(id)] < 0)
      throw std::logic_error("training: no buffer for value " + nodes[id].name);
    return arena_.ptr(value[src(id)]);
  };
  auto gptr = [&](int id) {
    if (grad[src(id)] < 0)
      throw std::logic_error("training: no buffer for gradient " + nodes[id].name);
    return arena_.ptr(grad[src(id)]);
  };
  auto param_of = [&](const Node& n, size_t role) -> const Param& {
    return params_.at(g.params()[n.params[role]].name);
  };
  auto pval = [&](const Node& n, size_t role) { return fptr(param_of(n, role).value); };
  // A parameter's gradient, for the launch about to be added (add() below): that launch writes it.
  auto pgrad = [&](const Node& n, size_t role) {
    grad_writer_[g.params()[n.params[role]].name] = int(run_.size());
    return fptr(param_of(n, role).grad);
  };
  // What the forward and backward-data read: the working copy in t, or the fp32 master.
  auto wval = [&](const Node& n, size_t role) -> void* {
    const Param& p = param_of(n, role);
    return p.work >= 0 ? arena_.ptr(p.work) : arena_.ptr(p.value);
  };
  std::vector<std::pair<ConvBackwardOp*, std::string>> filter_ops;
  std::vector<std::string> fp32_grads;  // parameters whose gradient our kernels write in fp32
  std::vector<std::pair<StemWgradOp*, std::string>> wgrad_races;  // theirs or ours: after prepare
  auto conv_spec = [&](int id) {
    const Node& n = nodes[id];
    ConvSpec s;
    s.name = n.name;
    s.x = dims(n.inputs[0]);
    s.y = dims(id);
    s.kernel = n.kernel, s.kernel_w = n.kernel_w, s.stride = n.stride;
    s.pad = n.pad, s.pad_w = n.pad_w, s.dilation = n.dilation, s.groups = n.groups;
    s.precision = opt.precision;
    return s;
  };
  auto lrn_spec = [&](int id) {
    const Node& n = nodes[id];
    LrnSpec s;
    s.x = dims(id);
    s.size = n.lrn_size, s.alpha = n.lrn_alpha, s.beta = n.lrn_beta, s.k = n.lrn_k;
    return s;
  };
  auto bn_spec = [&](int id) {
    BnTrainSpec s;
    s.rows = rows_of(dims(id));
    s.channels = nodes[id].out.c;
    s.eps = nodes[id].eps;
    return s;
  };
  void* const scratch = arena_.ptr(scratch_buf);
  // The stem's BatchNorm + ReLU fused into the max pool with places (opt.stem_pool_fused): the
  // BatchNorm's forward writes its statistics only, and the pool reads the BatchNorm's input
  // through them (launch_bn_relu_maxpool_forward_places), so the activation is never written.
  // Only where that activation is read by the pool alone in the forward, nothing in the backward
  // reads it (the pool's backward reads its places; the BatchNorm's recomputes ReLU's mask from
  // x: no residual, no bits, bn_mask_from_input) and the BatchNorm's rows are dense packs.
  std::map<int, int> pool_bn;   // pool node -> the BatchNorm node fused into it
  std::set<int> bn_stats_only;  // those BatchNorm nodes: their forward writes statistics only
  if (opt.stem_pool_fused && opt.bn_mask_from_input && bn_relu_masks_available()) {
    std::map<int, int> forward_readers;
    std::map<int, const TrainOp*> bn_by_act;  // a fused activation's value -> its BatchNorm's op
    for (const TrainOp& op : plan_.ops)
      if (op.pass == TrainPass::Forward) {
        for (int r : op.reads) ++forward_readers[r];
        if (nodes[op.node].kind == OpKind::BatchNorm && op.fused_act >= 0)
          bn_by_act[op.fused_act] = &op;
      }
    for (const TrainOp& op : plan_.ops) {
      if (op.pass != TrainPass::Forward || nodes[op.node].kind != OpKind::MaxPool ||
          places[op.node] < 0 || nodes[op.node].inputs.empty())
        continue;
      const int a = src(nodes[op.node].inputs[0]);
      const auto it = bn_by_act.find(a);
      if (it == bn_by_act.end()) continue;
      const TrainOp& f = *it->second;
      if (nodes[a].kind != OpKind::ReLU || f.residual >= 0 || f.relu_mask ||
          forward_readers[a] != 1 || nodes[f.node].out.c % int(16 / esize) != 0)
        continue;
      pool_bn[op.node] = f.node;
      bn_stats_only.insert(f.node);
    }
  }
  stem_pools_fused_ = int(pool_bn.size());
  std::vector<Op*> prep;
  std::string label;  // the op being added: its pass, kind and layer
  int op_index = -1;  // and its index in plan_.ops
  auto add = [&](std::function<void(cudaStream_t)> f, Op* op = nullptr) {
    run_.push_back(std::move(f));
    labels_.push_back(label);
    launch_op_.push_back(op_index);
    prep.push_back(op);
  };
  auto own = [&](std::unique_ptr<Op> op) {
    ops_.push_back(std::move(op));
    return ops_.back().get();
  };
  for (const TrainOp& op : plan_.ops) {
    const int id = op.node;
    const Node& n = nodes[id];
    const int x = n.inputs.empty() ? -1 : src(n.inputs[0]);
    label = op.label(g);
    op_index = int(&op - plan_.ops.data());
    if (op.pass == TrainPass::Forward) {
      void* y = vptr(op.value_written());  // a fused ReLU's value: the BatchNorm's has none
      switch (n.kind) {
        case OpKind::Conv: {
          ConvBuffers b{vptr(x), wval(n, 0), n.bias ? wval(n, 1) : arena_.ptr(zero_bias[id]),
                        nullptr, y};
          ConvSpec cs = conv_spec(id);
          auto pd = padded.find(id);
          if (pd != padded.end()) {  // this step's weights and input, widened with zeros
            const int C = cs.x.c, Cp = pd->second.channels;
            const int64_t wrows = int64_t(n.out.c) * n.kernel * n.kernel_w, xrows = rows_of(cs.x);
            void* wp = arena_.ptr(pd->second.w);
            void* xp = arena_.ptr(pd->second.x);
            const void *w0 = b.w, *x0 = b.x;
            cs.x.c = Cp;
            b.x = xp, b.w = wp;
            // Our stem kernel beside cuDNN's padded conv, reading the input itself. The padded
            // copy of the input is written while something reads it: cuDNN's conv, or cuDNN's
            // weight gradient; not where our forward won the race (runs_cudnn() is settled by
            // prepare, before any step runs) and our weight gradient reads the image itself.
            const bool race = opt.stem == StemChoice::Cnnbench ||
                              (opt.stem == StemChoice::Auto && opt.engine == EngineMode::Autotune);
            StemConvOp* ours = nullptr;
            if (race && stem_eligible(cs, C) && stem_aligned(x0, b))
              ours = static_cast<StemConvOp*>(
                  own(std::make_unique<StemConvOp>(cs, b, x0, C, opt.stem, false)));
            // Whether our weight gradient reads the image itself: settled by the race's prepare
            // where it races (false before: cuDNN's candidates are built on a real copy).
            const bool wgrad_kernel = pd->second.wgrad_scratch >= 0;
            const std::shared_ptr<StemWgradOp*> wgrad_slot = pd->second.race;
            add([=](cudaStream_t st) {
              launch_pad_channels(t, wp, Cp, w0, C, wrows, st);  // read by both forwards
              const bool wgrad_ours = wgrad_kernel && (!*wgrad_slot || (*wgrad_slot)->runs_ours());
              if (!(ours && !ours->runs_cudnn() && wgrad_ours))
                launch_pad_channels(t, xp, Cp, x0, C, xrows, st);
            });
            if (ours) {
              add([ours](cudaStream_t s) { ours->run(s); }, ours);
              break;
            }
          }
          Op* c = own(std::make_unique<ConvOp>(cs, b));
          add([c](cudaStream_t s) { c->run(s); }, c);
          break;
        }
        case OpKind::BatchNorm: {
          // Fused: y = act(bn(x) + z), written as the activation's value.
          BnTrainSpec s = bn_spec(id);
          s.act = op.fused_act >= 0 ? act_of(nodes[op.fused_act].kind) : Act::None;
          const void* in = vptr(x);
          const void* z = op.residual >= 0 ? vptr(op.residual) : nullptr;
          float *ga = pval(n, 0), *be = pval(n, 1), *rm = pval(n, 2), *rv = pval(n, 3);
          float *mu = fptr(mean[id]), *is = fptr(invstd[id]);
          uint8_t* mk =
              op.relu_mask ? static_cast<uint8_t*>(arena_.ptr(relu_mask[op.fused_act])) : nullptr;
          void* const yw = bn_stats_only.count(id) ? nullptr : y;  // the pool applies it
          add([=](cudaStream_t st) {
            launch_bn_forward_train(t, in, z, yw, ga, be, mu, is, rm, rv, s, scratch, st, mk);
          });
          break;
        }
        case OpKind::ReLU:
        case OpKind::SiLU:
        case OpKind::Sigmoid:
        case OpKind::Add: {
          RowLayout l;
          l.rows = rows_of(dims(id));
          l.channels = n.out.c;
          const void* a = vptr(x);
          const void* z = n.kind == OpKind::Add ? vptr(n.inputs[1]) : nullptr;
          const Act act = act_of(n.kind);
          add([=](cudaStream_t st) { launch_epilogue(t, y, a, nullptr, nullptr, z, act, l, st); });
          break;
        }
        case OpKind::Scale: {  // squeeze-excitation: x * gate, the gate [N, C, 1, 1]
          const void* a = vptr(x);
          const void* gate = vptr(n.inputs[1]);
          const Dims d = dims(id);
          add([=](cudaStream_t st) { launch_scale_forward(t, a, gate, y, d, st); });
          break;
        }
        case OpKind::LRN: {
          const LrnSpec s = lrn_spec(id);
          const void* a = vptr(x);
          add([=](cudaStream_t st) { launch_lrn(t, a, y, s, st); });
          break;
        }
        case OpKind::Concat: {  // each input copied into its channel slice
          const int64_t rows = rows_of(dims(id));
          const int ld = n.out.c;
          int offset = 0;
          for (int in : n.inputs) {
            const void* from = vptr(in);
            void* to = static_cast<char*>(y) + size_t(offset) * esize;
            const int c = nodes[in].out.c;
            add([=](cudaStream_t st) { launch_copy_channels(t, to, ld, from, c, rows, c, st); });
            offset += c;
          }
          break;
        }
        case OpKind::Dropout: {
          const void* a = vptr(x);
          uint8_t* mk = static_cast<uint8_t*>(arena_.ptr(mask[id]));
          const int64_t count = dims(id).numel();
          const double p = n.dropout_p;
          DropoutRng rng;
          rng.seed = opt.dropout_seed;
          rng.offset = dropout_offset[id];
          rng.device_offset = static_cast<const uint64_t*>(arena_.ptr(dropout_counter));
          add([=](cudaStream_t st) { launch_dropout_forward(t, a, y, mk, count, p, rng, st); });
          break;
        }
        case OpKind::MaxPool:
        case OpKind::AvgPool:
        case OpKind::GlobalAvgPool:
        case OpKind::AdaptiveAvgPool: {  // to 1x1 (checked above): the global mean
          const PoolSpec s = pool_spec(id);
          const void* in = vptr(x);
          uint8_t* const pl =
              places[id] >= 0 ? static_cast<uint8_t*>(arena_.ptr(places[id])) : nullptr;
          const auto fused = pool_bn.find(id);
          if (fused != pool_bn.end()) {  // BatchNorm + ReLU applied here, from its input
            const int bn = fused->second;
            const Node& bnn = nodes[bn];
            const void* bx = vptr(src(bnn.inputs[0]));
            const float *mu = fptr(mean[bn]), *is = fptr(invstd[bn]);
            const float *ga = pval(bnn, 0), *be = pval(bnn, 1);
            add([=](cudaStream_t st) {
              launch_bn_relu_maxpool_forward_places(t, bx, mu, is, ga, be, y, pl, s, st);
            });
          } else if (n.kind == OpKind::MaxPool && pl)
            add([=](cudaStream_t st) { launch_maxpool_forward_places(t, in, y, pl, s, st); });
          else if (n.kind == OpKind::MaxPool)
            add([=](cudaStream_t st) { launch_maxpool(t, in, y, s, st); });
          else if (n.kind == OpKind::AvgPool)
            add([=](cudaStream_t st) { launch_avgpool(t, in, y, s, st); });
          else
            add([=](cudaStream_t st) { launch_global_avgpool(t, in, y, s, st); });
          break;
        }
        case OpKind::Linear: {
          LinearSpec s;
          s.name = n.name;
          s.batch = N;
          s.in_features = nodes[n.inputs[0]].out.c;
          s.out_features = n.out.c;
          s.precision = opt.precision;
          Op* l = own(std::make_unique<LinearOp>(s, vptr(x), wval(n, 0), wval(n, 1), y));
          add([l](cudaStream_t st) { l->run(st); }, l);
          break;
        }
        default:
          throw std::logic_error(std::string("training: no forward for ") + op_kind_name(n.kind));
      }
    } else if (op.pass == TrainPass::Loss) {
      if (op.accumulate.at(0)) throw std::logic_error("training: a head's logits feed another op");
      const int h =
          int(std::find(plan_.heads.begin(), plan_.heads.end(), id) - plan_.heads.begin());
      const void* logits = vptr(id);
      void* dlogits = gptr(id);
      const int* labels = static_cast<const int*>(arena_.ptr(labels_buf_));
      float* loss = fptr(loss_bufs_[h]);
      void* xs = arena_.ptr(xent_scratch[h]);
      const double w = op.loss_weight;
      const int classes = n.out.c;
      const float* scale = ls ? loss_scale_field(ls) : nullptr;
      add([=](cudaStream_t st) {
        launch_softmax_xent(t, logits, labels, N, classes, w, scale, loss, dlogits, xs, st);
      });
    } else {  // Backward
      // dy of the node, or of the ReLU fused into its BatchNorm (TrainOp::grad_reads).
      const void* dy = gptr(op.grad_reads.empty() ? id : op.grad_reads[0]);
      auto dx_of = [&](size_t i) { return gptr(op.grad_writes.at(i)); };
      auto acc_of = [&](size_t i) { return bool(op.accumulate.at(i)); };
      switch (n.kind) {
        case OpKind::Conv: {
          ConvBackwardSpec s = ConvBackwardSpec::of(conv_spec(id));
          s.fp32_dw = opt.fp32_weight_gradients;
          ConvBackwardBuffers b;
          if (op.part == BackwardPart::Filter) {
            auto pd = padded.find(id);
            if (pd == padded.end()) {
              b.x = vptr(x), b.dy = dy, b.dw = pgrad(n, 0);
              Op* c = own(std::make_unique<ConvBackwardOp>(s, ConvGrad::Filter, b));
              add([c](cudaStream_t st) { c->run(st); }, c);
              filter_ops.push_back({static_cast<ConvBackwardOp*>(c), g.params()[n.params[0]].name});
            } else if (pd->second.wgrad_scratch >= 0 && wgrad_race) {  // ours against cuDNN's
              StemWgradOp::Ours o;
              o.t = t, o.image = vptr(x), o.dy = dy, o.dw = pgrad(n, 0);
              o.scratch = arena_.ptr(pd->second.wgrad_scratch), o.spec = pd->second.wgrad;
              StemWgradOp::Cudnn cd;
              cd.spec = s;
              cd.spec.x.c = pd->second.channels;
              cd.buffers.x = arena_.ptr(pd->second.x), cd.buffers.dy = dy;
              cd.buffers.dw = arena_.ptr(pd->second.dw);
              cd.channels = s.x.c, cd.rows = int64_t(n.out.c) * n.kernel * n.kernel_w;
              cd.dw = pgrad(n, 0);
              auto* r = static_cast<StemWgradOp*>(own(std::make_unique<StemWgradOp>(o, cd)));
              *pd->second.race = r;
              add([r](cudaStream_t st) { r->run(st); }, r);
              wgrad_races.push_back({r, g.params()[n.params[0]].name});
            } else if (pd->second.wgrad_scratch >= 0) {  // ours, from the image itself, in fp32
              const StemWgradSpec ws = pd->second.wgrad;
              const void* image = vptr(x);
              float* dw = pgrad(n, 0);
              void* part = arena_.ptr(pd->second.wgrad_scratch);
              add([=](cudaStream_t st) { launch_stem_wgrad(t, image, dy, dw, ws, part, st); });
              fp32_grads.push_back(g.params()[n.params[0]].name);
            } else {  // dW of the padded conv, then its first C channels into the parameter's
              const int C = s.x.c, Cp = pd->second.channels;
              s.x.c = Cp;
              b.x = arena_.ptr(pd->second.x), b.dy = dy, b.dw = arena_.ptr(pd->second.dw);
              auto* c = static_cast<ConvBackwardOp*>(
                  own(std::make_unique<ConvBackwardOp>(s, ConvGrad::Filter, b)));
              add([c](cudaStream_t st) { c->run(st); }, c);
              filter_ops.push_back({c, g.params()[n.params[0]].name});
              const void* wide = b.dw;
              void* narrow = pgrad(n, 0);  // written by the launch below
              const int64_t rows = int64_t(n.out.c) * n.kernel * n.kernel_w;
              add([=](cudaStream_t st) {
                launch_copy_channels(c->dw_type(), narrow, C, wide, Cp, rows, C, st);
              });
            }
            if (n.bias) {
              float* db = pgrad(n, 1);
              const int64_t rows = rows_of(dims(id));
              const int C = n.out.c;
              add([=](cudaStream_t st) {
                launch_bias_backward(t, dy, 0, db, rows, C, scratch, st);
              });
            }
          } else {
            s.accumulate = acc_of(0);
            b.w = wval(n, 0), b.dy = dy, b.dx = dx_of(0);
            Op* c = own(std::make_unique<ConvBackwardOp>(s, ConvGrad::Data, b));
            add([c](cudaStream_t st) { c->run(st); }, c);
          }
          break;
        }
        case OpKind::Linear: {
          // One cuBLASLt op computes dW, db and dx at the filter part; the data part (next in the
          // plan) has nothing left to run.
          if (op.part == BackwardPart::Data) break;
          LinearBackwardSpec s;
          s.name = n.name;
          s.batch = N;
          s.in_features = nodes[n.inputs[0]].out.c;
          s.out_features = n.out.c;
          s.precision = opt.precision;
          LinearBackwardBuffers b;
          b.x = vptr(x), b.w = wval(n, 0), b.dy = dy, b.dw = pgrad(n, 0), b.db = pgrad(n, 1);
          for (const TrainOp& d : plan_.ops)
            if (d.pass == TrainPass::Backward && d.node == id && d.part == BackwardPart::Data) {
              b.dx = gptr(d.grad_writes.at(0));
              s.accumulate_dx = d.accumulate.at(0);
            }
          Op* l = own(std::make_unique<LinearBackwardOp>(s, b));
          add([l](cudaStream_t st) { l->run(st); }, l);
          break;
        }
        case OpKind::BatchNorm: {
          // Fused: dy is the activation's gradient (ReLU: masked by its saved value), and a
          // residual's gradient is written too (TrainOp::fused_add).
          BnTrainSpec s = bn_spec(id);
          s.act = op.fused_act >= 0 ? act_of(nodes[op.fused_act].kind) : Act::None;
          // ReLU's mask: recomputed from x where no residual is inside the ReLU (saves reading
          // y twice; launch_bn_backward), read as bits where the forward wrote them
          // (TrainOp::relu_mask), else read from the saved y.
          const bool mask_from_x = opt.bn_mask_from_input && op.residual < 0;
          const uint8_t* mk = op.relu_mask
                                  ? static_cast<const uint8_t*>(arena_.ptr(relu_mask[op.fused_act]))
                                  : nullptr;
          const void* y = s.act == Act::ReLU && !mask_from_x && !mk ? vptr(op.fused_act) : nullptr;
          void *dx = nullptr, *dz = nullptr;
          bool acc = false, acc_z = false;
          for (size_t i = 0; i < op.grad_writes.size(); ++i) {
            if (op.grad_writes[i] == x && !dx)
              dx = dx_of(i), acc = acc_of(i);
            else if (op.grad_writes[i] == op.residual)
              dz = dx_of(i), acc_z = acc_of(i);
          }
          if (!dx) throw std::logic_error("training: BatchNorm on the image");
          const void* dyb = dy;
          const void* in = vptr(x);
          const float *ga = pval(n, 0), *be = pval(n, 1), *mu = fptr(mean[id]),
                      *is = fptr(invstd[id]);
          float *dga = pgrad(n, 0), *dbe = pgrad(n, 1);
          add([=](cudaStream_t st) {
            launch_bn_backward(t, in, y, dyb, dx, ga, be, mu, is, dga, dbe, s, acc, dz, acc_z,
                               scratch, st, mk);
          });
          break;
        }
        case OpKind::ReLU:
        case OpKind::SiLU:
        case OpKind::Sigmoid:
        case OpKind::Add: {
          GradLayout l;
          l.rows = rows_of(dims(id));
          l.channels = n.out.c;
          // ReLU: dx = dy * (y > 0); sigmoid from its output, SiLU from its input; add: each
          // input's gradient is dy (copied or added).
          const Act act = act_of(n.kind);
          const void* saved = n.kind == OpKind::ReLU || n.kind == OpKind::Sigmoid ? vptr(id)
                              : n.kind == OpKind::SiLU                            ? vptr(x)
                                                                                  : dy;
          for (size_t i = 0; i < op.grad_writes.size(); ++i) {
            void* dx = dx_of(i);
            const bool acc = acc_of(i);
            add([=](cudaStream_t st) { launch_act_backward(t, act, saved, dy, dx, l, acc, st); });
          }
          break;
        }
        case OpKind::Scale: {
          // grad_writes follow the inputs that need a gradient, in order: x, then the gate.
          const int gate_node = src(n.inputs[1]);
          size_t w = 0;
          void* dx = nullptr;
          bool acc_x = false;
          if (plan_.needs_grad[x]) dx = dx_of(w), acc_x = acc_of(w), ++w;
          if (!dx) throw std::logic_error("training: a scale whose input needs no gradient");
          const bool gate_grad = plan_.needs_grad[gate_node];
          const bool acc_gate = gate_grad && acc_of(w);
          void* dgate = gate_grad ? dx_of(w) : nullptr;
          const Dims d = dims(id);
          const int64_t nc = int64_t(d.n) * d.c;
          const void* a = vptr(x);
          const void* gate = vptr(gate_node);
          float* g32 = fptr(gate32[id]);
          float* dg32 = fptr(dgate32[id]);
          const bool direct = t == DType::F32;
          add([=](cudaStream_t st) {
            const float* gf = direct ? static_cast<const float*>(gate) : g32;
            if (!direct) launch_convert(t, gate, DType::F32, g32, nc, false, st);
            launch_scale_backward(t, a, gf, dy, dx, dg32, d, acc_x, scratch, st);
            if (dgate) launch_convert(DType::F32, dg32, t, dgate, nc, acc_gate, st);
          });
          break;
        }
        case OpKind::LRN: {
          if (op.grad_writes.empty()) break;
          const LrnSpec s = lrn_spec(id);
          const void* a = vptr(x);
          void* dx = dx_of(0);
          const bool acc = acc_of(0);
          add([=](cudaStream_t st) { launch_lrn_backward(t, a, dy, dx, s, acc, st); });
          break;
        }
        case OpKind::Concat: {
          // Each input that needs a gradient takes its slice of dy, copied or added, in the
          // order of grad_writes (the inputs', skipping those without one).
          const int64_t rows = rows_of(dims(id));
          const int ld = n.out.c;
          int offset = 0;
          size_t w = 0;
          for (int in : n.inputs) {
            const int c = nodes[in].out.c;
            if (plan_.needs_grad[src(in)]) {
              const void* from = static_cast<const char*>(dy) + size_t(offset) * esize;
              void* to = dx_of(w);
              const bool acc = acc_of(w);
              ++w;
              add([=](cudaStream_t st) {
                if (acc)
                  launch_grad_add(t, to, c, from, ld, rows, c, st);
                else
                  launch_copy_channels(t, to, c, from, ld, rows, c, st);
              });
            }
            offset += c;
          }
          break;
        }
        case OpKind::Dropout: {
          if (op.grad_writes.empty()) break;
          void* dx = dx_of(0);
          const bool acc = acc_of(0);
          const uint8_t* mk = static_cast<const uint8_t*>(arena_.ptr(mask[id]));
          const int64_t count = dims(id).numel();
          const double p = n.dropout_p;
          add([=](cudaStream_t st) { launch_dropout_backward(t, dy, dx, mk, count, p, acc, st); });
          break;
        }
        case OpKind::MaxPool:
        case OpKind::AvgPool:
        case OpKind::GlobalAvgPool:
        case OpKind::AdaptiveAvgPool: {
          if (op.grad_writes.empty()) break;
          const PoolSpec s = pool_spec(id);
          const void* in = vptr(x);
          void* dx = dx_of(0);
          const bool acc = acc_of(0);
          const uint8_t* const pl =
              places[id] >= 0 ? static_cast<const uint8_t*>(arena_.ptr(places[id])) : nullptr;
          if (n.kind == OpKind::MaxPool && pl)
            add([=](cudaStream_t st) {
              launch_maxpool_backward_places(t, pl, dy, dx, s, acc, st);
            });
          else if (n.kind == OpKind::MaxPool)
            add([=](cudaStream_t st) { launch_maxpool_backward(t, in, dy, dx, s, acc, st); });
          else if (n.kind == OpKind::AvgPool)
            add([=](cudaStream_t st) { launch_avgpool_backward(t, dy, dx, s, acc, st); });
          else
            add([=](cudaStream_t st) { launch_global_avgpool_backward(t, dy, dx, s, acc, st); });
          break;
        }
        default:
          throw std::logic_error(std::string("training: no backward for ") + op_kind_name(n.kind));
      }
    }
  }

  mark("ops");
  // 4. Engines: each library op is prepared on the data the step gives it (a random batch), with
  // the tuning scratch as its workspace, then every launch of the step but the optimizer runs.
  // That pass moves the running statistics, so they are uploaded again after it.
  // The input: random_uniform(0, "input", ...) in [-1, 1), written on the device.
  fill_uniform_nhwc(arena_.ptr(input_buf_), random_stream_state(0, "input"), input_dims_,
                    storage_type(opt_.precision), -1.f, 1.f, ctx_.stream);
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  std::vector<int> labels(N);
  for (int i = 0; i < N; ++i) labels[i] = i % classes_;
  set_labels(labels);
  TuneScratch ts;
  ts.bytes = opt.tune_scratch_bytes;
  CNN_CHECK_CUDA(cudaMalloc(&ts.ptr, ts.bytes));
  try {
    for (size_t i = 0; i < run_.size(); ++i) {
      if (prep[i]) {
        prep[i]->prepare(ctx, opt.engine, opt.top_k,
                         TuneScratch{ts.ptr, std::min(ts.bytes, opt.tune_scratch_bytes)});
        if (prep[i]->workspace_bytes() >
            ts.bytes) {  // a padded weight gradient's (conv_backward.h)
          CNN_CHECK_CUDA(cudaFree(ts.ptr));
          ts.ptr = nullptr;
          ts.bytes = prep[i]->workspace_bytes();
          CNN_CHECK_CUDA(cudaMalloc(&ts.ptr, ts.bytes));
        }
        prep[i]->bind_workspace(ts.ptr, ts.bytes);
      }
      run_[i](ctx.stream);
    }
    CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  } catch (...) {
    cudaFree(ts.ptr);
    throw;
  }
  CNN_CHECK_CUDA(cudaFree(ts.ptr));
  for (auto& op : ops_) arena_.request_workspace(op->workspace_bytes());
  arena_.allocate_workspace();
  for (auto& op : ops_) op->bind_workspace(arena_.workspace(), arena_.workspace_bytes());
  for (const Upload& u : uploads)
    CNN_CHECK_CUDA(cudaMemcpy(arena_.ptr(u.id), u.host.data(), u.host.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
  reset_loss_scale();
  // A conv's weight gradient is fp32 where an engine builds it, else in t (then the optimizer
  // reads it in t): known once the ops are prepared.
  for (const auto& [op, name] : filter_ops) params_.at(name).grad_t = op->dw_type();
  for (const std::string& name : fp32_grads) params_.at(name).grad_t = DType::F32;
  for (const auto& [op, name] : wgrad_races) params_.at(name).grad_t = op->dw_type();

  mark("prepare on data");
  // 3. The optimizer, after the backward: with fp16, first the overflow check of every gradient
  // (an overflow skips the whole step), the update reading gradients divided by the loss scale,
  // then the scale's update (GradScaler). The update also refreshes the working copies.
  StepControl control;
  if (ls) {
    std::vector<GradBuffer> grads;
    for (const auto& [name, p] : params_)
      if (p.grad >= 0) grads.push_back({arena_.ptr(p.grad), p.count, p.grad_t});
    int* found_inf = found_inf_field(ls);
    optimizer_.push_back([=](cudaStream_t st) { launch_check_finite(grads, found_inf, st); });
    control.found_inf = found_inf;
    control.loss_scale = loss_scale_field(ls);
  }
  if (step_buf_ >= 0) {  // Adam's step count: advanced unless the step is skipped
    int* step = static_cast<int*>(arena_.ptr(step_buf_));
    const int* found_inf = control.found_inf;
    optimizer_.push_back([=](cudaStream_t st) { launch_step_advance(step, found_inf, st); });
    control.step = step;
  }
  SgdRef h;
  h.lr = opt.lr, h.momentum = opt.momentum, h.weight_decay = opt.weight_decay;
  AdamRef ah;
  ah.lr = opt.lr, ah.beta1 = opt.beta1, ah.beta2 = opt.beta2, ah.eps = opt.eps;
  ah.weight_decay = opt.weight_decay;
  // Every parameter in one launch per gradient type (launch_sgd_steps), the same update bit for
  // bit as a launch each, which CNNBENCH_OPT_PER_TENSOR=1 restores (for comparison).
  static const bool per_tensor = env_is_one("CNNBENCH_OPT_PER_TENSOR");
  std::vector<OptTensor> tensors;
  for (const auto& [name, p] : params_) {
    if (p.grad < 0) continue;
    OptTensor o;
    o.p = fptr(p.value);
    o.m = p.momentum >= 0 ? fptr(p.momentum) : nullptr;
    o.v = p.second >= 0 ? fptr(p.second) : nullptr;
    o.g = arena_.ptr(p.grad);
    o.gt = p.grad_t;
    o.n = p.count;
    o.copy = p.work >= 0 ? arena_.ptr(p.work) : nullptr;
    if (!per_tensor) {
      tensors.push_back(o);
      continue;
    }
    if (opt.optimizer == Optimizer::Adam)
      optimizer_.push_back([=](cudaStream_t st) {
        launch_adam_step(o.p, o.m, o.v, o.g, o.gt, o.n, ah, control, o.copy, t, st);
      });
    else
      optimizer_.push_back([=](cudaStream_t st) {
        launch_sgd_step(o.p, o.m, o.g, o.gt, o.n, h, control, o.copy, t, st);
      });
  }
  if (!tensors.empty()) {
    if (opt.optimizer == Optimizer::Adam)
      optimizer_.push_back(
          [=](cudaStream_t st) { launch_adam_steps(tensors, ah, control, t, st); });
    else
      optimizer_.push_back([=](cudaStream_t st) { launch_sgd_steps(tensors, h, control, t, st); });
  }
  if (ls) {
    const LossScaleParams lp;
    optimizer_.push_back([=](cudaStream_t st) { launch_loss_scale_update(ls, lp, st); });
  }
  if (dropout_counter >= 0) {  // the next step draws new masks
    uint64_t* counter = static_cast<uint64_t*>(arena_.ptr(dropout_counter));
    const uint64_t by = dropout_elements;
    optimizer_.push_back([=](cudaStream_t st) { launch_counter_add(counter, by, st); });
  }
  mark("optimizer");
}

TrainModel::~TrainModel() {
  ctx_.plans.clear();
}

void TrainModel::step(cudaStream_t stream) {
  forward_backward(stream);
  update(stream);
}

void TrainModel::forward_backward(cudaStream_t stream,
                                  const std::function<void(int, cudaStream_t)>& after) {
  for (size_t i = 0; i < run_.size(); ++i) {
    run_[i](stream);
    if (after) after(int(i), stream);
  }
}

void TrainModel::update(cudaStream_t stream) {
  for (auto& f : optimizer_) f(stream);
}

std::vector<TrainModel::GradientBuffer> TrainModel::gradient_buffers() const {
  std::vector<GradientBuffer> out;
  for (const auto& [name, p] : params_) {
    if (p.grad < 0) continue;
    auto it = grad_writer_.find(name);
    if (it == grad_writer_.end())
      throw std::logic_error("training: no launch writes the gradient of " + name);
    out.push_back({name, arena_.ptr(p.grad), p.count, p.grad_t, it->second});
  }
  std::sort(out.begin(), out.end(),
            [](const GradientBuffer& a, const GradientBuffer& b) { return a.ptr < b.ptr; });
  return out;
}

std::vector<TrainModel::LaunchTime> TrainModel::time_each_launch(int runs) {
  std::vector<LaunchTime> out;
  for (size_t i = 0; i < run_.size(); ++i)
    out.push_back({labels_[i], graph_us(run_[i], ctx_.stream, runs), launch_op_[i]});
  const double us = graph_us(
      [&](cudaStream_t s) {
        for (auto& f : optimizer_) f(s);
      },
      ctx_.stream, runs);
  // "optimizer step" whatever the closures, so that runs with and without the grouped update (one
  // closure, CNNBENCH_OPT_PER_TENSOR=1: one a tensor) land on the same row of a table by kind.
  out.push_back({"optimizer step (" + std::to_string(optimizer_.size()) + " closures)", us, -1});
  return out;
}

void TrainModel::set_input(const std::vector<float>& nchw) {
  upload_nchw_as_nhwc(arena_.ptr(input_buf_), nchw, input_dims_, storage_type(opt_.precision));
}

void TrainModel::set_labels(const std::vector<int>& labels) {
  if (int(labels.size()) != opt_.batch)
    throw UserError("labels: " + std::to_string(labels.size()) + " for a batch of " +
                    std::to_string(opt_.batch));
  for (int l : labels)
    if (l < 0 || l >= classes_) throw UserError("label " + std::to_string(l) + " out of range");
  CNN_CHECK_CUDA(cudaMemcpy(arena_.ptr(labels_buf_), labels.data(), labels.size() * sizeof(int),
                            cudaMemcpyHostToDevice));
}

float TrainModel::loss() const {
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  float sum = 0;
  for (int id : loss_bufs_) {
    float l = 0;
    CNN_CHECK_CUDA(cudaMemcpy(&l, arena_.ptr(id), sizeof(float), cudaMemcpyDeviceToHost));
    sum += l;
  }
  return sum;
}

std::vector<float> TrainModel::download_param(const Param& p, int id, DType t) const {
  const std::vector<float> d = download(arena_.ptr(id), size_t(p.count), t);
  return p.krsc ? nhwc_to_nchw(d, p.oihw) : d;
}

std::vector<float> TrainModel::parameter(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end()) throw UserError("training: no parameter '" + name + "'");
  return download_param(it->second, it->second.value, DType::F32);
}

std::vector<float> TrainModel::gradient(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end() || it->second.grad < 0)
    throw UserError("training: no gradient of '" + name + "'");
  return download_param(it->second, it->second.grad, it->second.grad_t);
}

TrainModel::Footprint TrainModel::footprint() const {
  Footprint f;
  for (const auto& [name, p] : params_) {
    f.weights += arena_.size(p.value) + (p.work >= 0 ? arena_.size(p.work) : 0);
    if (p.grad >= 0) f.gradients += arena_.size(p.grad);
    if (p.momentum >= 0) f.optimizer_state += arena_.size(p.momentum);
    if (p.second >= 0) f.optimizer_state += arena_.size(p.second);
  }
  for (int id : padded_w_) f.weights += arena_.size(id);
  for (int id : padded_dw_) f.gradients += arena_.size(id);
  return f;
}

std::vector<std::string> TrainModel::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : params_) out.push_back(name);
  return out;
}

std::vector<std::string> TrainModel::trainable_names() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : params_)
    if (p.grad >= 0) out.push_back(name);
  return out;
}

LossScaleState TrainModel::loss_scale_state() const {
  LossScaleState st;
  if (loss_scale_buf_ < 0) return st;
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx_.stream));
  CNN_CHECK_CUDA(cudaMemcpy(&st, arena_.ptr(loss_scale_buf_), sizeof st, cudaMemcpyDeviceToHost));
  return st;
}

float TrainModel::loss_scale() const {
  return loss_scale_buf_ < 0 ? 1.0f : loss_scale_state().scale;
}

int TrainModel::skipped_steps() const {
  return loss_scale_state().skipped_steps;
}

std::vector<LayerRecord> TrainModel::layers() const {
  std::vector<LayerRecord> out;
  for (const auto& op : ops_) out.push_back(op->record());
  return out;
}

}  // namespace cnnbench
