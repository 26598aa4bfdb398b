#include "networks/schedule.h"

#include <algorithm>
#include <stdexcept>

namespace cnnbench {

namespace {

bool is_alias(const Node& n, const Graph& g) {
  if (n.kind == OpKind::Flatten || n.kind == OpKind::Dropout) return true;  // views at inference
  if (n.kind == OpKind::AdaptiveAvgPool) {
    const Dims in = g.node(n.inputs[0]).out;
    return in.h == n.out.h && in.w == n.out.w;
  }
  return false;
}

bool is_act(OpKind k) {
  return k == OpKind::ReLU || k == OpKind::SiLU || k == OpKind::Sigmoid;
}

}  // namespace

int alias_source(const Graph& g, int id) {
  while (is_alias(g.node(id), g)) id = g.node(id).inputs[0];
  return id;
}

Schedule schedule_ops(const Graph& g) {
  const auto& nodes = g.nodes();
  const auto consumers = g.consumers();
  Schedule out;
  // Liveness: what the outputs depend on (a detector's further heads too).
  out.live.assign(nodes.size(), false);
  const std::vector<int> outputs = g.outputs();
  for (int o : outputs) out.live[o] = true;
  for (int id = *std::max_element(outputs.begin(), outputs.end()); id >= 0; --id)
    if (out.live[id])
      for (int in : nodes[id].inputs) out.live[in] = true;
  auto live_consumers = [&](int id) {
    std::vector<int> c;
    for (int x : consumers[id])
      if (x < 0 || out.live[x]) c.push_back(x);
    return c;
  };

  std::vector<OpGroup>& groups = out.groups;
  std::vector<int> owner(nodes.size(), -1);  // group index of each node
  auto sole_consumer_if = [&](int id, auto pred) {
    const std::vector<int> c = live_consumers(id);
    return c.size() == 1 && c[0] >= 0 && pred(nodes[c[0]].kind) && owner[c[0]] < 0 ? c[0] : -1;
  };
  auto sole_consumer = [&](int id, OpKind kind) {
    return sole_consumer_if(id, [&](OpKind k) { return k == kind; });
  };

  // Squeeze-excitation: pool -> conv -> SiLU -> conv -> sigmoid -> scale(x, gate), x = pool's
  // input.
  auto match_se = [&](int pool, OpGroup& grp, std::vector<int>& members) {
    const int fc1 = sole_consumer(pool, OpKind::Conv);
    const int a1 = fc1 >= 0 ? sole_consumer(fc1, OpKind::SiLU) : -1;
    const int fc2 = a1 >= 0 ? sole_consumer(a1, OpKind::Conv) : -1;
    const int a2 = fc2 >= 0 ? sole_consumer(fc2, OpKind::Sigmoid) : -1;
    const int sc = a2 >= 0 ? sole_consumer(a2, OpKind::Scale) : -1;
    const int x = nodes[pool].inputs[0];
    if (sc < 0 || nodes[sc].inputs[0] != x || nodes[sc].inputs[1] != a2) return false;
    if (!nodes[fc1].bias || !nodes[fc2].bias) return false;
    grp.kind = OpKind::Scale;
    grp.se_fc1 = fc1, grp.se_fc2 = fc2;
    grp.in = {x};
    members = {pool, fc1, a1, fc2, a2, sc};
    grp.anchor = sc;
    return true;
  };

  for (int id = 0; id < int(nodes.size()); ++id) {
    const Node& n = nodes[id];
    if (!out.live[id] || owner[id] >= 0 || n.kind == OpKind::Input || is_alias(n, g)) continue;
    OpGroup grp;
    grp.kind = n.kind;
    grp.head = id;
    grp.in = n.inputs;
    int cur = id;
    std::vector<int> members{id};
    auto absorb = [&](int m) { members.push_back(m), cur = m; };
    auto absorb_act = [&] {
      if (int a = sole_consumer_if(cur, is_act); a >= 0) grp.act = nodes[a].kind, absorb(a);
    };
    if (n.kind == OpKind::GlobalAvgPool && match_se(id, grp, members)) {
      cur = grp.anchor;
    } else if (n.kind == OpKind::Conv) {
      if (int bn = sole_consumer(cur, OpKind::BatchNorm); bn >= 0) grp.bn = bn, absorb(bn);
      if (int add = sole_consumer(cur, OpKind::Add); add >= 0) {
        const Node& a = nodes[add];
        grp.residual = a.inputs[0] == cur ? a.inputs[1] : a.inputs[0];
        grp.in.push_back(grp.residual);
        absorb(add);
      }
      absorb_act();
      // An add after the activation, itself not activated: into the epilogue too.
      if (grp.residual < 0 && grp.act != OpKind::Input)
        if (int add = sole_consumer(cur, OpKind::Add); add >= 0) {
          const Node& a = nodes[add];
          if (a.inputs[0] != a.inputs[1] && sole_consumer_if(add, is_act) < 0) {
            grp.residual = a.inputs[0] == cur ? a.inputs[1] : a.inputs[0];
            grp.residual_after_act = true;
            grp.in.push_back(grp.residual);
            absorb(add);
          }
        }
    } else if (n.kind == OpKind::Linear || n.kind == OpKind::BatchNorm || n.kind == OpKind::Add) {
      absorb_act();
    } else if (n.kind == OpKind::Scale) {
      throw std::logic_error("schedule: a scale outside squeeze-excitation has no op");
    }
    grp.anchor = cur;
    for (int m : members) owner[m] = int(groups.size());
    groups.push_back(grp);
  }

  // Where values live. Every value owns its buffer, but a concat's inputs: one whose only reader
  // is the concat and whose producer writes strided rows (a conv, a pool, a nested concat) is
  // placed in its slice of the concat's buffer; the others are copied there by the concat's op.
  out.view.assign(nodes.size(), ValueView{});
  for (int id = 0; id < int(nodes.size()); ++id)
    if (out.live[id] && !is_alias(nodes[id], g)) out.view[id] = {id, 0, nodes[id].out.c};
  auto writes_strided = [&](int v) {
    if (nodes[v].kind == OpKind::Concat) return true;
    if (owner[v] < 0 || groups[owner[v]].anchor != v) return false;
    const OpKind k = groups[owner[v]].kind;
    return k == OpKind::Conv || k == OpKind::MaxPool || k == OpKind::AvgPool ||
           k == OpKind::Upsample;
  };
  // Outer concats first, so that a nested concat's slice is known before its inputs are placed.
  std::vector<int> concat_group(nodes.size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (groups[gi].kind == OpKind::Concat) concat_group[groups[gi].head] = int(gi);
  for (int id = int(nodes.size()) - 1; id >= 0; --id) {
    if (!out.live[id] || nodes[id].kind != OpKind::Concat) continue;
    OpGroup& grp = groups[concat_group[id]];
    const ValueView base = out.view[id];
    int offset = 0;
    std::vector<int> seen;
    for (int v : nodes[id].inputs) {
      const bool placeable = v != g.input_id() && !is_alias(nodes[v], g) &&
                             live_consumers(v).size() == 1 && writes_strided(v) &&
                             std::find(seen.begin(), seen.end(), v) == seen.end();
      seen.push_back(v);
      if (placeable)
        out.view[v] = {base.root, base.offset + offset, base.ld};
      else
        grp.copies.push_back(v);
      offset += nodes[v].out.c;
    }
  }
  // A concat whose inputs are all in place runs nothing.
  std::vector<int> keep;
  std::vector<int> remap(groups.size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (groups[gi].kind != OpKind::Concat || !groups[gi].copies.empty()) {
      remap[gi] = int(keep.size());
      keep.push_back(int(gi));
    }
  std::vector<OpGroup> kept;
  for (int gi : keep) kept.push_back(groups[gi]);
  groups.swap(kept);

  out.order.resize(groups.size());
  for (size_t i = 0; i < out.order.size(); ++i) out.order[i] = int(i);
  std::sort(out.order.begin(), out.order.end(),
            [&](int a, int b) { return groups[a].anchor < groups[b].anchor; });

  // A residual's producer never runs right before the conv that adds it: it moves up to just
  // after the last producer of its own inputs (a bottleneck's projection, to before the block's
  // first conv). cuDNN 9.19's run-time-compiled fused conv+add engine (eng4, launched with
  // programmatic dependent launch) gave outputs that changed from run to run, eager and replayed
  // alike, only where its residual came from the kernel right before it (NOTES.md).
  std::vector<int> producer(nodes.size(), -1);  // group index by the node it produces
  for (size_t gi = 0; gi < groups.size(); ++gi) producer[groups[gi].anchor] = int(gi);
  auto position = [&](int gi) {
    return int(std::find(out.order.begin(), out.order.end(), gi) - out.order.begin());
  };
  for (size_t i = 1; i < out.order.size(); ++i) {
    const OpGroup& grp = groups[out.order[i]];
    if (grp.residual < 0) continue;
    const int p = producer[alias_source(g, grp.residual)];
    if (p < 0 || out.order[i - 1] != p) continue;
    int earliest = 0;  // just after the last producer of p's inputs
    for (int v : groups[p].in) {
      const int q = producer[alias_source(g, v)];
      if (q >= 0) earliest = std::max(earliest, position(q) + 1);
    }
    if (earliest >= int(i) - 1) continue;  // nowhere earlier to go
    out.order.erase(out.order.begin() + (i - 1));
    out.order.insert(out.order.begin() + earliest, p);
  }
  return out;
}

Lifetimes buffer_lifetimes(const Graph& g, const Schedule& s) {
  const size_t count = g.nodes().size();
  Lifetimes l;
  l.steps = int(s.order.size());
  l.first.assign(count, -1);
  l.last.assign(count, -1);
  auto root = [&](int id) { return s.view[alias_source(g, id)].root; };
  auto write = [&](int r, int step) {
    l.first[r] = l.first[r] < 0 ? step : std::min(l.first[r], step);
  };
  write(root(g.input_id()), 0);
  for (int step = 0; step < l.steps; ++step) {
    const OpGroup& grp = s.groups[s.order[step]];
    write(root(grp.anchor), step);
    for (int v : grp.in) l.last[root(v)] = std::max(l.last[root(v)], step);
  }
  l.last[root(g.input_id())] = l.steps;
  for (int o : g.outputs()) l.last[root(o)] = l.steps;  // what a run hands back, kept to the end
  for (size_t id = 0; id < count; ++id) {
    if (s.view[id].root != int(id) || l.first[id] < 0) {
      l.first[id] = l.last[id] = -1;
      continue;
    }
    l.last[id] = std::max(l.last[id], l.first[id]);
  }
  return l;
}

}  // namespace cnnbench
