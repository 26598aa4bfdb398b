#include "kernels/graph_probe.h"

#include <algorithm>
#include <stdexcept>

#include "harness/check.h"

namespace cnnbench {

void ProbeGraph::pointwise(cudnnPointwiseMode_t mode, const BackendDesc& x, const BackendDesc* b,
                           const BackendDesc& y) {
  const BackendDesc* pw = hold(make_pointwise_desc(mode));
  ops.push_back(make_pointwise_op(*pw, x, b, y));
}

bool ProbeGraph::finalize(cudnnHandle_t handle, std::string* why) {
  std::vector<const BackendDesc*> op_ptrs;
  for (const BackendDesc& op : ops) op_ptrs.push_back(&op);
  graph = BackendDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle)
      .set_descs(CUDNN_ATTR_OPERATIONGRAPH_OPS, op_ptrs);
  return graph.try_finalize(why);
}

GraphProbe::GraphProbe(GpuContext& ctx, const ProbeGraph& g, int max_engines, size_t max_workspace)
    : ctx_(ctx), g_(g) {
  for (RankedConfig& rc : ranked_configs(g.graph, true)) {
    ++configs_;
    if (int(plans_.size()) >= max_engines) continue;
    std::string why;
    BackendDesc plan = try_plan(ctx.cudnn, rc.config, &why);
    if (!plan.get()) {
      if (refusals_.size() < 4) refusals_.push_back(rc.engine.tag() + ": " + why);
      continue;
    }
    const size_t ws = size_t(plan.get_i64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
    if (ws > max_workspace) {
      if (refusals_.size() < 4)
        refusals_.push_back(rc.engine.tag() + ": needs " + std::to_string(ws) +
                            " bytes of workspace");
      continue;
    }
    plans_.push_back({std::move(plan), std::move(rc.engine), ws});
  }
}

size_t GraphProbe::workspace_bytes() const {
  size_t ws = 0;
  for (const Plan& p : plans_) ws = std::max(ws, p.workspace);
  return ws;
}

void GraphProbe::bind(const std::map<int64_t, void*>& ptrs, void* workspace) {
  std::vector<void*> data;
  for (int64_t uid : g_.uids) {
    auto it = ptrs.find(uid);
    if (it == ptrs.end())
      throw std::logic_error("graph probe: no buffer for tensor uid " + std::to_string(uid));
    data.push_back(it->second);
  }
  pack_ = BackendDesc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack_
      .set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(g_.uids.size()),
           g_.uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(data.size()),
           data.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack_.finalize();
}

bool GraphProbe::run(const Plan& p) {
  return execute_on(ctx_.cudnn, p.plan, pack_, ctx_.stream) == CUDNN_STATUS_SUCCESS;
}

bool GraphProbe::run_first() {
  for (const Plan& p : plans_)
    if (run(p)) return true;
  return false;
}

std::vector<ProbeEngine> GraphProbe::time_all(int launches) {
  cudaStream_t s = ctx_.stream;
  cudaEvent_t start, stop;
  CNN_CHECK_CUDA(cudaEventCreate(&start));
  CNN_CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<ProbeEngine> out;
  for (const Plan& p : plans_) {
    ProbeEngine e{p.engine.tag(), p.engine.notes(), p.workspace, -1};
    bool ok = run(p) && run(p);  // warm-up
    std::vector<float> groups;
    for (int rep = 0; ok && rep < 5; ++rep) {
      CNN_CHECK_CUDA(cudaEventRecord(start, s));
      for (int l = 0; ok && l < launches; ++l) ok = run(p);
      CNN_CHECK_CUDA(cudaEventRecord(stop, s));
      CNN_CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      groups.push_back(ms);
    }
    if (ok) {
      std::sort(groups.begin(), groups.end());
      e.us = groups[2] * 1000.0 / launches;
    }
    out.push_back(e);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double ua = out[a].us, ub = out[b].us;
    if ((ua < 0) != (ub < 0)) return ub < 0;
    return ua < ub;
  });
  std::vector<ProbeEngine> sorted;
  for (size_t i : order) sorted.push_back(out[i]);
  if (!order.empty()) fastest_ = order.front();
  return sorted;
}

bool GraphProbe::run_fastest() {
  return fastest_ < plans_.size() && run(plans_[fastest_]);
}

DeviceMem::DeviceMem(size_t bytes) {
  CNN_CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
}
DeviceMem::~DeviceMem() {
  cudaFree(p);
}
void DeviceMem::upload(const void* src, size_t bytes) {
  CNN_CHECK_CUDA(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
}
std::vector<uint8_t> DeviceMem::download(size_t bytes) const {
  std::vector<uint8_t> out(bytes);
  CNN_CHECK_CUDA(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost));
  return out;
}

ProbedForm probe_first_form(GpuContext& ctx, const std::vector<std::string>& labels,
                            int max_engines,
                            const std::function<void(ProbeGraph&, size_t)>& build) {
  ProbedForm out;
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& as = labels[i];
    std::string why;
    auto graph = std::make_unique<ProbeGraph>();
    try {
      build(*graph, i);
      if (!graph->finalize(ctx.cudnn, &why)) why = "operation graph: " + why;
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (why.empty()) {
      auto probe = std::make_unique<GraphProbe>(ctx, *graph, max_engines);
      out.configs += probe->configs();
      for (const std::string& r : probe->refusals()) out.refusals.push_back(as + r);
      if (probe->built()) {
        out.graph = std::move(graph);
        out.probe = std::move(probe);
        out.form = i;
        out.error.clear();
        return out;
      }
      why = probe->configs() ? "no engine config builds" : "heuristics offer no engine config";
    }
    out.error += (out.error.empty() ? "" : "; ") + as + why;
  }
  return out;
}

}  // namespace cnnbench
