#include "networks/train_plan.h"

#include <algorithm>
#include <stdexcept>

#include "harness/offsets.h"

namespace cnnbench {

namespace {

// Aliases in training: views that compute nothing either way. (Dropout, an alias at inference,
// is an op here.)
bool is_train_alias(const Graph& g, const Node& n) {
  if (n.kind == OpKind::Flatten) return true;
  if (n.kind == OpKind::AdaptiveAvgPool) {
    const Dims in = g.node(n.inputs[0]).out;
    return in.h == n.out.h && in.w == n.out.w;
  }
  return false;
}

bool has_trainable(const Graph& g, const Node& n) {
  for (int p : n.params)
    if (g.params()[p].trainable) return true;
  return false;
}

constexpr size_t kAlign = 256;  // the arena's
size_t align_up(size_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

std::string TrainOp::label(const Graph& g) const {
  const Node& n = g.node(node);
  std::string s;
  switch (pass) {
    case TrainPass::Forward:
      s = "forward";
      break;
    case TrainPass::Loss:
      return "loss softmax_xent " + n.name;
    case TrainPass::Backward:
      s = part == BackwardPart::Filter ? "backward.filter"
          : part == BackwardPart::Data ? "backward.data"
                                       : "backward";
      break;
  }
  s += std::string(" ") + op_kind_name(n.kind) + (fused_add >= 0 ? "+add" : "") +
       (fused_act >= 0 ? std::string("+") + op_kind_name(g.node(fused_act).kind) : "") + " ";
  return s + (n.name.empty() ? "#" + std::to_string(node) : n.name);
}

const char* optimizer_name(Optimizer o) {
  return o == Optimizer::SGD ? "sgd" : "adam";
}

namespace {

// Fuses BatchNorms with what alone reads them (TrainOp::fused_act, fused_add): first the residual
// tails (BatchNorm -> Add -> ReLU), then BatchNorm -> ReLU or SiLU.
void fuse_bn_ops(const Graph& g, TrainPlan& p, bool relu_masks) {
  const auto& nodes = g.nodes();
  const int count = int(nodes.size());
  const std::vector<std::vector<int>> consumers = g.consumers();
  std::vector<int> fwd(count, -1), bwd(count, -1), grad_writers(count, 0);
  for (int i = 0; i < int(p.ops.size()); ++i) {
    const TrainOp& op = p.ops[i];
    if (op.pass == TrainPass::Forward) fwd[op.node] = i;
    if (op.pass == TrainPass::Backward && op.part == BackwardPart::Whole) bwd[op.node] = i;
    for (int v : op.grad_writes) ++grad_writers[v];
  }
  auto is_head = [&](int v) {
    return std::find(p.heads.begin(), p.heads.end(), v) != p.heads.end();
  };
  // A value of its own, no head, in no concat's slice, read by one op.
  auto single = [&](int v) {
    return p.active[v] && p.source[v] == v && !is_head(v) && p.slice_of[v] < 0 &&
           consumers[v].size() == 1 && fwd[v] >= 0;
  };
  std::vector<bool> drop(p.ops.size(), false);
  std::vector<bool> taken(count, false);

  // BatchNorm -> Add -> ReLU: the fused forward at the Add's place, the backward at the ReLU's.
  for (int a = 0; a < count; ++a) {
    const Node& an = nodes[a];
    if (an.kind != OpKind::Add || an.inputs.size() != 2 || !single(a)) continue;
    const int r = consumers[a][0];
    if (nodes[r].kind != OpKind::ReLU || !p.active[r] || p.source[r] != r || fwd[r] < 0 ||
        p.slice_of[r] >= 0)
      continue;
    int which = -1;
    for (int i : {0, 1})
      if (which < 0 && nodes[an.inputs[i]].kind == OpKind::BatchNorm && single(an.inputs[i]))
        which = i;
    if (which < 0) continue;
    const int b = an.inputs[which], z = p.source[an.inputs[1 - which]];
    const int x = p.source[nodes[b].inputs[0]];
    if (z == b) continue;
    const bool backward = bwd[r] >= 0;
    if (backward != (bwd[a] >= 0) || backward != (bwd[b] >= 0)) continue;
    // The Add's backward right after the ReLU's (z's gradient keeps its place among its writers),
    // and the BatchNorm's input gradient written by the BatchNorm alone (moving it is safe).
    if (backward && (bwd[a] != bwd[r] + 1 || (p.needs_grad[x] && grad_writers[x] != 1))) continue;
    // The mask as bits where the kernels' 16-byte packs tile the channels (8 of 2 bytes, 4 of 4).
    const bool bits = relu_masks && backward && nodes[r].out.c % 8 == 0;
    TrainOp f = p.ops[fwd[b]];
    f.fused_act = r, f.fused_add = a, f.residual = z, f.relu_mask = bits;
    f.reads.push_back(z);
    p.ops[fwd[a]] = f;
    drop[fwd[b]] = drop[fwd[r]] = true;
    if (backward) {
      TrainOp ob = p.ops[bwd[b]];
      const TrainOp& oa = p.ops[bwd[a]];
      ob.fused_act = r, ob.fused_add = a, ob.residual = z, ob.relu_mask = bits;
      ob.grad_reads = {r};
      ob.saved.push_back(SavedRef{r, bits ? SavedKind::ReluMask : SavedKind::Value});
      for (size_t i = 0; i < oa.grad_writes.size(); ++i)
        if (oa.grad_writes[i] == z) {
          ob.grad_writes.push_back(z);
          ob.accumulate.push_back(oa.accumulate[i]);
        }
      p.ops[bwd[r]] = ob;
      drop[bwd[a]] = drop[bwd[b]] = true;
    }
    taken[b] = true;
  }

  // BatchNorm -> ReLU or SiLU, adjacent both ways.
  for (int r = 0; r < count; ++r) {
    const Node& n = nodes[r];
    if ((n.kind != OpKind::ReLU && n.kind != OpKind::SiLU) || !p.active[r] || p.source[r] != r)
      continue;
    const int b = n.inputs[0];
    if (nodes[b].kind != OpKind::BatchNorm || taken[b] || !single(b)) continue;
    if (fwd[r] != fwd[b] + 1) continue;
    const bool backward = bwd[r] >= 0;
    if (backward != (bwd[b] >= 0) || (backward && bwd[b] != bwd[r] + 1)) continue;
    p.ops[fwd[b]].fused_act = r;
    drop[fwd[r]] = true;
    if (backward) {
      TrainOp& ob = p.ops[bwd[b]];
      ob.fused_act = r;
      ob.grad_reads = {r};
      if (n.kind == OpKind::ReLU) ob.saved.push_back(SavedRef{r, SavedKind::Value});  // the mask
      drop[bwd[r]] = true;
    }
    taken[b] = true;
  }
  std::vector<TrainOp> kept;
  int forward = 0;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (drop[i]) continue;
    forward += p.ops[i].pass == TrainPass::Forward;
    kept.push_back(std::move(p.ops[i]));
  }
  p.ops = std::move(kept);
  p.forward_ops = forward;
}

}  // namespace

TrainPlan plan_training(const Graph& g, bool concat_views, bool fuse_bn_act, bool relu_masks) {
  const auto& nodes = g.nodes();
  const int count = int(nodes.size());
  const auto consumers = g.consumers();
  TrainPlan p;

  // Values through aliases.
  p.source.resize(count);
  for (int id = 0; id < count; ++id)
    p.source[id] = is_train_alias(g, nodes[id]) ? p.source[nodes[id].inputs[0]] : id;
  auto src = [&](int id) { return p.source[id]; };

  // Heads: the output, then every other sink (an auxiliary classifier).
  p.heads.push_back(g.output());
  p.head_weight.push_back(1.0);
  for (int id = 0; id < count; ++id)
    if (consumers[id].empty() && id != g.output()) {
      const Node& n = nodes[id];
      if (n.kind != OpKind::Linear || n.out.c != nodes[g.output()].out.c)
        throw std::logic_error("train plan: node " + std::to_string(id) + " (" + n.name +
                               ") reaches no loss and is no auxiliary classifier");
      p.heads.push_back(id);
      p.head_weight.push_back(kAuxLossWeight);
    }
  p.active.assign(count, false);
  for (int h : p.heads) p.active[h] = true;
  for (int id = count - 1; id >= 0; --id)
    if (p.active[id])
      for (int in : nodes[id].inputs) p.active[in] = true;
  // Consumers that run in training, by value (an alias's readers read its source).
  std::vector<std::vector<int>> readers(count);
  for (int id = 0; id < count; ++id)
    if (p.active[id] && !is_train_alias(g, nodes[id]))
      for (int in : nodes[id].inputs) readers[src(in)].push_back(id);

  // Gradients: of everything downstream of a trainable parameter.
  p.needs_grad.assign(count, false);
  for (int id = 0; id < count; ++id) {
    const Node& n = nodes[id];
    if (!p.active[id] || n.kind == OpKind::Input) continue;
    bool need = has_trainable(g, n);
    for (int in : n.inputs) need = need || p.needs_grad[src(in)];
    p.needs_grad[id] = need;
  }

  // Placement: every value owns its buffer but a concat's inputs that only the concat reads
  // (outer concats first, so that a nested concat's slice is known before its inputs are placed).
  p.view.assign(count, ValueView{});
  p.slice_of.assign(count, -1);
  for (int id = 0; id < count; ++id)
    if (p.active[id] && src(id) == id) p.view[id] = {id, 0, nodes[id].out.c};
  std::vector<std::vector<int>> copies(count);  // per concat: inputs it copies
  for (int id = count - 1; id >= 0; --id) {
    if (!p.active[id] || nodes[id].kind != OpKind::Concat) continue;
    const ValueView base = p.view[id];
    int offset = 0;
    std::vector<int> seen;
    for (int in : nodes[id].inputs) {
      const int v = src(in);
      const bool placeable = concat_views && v == in && v != g.input_id() &&
                             readers[v].size() == 1 &&
                             std::find(seen.begin(), seen.end(), v) == seen.end();
      seen.push_back(v);
      if (placeable) {
        p.view[v] = {base.root, base.offset + offset, base.ld};
        p.slice_of[v] = id;
      } else {
        copies[id].push_back(v);
      }
      offset += nodes[in].out.c;
    }
  }

  // Forward.
  for (int id = 0; id < count; ++id) {
    const Node& n = nodes[id];
    if (!p.active[id] || n.kind == OpKind::Input || src(id) != id) continue;
    if (n.kind == OpKind::Concat && copies[id].empty()) continue;  // written in place
    TrainOp op;
    op.pass = TrainPass::Forward;
    op.node = id;
    if (n.kind == OpKind::Concat)
      op.reads = copies[id];
    else
      for (int in : n.inputs) op.reads.push_back(src(in));
    p.ops.push_back(op);
  }
  p.forward_ops = int(p.ops.size());

  // Losses: softmax cross-entropy of each head's logits, forward and dlogits in one op.
  std::vector<int> writes(count, 0);  // gradient writes so far, per value
  auto write_grad = [&](TrainOp& op, int v) {
    op.grad_writes.push_back(v);
    op.accumulate.push_back(writes[v]++ > 0);
  };
  for (size_t h = 0; h < p.heads.size(); ++h) {
    TrainOp op;
    op.pass = TrainPass::Loss;
    op.node = p.heads[h];
    op.reads = {src(p.heads[h])};
    op.loss_weight = p.head_weight[h];
    write_grad(op, src(p.heads[h]));
    p.ops.push_back(op);
  }
  p.loss_ops = int(p.heads.size());

  // Backward, in reverse node order: every consumer of a value runs before its producer, so a
  // gradient is complete when its producer's backward reads it.
  for (int id = count - 1; id >= 0; --id) {
    const Node& n = nodes[id];
    if (!p.active[id] || !p.needs_grad[id] || src(id) != id) continue;
    auto make = [&](BackwardPart part) {
      TrainOp op;
      op.pass = TrainPass::Backward;
      op.part = part;
      op.node = id;
      op.grad_reads = {id};
      return op;
    };
    auto value = [](int v) { return SavedRef{v, SavedKind::Value}; };
    auto grads_to_inputs = [&](TrainOp& op, const std::vector<int>& inputs) {
      for (int in : inputs)
        if (p.needs_grad[src(in)]) write_grad(op, src(in));
    };
    const int x = n.inputs.empty() ? -1 : src(n.inputs[0]);
    switch (n.kind) {
      case OpKind::Conv:
      case OpKind::Linear: {
        // Filter first: its saved input is released before the data gradient is allocated.
        TrainOp f = make(BackwardPart::Filter);
        f.saved = {value(x)};
        f.param_grads = true;
        p.ops.push_back(f);
        if (p.needs_grad[x]) {
          TrainOp d = make(BackwardPart::Data);  // the weights are resident: nothing saved
          write_grad(d, x);
          p.ops.push_back(d);
        }
        break;
      }
      case OpKind::BatchNorm: {
        TrainOp op = make(BackwardPart::Whole);
        op.saved = {value(x), SavedRef{id, SavedKind::BnStats}};
        op.param_grads = has_trainable(g, n);
        grads_to_inputs(op, n.inputs);
        p.ops.push_back(op);
        break;
      }
      case OpKind::Concat: {
        if (copies[id].empty()) break;  // its inputs' gradients are slices of its own
        TrainOp op = make(BackwardPart::Whole);
        grads_to_inputs(op, copies[id]);
        p.ops.push_back(op);
        break;
      }
      default: {
        TrainOp op = make(BackwardPart::Whole);
        switch (n.kind) {
          case OpKind::ReLU:
          case OpKind::Sigmoid:  // dx = dy * y * (1 - y)
            op.saved = {value(id)};
            break;
          case OpKind::SiLU:  // dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x)
            op.saved = {value(x)};
            break;
          case OpKind::MaxPool:
          case OpKind::LRN:
            op.saved = {value(x), value(id)};
            break;
          case OpKind::Scale:  // dx = dy * gate, dgate = sum_hw dy * x
            op.saved = {value(x), value(src(n.inputs[1]))};
            break;
          case OpKind::Dropout:
            op.saved = {SavedRef{id, SavedKind::DropoutMask}};
            break;
          case OpKind::Add:
          case OpKind::AvgPool:
          case OpKind::GlobalAvgPool:
          case OpKind::AdaptiveAvgPool:
            break;  // shapes only
          default:
            throw std::logic_error(std::string("train plan: no backward for ") +
                                   op_kind_name(n.kind));
        }
        grads_to_inputs(op, n.inputs);
        p.ops.push_back(op);
      }
    }
  }

  if (fuse_bn_act) fuse_bn_ops(g, p, relu_masks);
  for (const TrainOp& op : p.ops)
    if (op.param_grads)
      for (int pi : nodes[op.node].params)
        if (g.params()[pi].trainable) p.trainable_params += g.params()[pi].numel();
  return p;
}

TrainMemory plan_training_memory(const Graph& g, const TrainPlan& p, const TrainMemoryOptions& o) {
  const auto& nodes = g.nodes();
  const int count = int(nodes.size());
  const size_t esize = dtype_size(storage_type(o.precision));
  const bool mixed = o.precision == Precision::FP16 || o.precision == Precision::BF16;
  const size_t N = size_t(o.batch);
  TrainMemory m;
  m.steps = int(p.ops.size());
  m.trainable_params = p.trainable_params;

  // Persistent tensors.
  const size_t P = size_t(p.trainable_params);
  m.weights_bytes = P * esize;
  m.master_weights_bytes = mixed ? P * 4 : 0;
  m.param_grad_bytes = P * esize;
  m.optimizer_state_bytes = o.optimizer == Optimizer::Adam ? P * 8 : (o.sgd_momentum ? P * 4 : 0);
  for (int id = 0; id < count; ++id)
    if (p.active[id])
      for (int pi : nodes[id].params) {
        const ParamSpec& s = g.params()[pi];
        if (!s.trainable) m.running_stats_bytes += size_t(s.numel()) * (s.integer ? 8 : 4);
      }

  // Lifetimes of value and gradient buffers (by root), statistics and masks.
  std::vector<int> vfirst(count, -1), vlast(count, -1), gfirst(count, -1), glast(count, -1);
  std::vector<bool> vsaved(count, false);
  auto root = [&](int v) { return p.view[p.source[v]].root; };
  auto touch = [](std::vector<int>& first, std::vector<int>& last, int r, int step) {
    first[r] = first[r] < 0 ? step : std::min(first[r], step);
    last[r] = std::max(last[r], step);
  };
  std::vector<int> stats_first(count, -1), stats_last(count, -1);
  std::vector<int> rmask_first(count, -1), rmask_last(count, -1);  // ReLU masks, by the ReLU
  int last_loss = 0;
  const int input_root = root(g.input_id());
  touch(vfirst, vlast, input_root, 0);
  touch(vfirst, vlast, input_root, m.steps - 1);  // the image persists across steps
  for (int step = 0; step < m.steps; ++step) {
    const TrainOp& op = p.ops[step];
    if (op.pass == TrainPass::Forward) {
      touch(vfirst, vlast, root(op.value_written()), step);
      for (int v : op.reads) touch(vfirst, vlast, root(v), step);
      if (nodes[op.node].kind == OpKind::BatchNorm || nodes[op.node].kind == OpKind::Dropout)
        touch(stats_first, stats_last, op.node, step);
      if (op.relu_mask) touch(rmask_first, rmask_last, op.fused_act, step);
    } else if (op.pass == TrainPass::Loss) {
      for (int v : op.reads) touch(vfirst, vlast, root(v), step);
      last_loss = step;
    }
    for (const SavedRef& s : op.saved) {
      if (s.kind == SavedKind::Value) {
        touch(vfirst, vlast, root(s.node), step);
        vsaved[root(s.node)] = true;
      } else if (s.kind == SavedKind::ReluMask) {
        touch(rmask_first, rmask_last, s.node, step);
      } else {
        touch(stats_first, stats_last, s.node, step);
      }
    }
    for (int v : op.grad_reads) touch(gfirst, glast, root(v), step);
    for (int v : op.grad_writes) touch(gfirst, glast, root(v), step);
  }

  auto batched_bytes = [&](int id, size_t elem) {
    return align_up(size_t(nodes[id].out.numel()) * N * elem);
  };
  for (int r = 0; r < count; ++r) {
    if (vfirst[r] >= 0)
      m.buffers.push_back({TrainBufferKind::Value, r, batched_bytes(r, esize), vfirst[r], vlast[r],
                           bool(vsaved[r]), 0});
    if (gfirst[r] >= 0)
      m.buffers.push_back(
          {TrainBufferKind::Gradient, r, batched_bytes(r, esize), gfirst[r], glast[r], false, 0});
    if (stats_first[r] >= 0) {
      const bool bn = nodes[r].kind == OpKind::BatchNorm;
      const size_t bytes = bn ? align_up(size_t(nodes[r].out.c) * 2 * 4) : batched_bytes(r, 1);
      m.buffers.push_back({bn ? TrainBufferKind::BnStats : TrainBufferKind::DropoutMask, r, bytes,
                           stats_first[r], stats_last[r], true, 0});
    }
    if (rmask_first[r] >= 0)
      m.buffers.push_back({TrainBufferKind::ReluMask, r,
                           align_up(relu_mask_bytes(nodes[r].out.numel() * int64_t(N), esize)),
                           rmask_first[r], rmask_last[r], true, 0});
  }
  m.buffers.push_back(
      {TrainBufferKind::Labels, g.input_id(), align_up(N * 4), 0, last_loss, false, 0});

  std::vector<LiveBuffer> live;
  for (const TrainBuffer& b : m.buffers) live.push_back({b.bytes, b.first, b.last});
  const std::vector<size_t> offsets = plan_offsets(live, &m.arena_bytes);
  std::vector<size_t> at_step(m.steps, 0), saved_at(m.steps, 0);
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    TrainBuffer& b = m.buffers[i];
    b.offset = offsets[i];
    m.unplanned_bytes += b.bytes;
    for (int s = b.first; s <= b.last; ++s) {
      at_step[s] += b.bytes;
      if (b.saved) saved_at[s] += b.bytes;
    }
  }
  for (int s = 0; s < m.steps; ++s) {
    m.live_peak_bytes = std::max(m.live_peak_bytes, at_step[s]);
    m.saved_peak_bytes = std::max(m.saved_peak_bytes, saved_at[s]);
    m.transient_peak_bytes = std::max(m.transient_peak_bytes, at_step[s] - saved_at[s]);
  }
  m.saved_at_backward_bytes = saved_at[p.forward_ops];
  return m;
}

TrainMacs training_macs(const Graph& g, const TrainPlan& p) {
  TrainMacs t;
  for (const TrainOp& op : p.ops) {
    const int64_t macs = g.node_macs(op.node);
    if (op.pass == TrainPass::Forward)
      t.forward += macs;
    else if (op.pass == TrainPass::Backward && op.part == BackwardPart::Data)
      t.backward_data += macs;
    else if (op.pass == TrainPass::Backward && op.part == BackwardPart::Filter)
      t.backward_filter += macs;
  }
  return t;
}

}  // namespace cnnbench
