#include "networks/schedule.h"

#include <algorithm>

namespace cnnbench {

Schedule schedule_ops(const Graph& g) {
  const auto& nodes = g.nodes();
  const auto consumers = g.consumers();
  Schedule out;
  std::vector<OpGroup>& groups = out.groups;
  std::vector<int> owner(nodes.size(), -1);  // group index of each node
  auto sole_consumer = [&](int id, OpKind kind) {
    return consumers[id].size() == 1 && consumers[id][0] >= 0 &&
                   nodes[consumers[id][0]].kind == kind && owner[consumers[id][0]] < 0
               ? consumers[id][0]
               : -1;
  };
  for (int id = 0; id < int(nodes.size()); ++id) {
    const Node& n = nodes[id];
    if (owner[id] >= 0 || n.kind == OpKind::Input || n.kind == OpKind::Flatten) continue;
    OpGroup grp;
    grp.kind = n.kind;
    grp.head = id;
    grp.in = n.inputs;
    int cur = id;
    std::vector<int> members{id};
    auto absorb = [&](int m) { members.push_back(m), cur = m; };
    if (n.kind == OpKind::Conv) {
      if (int bn = sole_consumer(cur, OpKind::BatchNorm); bn >= 0) grp.bn = bn, absorb(bn);
      if (int add = sole_consumer(cur, OpKind::Add); add >= 0) {
        const Node& a = nodes[add];
        grp.residual = a.inputs[0] == cur ? a.inputs[1] : a.inputs[0];
        grp.in.push_back(grp.residual);
        absorb(add);
      }
      if (int r = sole_consumer(cur, OpKind::ReLU); r >= 0) grp.relu = true, absorb(r);
    } else if (n.kind == OpKind::Linear || n.kind == OpKind::BatchNorm || n.kind == OpKind::Add) {
      if (int r = sole_consumer(cur, OpKind::ReLU); r >= 0) grp.relu = true, absorb(r);
    }
    grp.anchor = cur;
    for (int m : members) owner[m] = int(groups.size());
    groups.push_back(grp);
  }
  out.order.resize(groups.size());
  for (size_t i = 0; i < out.order.size(); ++i) out.order[i] = int(i);
  std::sort(out.order.begin(), out.order.end(),
            [&](int a, int b) { return groups[a].anchor < groups[b].anchor; });
  return out;
}

}  // namespace cnnbench
