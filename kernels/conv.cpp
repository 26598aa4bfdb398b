#include "kernels/conv.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <vector>

#include "harness/check.h"
#include "kernels/pointwise.h"

namespace cnnbench {

struct PlanCacheEntry {
  BackendDesc plan;
  bool fused = true;
  EngineInfo engine;
  size_t workspace = 0;
  double tuned_us = 0;
  int candidates = 0;
  double build_ms = 0;
};

namespace {

enum Uid : int64_t {
  kX = 1,
  kW = 2,
  kB = 3,
  kZ = 4,
  kY = 5,
  kConvOut = 101,
  kBiasOut = 102,
  kAddOut = 103
};

BackendDesc pointwise_desc(cudnnPointwiseMode_t mode) {
  BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
  pw.finalize();
  return pw;
}

BackendDesc pointwise_op(const BackendDesc& pw, const BackendDesc& x, const BackendDesc* b,
                         const BackendDesc& y) {
  BackendDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  op.finalize();
  return op;
}

// The operation graph: the conv alone (fused == false) or with the whole epilogue.
struct OpGraph {
  std::deque<BackendDesc> keep;  // descriptors the graph refers to (stable addresses)
  BackendDesc graph;
};

OpGraph build_graph(cudnnHandle_t handle, const ConvSpec& s, bool fused) {
  OpGraph g;
  const DType t = storage_type(s.precision);
  const Dims wdims{s.y.c, s.x.c / s.groups, s.kernel, s.kernel};
  g.keep.push_back(make_tensor(kX, t, s.x));
  g.keep.push_back(make_tensor(kW, t, wdims));
  const BackendDesc& x = g.keep[0];
  const BackendDesc& w = g.keep[1];
  // Conv output: virtual float when the epilogue follows inside the graph, y itself otherwise.
  g.keep.push_back(fused ? make_tensor(kConvOut, DType::F32, s.y, true) : make_tensor(kY, t, s.y));
  const size_t conv_out = g.keep.size() - 1;

  BackendDesc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set_i64(CUDNN_ATTR_CONVOLUTION_DILATIONS, {s.dilation, s.dilation})
      .set_i64(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {s.stride, s.stride})
      .set_i64(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {s.pad, s.pad})
      .set_i64(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {s.pad, s.pad});
  conv.finalize();

  BackendDesc conv_op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.0f, beta = 0.0f;
  conv_op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, g.keep[conv_out])
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  conv_op.finalize();
  g.keep.push_back(std::move(conv));

  std::vector<BackendDesc> ops;
  ops.push_back(std::move(conv_op));
  if (fused) {
    // + bias
    g.keep.push_back(make_channel_tensor(kB, t, s.y.c));
    const size_t bias = g.keep.size() - 1;
    const bool last_is_bias = !s.residual && !s.relu;
    g.keep.push_back(last_is_bias ? make_tensor(kY, t, s.y)
                                  : make_tensor(kBiasOut, DType::F32, s.y, true));
    size_t cur = g.keep.size() - 1;
    g.keep.push_back(pointwise_desc(CUDNN_POINTWISE_ADD));
    ops.push_back(pointwise_op(g.keep.back(), g.keep[conv_out], &g.keep[bias], g.keep[cur]));
    if (s.residual) {  // + z
      g.keep.push_back(make_tensor(kZ, t, s.y));
      const size_t z = g.keep.size() - 1;
      g.keep.push_back(s.relu ? make_tensor(kAddOut, DType::F32, s.y, true)
                              : make_tensor(kY, t, s.y));
      const size_t out = g.keep.size() - 1;
      g.keep.push_back(pointwise_desc(CUDNN_POINTWISE_ADD));
      ops.push_back(pointwise_op(g.keep.back(), g.keep[cur], &g.keep[z], g.keep[out]));
      cur = out;
    }
    if (s.relu) {
      g.keep.push_back(make_tensor(kY, t, s.y));
      const size_t out = g.keep.size() - 1;
      g.keep.push_back(pointwise_desc(CUDNN_POINTWISE_RELU_FWD));
      ops.push_back(pointwise_op(g.keep.back(), g.keep[cur], nullptr, g.keep[out]));
    }
  }
  std::vector<const BackendDesc*> op_ptrs;
  for (const BackendDesc& op : ops) op_ptrs.push_back(&op);
  g.graph = BackendDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g.graph.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle)
      .set_descs(CUDNN_ATTR_OPERATIONGRAPH_OPS, op_ptrs);
  g.graph.finalize();
  for (BackendDesc& op : ops) g.keep.push_back(std::move(op));
  return g;
}

BackendDesc variant_pack(const ConvBuffers& b, bool fused, bool residual, void* workspace) {
  std::vector<int64_t> uids{kX, kW, kY};
  std::vector<void*> ptrs{const_cast<void*>(b.x), const_cast<void*>(b.w), b.y};
  if (fused) {
    uids.push_back(kB), ptrs.push_back(const_cast<void*>(b.bias));
    if (residual) uids.push_back(kZ), ptrs.push_back(const_cast<void*>(b.z));
  }
  BackendDesc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
           ptrs.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  vp.finalize();
  return vp;
}

struct Candidate {
  BackendDesc plan;
  EngineInfo engine;
  size_t workspace = 0;
};

// Engine configs from heuristics mode A, then the fallback list, that fit the precision and
// build, best first; at most `limit`, of which at most kMaxCompiled are compiled at run time
// (NVRTC takes about 0.3 s for each, against milliseconds for a precompiled engine).
constexpr int kMaxCompiled = 3;
std::vector<Candidate> candidates(cudnnHandle_t h, const OpGraph& g, Precision p, size_t limit,
                                  size_t max_workspace) {
  std::vector<Candidate> out;
  int compiled = 0;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (BackendDesc& cfg : heuristic_configs(h, g.graph, mode)) {
      if (out.size() >= limit) return out;
      EngineInfo info = engine_info(cfg);
      if (!engine_fits_precision(info, p)) continue;
      const bool rtc = info.has_behavior(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
      if (rtc && compiled >= kMaxCompiled) continue;
      const std::string tag = info.tag();
      bool dup = false;
      for (const Candidate& c : out) dup |= c.engine.tag() == tag;
      if (dup) continue;
      std::string why;
      BackendDesc plan = try_plan(h, cfg, &why);
      if (!plan.get()) continue;
      const size_t ws = size_t(plan.get_i64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
      if (ws > max_workspace) continue;
      compiled += rtc;
      out.push_back({std::move(plan), std::move(info), ws});
    }
  }
  return out;
}

double time_plan_us(cudnnHandle_t h, const BackendDesc& plan, const BackendDesc& vp,
                    cudaStream_t stream) {
  constexpr int kWarmup = 2, kReps = 5;
  for (int i = 0; i < kWarmup; ++i)
    if (cudnnBackendExecute(h, plan.get(), vp.get()) != CUDNN_STATUS_SUCCESS) return -1;
  cudaEvent_t start, stop;
  CNN_CHECK_CUDA(cudaEventCreate(&start));
  CNN_CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < kReps; ++i) {
    CNN_CHECK_CUDA(cudaEventRecord(start, stream));
    const cudnnStatus_t s = cudnnBackendExecute(h, plan.get(), vp.get());
    CNN_CHECK_CUDA(cudaEventRecord(stop, stream));
    CNN_CHECK_CUDA(cudaEventSynchronize(stop));
    if (s != CUDNN_STATUS_SUCCESS) break;
    float ms = 0;
    CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (int(times.size()) < kReps) return -1;
  std::sort(times.begin(), times.end());
  return times[kReps / 2] * 1000.0;
}

}  // namespace

std::string ConvSpec::signature() const {
  return std::string("conv:") + precision_name(precision) + ":" + x.str() + ":" + y.str() + ":k" +
         std::to_string(kernel) + "s" + std::to_string(stride) + "p" + std::to_string(pad) + "d" +
         std::to_string(dilation) + "g" + std::to_string(groups) + (residual ? ":add" : "") +
         (relu ? ":relu" : "");
}

std::string ConvSpec::op_name() const {
  return std::string("conv+bias") + (residual ? "+add" : "") + (relu ? "+relu" : "");
}

bool engine_fits_precision(const EngineInfo& e, Precision p) {
  if (e.has_numerical(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return false;
  if (p == Precision::FP32 && (e.has_numerical(CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
                               e.has_numerical(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
    return false;
  if (p == Precision::TF32 && e.has_numerical(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
    return false;
  return true;
}

ConvOp::ConvOp(const ConvSpec& spec, const ConvBuffers& buffers) : spec_(spec), buf_(buffers) {
  record_.name = spec.name;
  record_.op = spec.op_name();
  record_.shape = "in " + spec.x.str() + " -> out " + spec.y.str() + " k" +
                  std::to_string(spec.kernel) + " s" + std::to_string(spec.stride);
}

bool ConvOp::fused() const {
  return plan_ && plan_->fused;
}

void ConvOp::prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) {
  handle_ = ctx.cudnn;
  const std::string key = spec_.signature() + ":" + engine_mode_name(mode);
  auto it = ctx.plans.find(key);
  if (it != ctx.plans.end()) {
    plan_ = it->second;
    record_.plan_reused = true;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    auto entry = std::make_shared<PlanCacheEntry>();
    const size_t limit = mode == EngineMode::Autotune ? size_t(std::max(top_k, 1)) : 1;
    std::string failures;
    for (bool fused : {true, false}) {
      OpGraph g = build_graph(ctx.cudnn, spec_, fused);
      std::vector<Candidate> cands =
          candidates(ctx.cudnn, g, spec_.precision, limit, scratch.bytes);
      if (cands.empty()) continue;
      size_t best = 0;
      double best_us = 0;
      if (mode == EngineMode::Autotune) {
        best_us = -1;
        for (size_t i = 0; i < cands.size(); ++i) {
          BackendDesc vp = variant_pack(buf_, fused, spec_.residual, scratch.ptr);
          const double us = time_plan_us(ctx.cudnn, cands[i].plan, vp, ctx.stream);
          if (us >= 0 && (best_us < 0 || us < best_us)) best = i, best_us = us;
        }
        if (best_us < 0) continue;  // none of them ran
      }
      entry->plan = std::move(cands[best].plan);
      entry->engine = cands[best].engine;
      entry->workspace = cands[best].workspace;
      entry->fused = fused;
      entry->tuned_us = best_us;
      entry->candidates = int(cands.size());
      break;
    }
    if (!entry->plan.get())
      throw LibraryError("cuDNN", CUDNN_STATUS_NOT_SUPPORTED,
                         "no engine supports " + spec_.signature(), "ConvOp::prepare", __FILE__,
                         __LINE__);
    entry->build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ctx.plans[key] = entry;
    plan_ = entry;
  }
  record_.fused = plan_->fused;
  if (!plan_->fused)
    record_.op = "conv | bias" + std::string(spec_.residual ? "+add" : "") +
                 (spec_.relu ? "+relu" : "") + " (cnnbench kernel)";
  record_.engine = plan_->engine.tag();
  record_.workspace_bytes = plan_->workspace;
  record_.tuned_us = plan_->tuned_us;
  record_.candidates = plan_->candidates;
  record_.build_ms = record_.plan_reused ? 0 : plan_->build_ms;
  // Until the arena's workspace exists, run on the tuning scratch (autotune runs layer by layer).
  variant_pack_ = variant_pack(buf_, plan_->fused, spec_.residual, scratch.ptr);
}

size_t ConvOp::workspace_bytes() const {
  return plan_ ? plan_->workspace : 0;
}

void ConvOp::bind_workspace(void* workspace, size_t bytes) {
  if (bytes < workspace_bytes()) throw std::logic_error("conv: workspace too small");
  variant_pack_ = variant_pack(buf_, plan_->fused, spec_.residual, workspace);
}

void ConvOp::run(cudaStream_t stream) {
  (void)stream;  // the cuDNN handle is bound to the context's stream
  CNN_CHECK_CUDNN(cudnnBackendExecute(handle_, plan_->plan.get(), variant_pack_.get()));
  if (!plan_->fused)
    launch_epilogue(storage_type(spec_.precision), buf_.y, buf_.y, nullptr, buf_.bias, buf_.z,
                    spec_.relu, spec_.y.numel(), spec_.y.c, stream);
}

}  // namespace cnnbench
