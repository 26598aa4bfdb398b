#include "kernels/conv.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <set>
#include <thread>
#include <vector>

#include "harness/check.h"
#include "harness/plan_cache.h"
#include "kernels/conv_ref.h"
#include "kernels/pointwise.h"
#include "kernels/storage.h"
#include "kernels/timing.h"

namespace cnnbench {

struct PlanCacheEntry {
  std::shared_ptr<OpGraph> graph;  // kept alive: the engine config refers to it
  BackendDesc config;              // to build further plans of the same engine
  BackendDesc plan;
  cudnnHandle_t handle = nullptr;     // the handle the plan was built on, and runs on
  std::vector<std::string> rejected;  // plans whose graph replay disagreed with a direct run
  bool fused = true;
  bool staged = false;  // writes a packed staging buffer, copied into the strided slice
  EngineInfo engine;
  size_t workspace = 0;
  double tuned_us = 0;
  bool tuned_in_graph = false;  // tuned_us from autotune's graph round
  double eager_us = 0;          // the winner's eager time (tuned_us where not in graph)
  double fastest_eager_us = 0;  // the fastest eager time of the winner's form (either winner)
  int candidates = 0;
  double build_ms = 0;
  std::string source;  // LayerRecord::heuristic_source
};

namespace {

enum Uid : int64_t {
  kX = 1,
  kW = 2,
  kB = 3,
  kZ = 4,
  kY = 5,
  kConvOut = 101,
  kBiasOut = 102  // and the uids after it: the epilogue's virtual tensors
};

}  // namespace

// The operation graph: the conv alone (fused == false) or with the whole epilogue.
struct OpGraph {
  std::deque<BackendDesc> keep;  // descriptors the graph refers to (stable addresses)
  BackendDesc graph;
};

namespace {

cudnnPointwiseMode_t act_mode(Act a) {
  switch (a) {
    case Act::ReLU:
      return CUDNN_POINTWISE_RELU_FWD;
    case Act::SiLU:
      return CUDNN_POINTWISE_SWISH_FWD;
    case Act::Sigmoid:
      return CUDNN_POINTWISE_SIGMOID_FWD;
    default:
      throw std::logic_error("conv: no activation");
  }
}

// y_ld / y_align: y's channel stride and pointer alignment (a concat slice), or 0 / 16 packed.
OpGraph build_graph(cudnnHandle_t handle, const ConvSpec& s, bool fused, int y_ld, int y_align) {
  OpGraph g;
  const DType t = storage_type(s.precision);
  const Dims wdims{s.y.c, s.x.c / s.groups, s.kernel, s.kw()};
  auto y_tensor = [&] { return make_tensor(kY, t, s.y, false, y_ld, y_align); };
  g.keep.push_back(make_tensor(kX, t, s.x));
  g.keep.push_back(make_tensor(kW, t, wdims));
  const BackendDesc& x = g.keep[0];
  const BackendDesc& w = g.keep[1];
  // Conv output: virtual float when the epilogue follows inside the graph, y itself otherwise.
  g.keep.push_back(fused ? make_tensor(kConvOut, DType::F32, s.y, true) : y_tensor());
  const size_t conv_out = g.keep.size() - 1;

  BackendDesc conv = make_conv_descriptor(s.stride, s.pad, s.pw(), s.dilation);

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
    // The epilogue's steps in order: + bias, then + z and the activation in either order
    // (residual_after_act: the activation first). Each writes a virtual float tensor, the last y.
    enum Step { kBias, kAdd, kAct };
    std::vector<Step> steps{kBias};
    const bool act = s.act != Act::None;
    if (s.residual && !s.residual_after_act) steps.push_back(kAdd);
    if (act) steps.push_back(kAct);
    if (s.residual && s.residual_after_act) steps.push_back(kAdd);
    size_t cur = conv_out;
    int64_t virtual_uid = kBiasOut;
    for (size_t i = 0; i < steps.size(); ++i) {
      const bool last = i + 1 == steps.size();
      const BackendDesc* other = nullptr;
      if (steps[i] == kBias) {
        g.keep.push_back(make_channel_tensor(kB, t, s.y.c));
        other = &g.keep.back();
      } else if (steps[i] == kAdd) {
        g.keep.push_back(make_tensor(kZ, t, s.y));
        other = &g.keep.back();
      }
      g.keep.push_back(last ? y_tensor() : make_tensor(virtual_uid++, DType::F32, s.y, true));
      const size_t out = g.keep.size() - 1;
      g.keep.push_back(
          make_pointwise_desc(steps[i] == kAct ? act_mode(s.act) : CUDNN_POINTWISE_ADD));
      ops.push_back(make_pointwise_op(g.keep.back(), g.keep[cur], other, g.keep[out]));
      cur = out;
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

using Candidate = EngineCandidate;

// Forward candidates: engine_candidates, also skipping the tags in `skip` (plans refused here).
std::vector<Candidate> candidates(cudnnHandle_t h, const OpGraph& g, Precision p, size_t limit,
                                  size_t max_workspace, const std::vector<std::string>& skip,
                                  const std::vector<std::string>& excluded, bool mode_b) {
  std::vector<std::string> all = excluded;
  all.insert(all.end(), skip.begin(), skip.end());
  return engine_candidates(h, g.graph, p, limit, max_workspace, all, mode_b);
}

// Median device time of `run` over five runs after two warm-ups; negative if a run fails.
template <typename F>
double time_us(F&& run, cudaStream_t stream) {
  constexpr int kWarmup = 2, kReps = 5;
  for (int i = 0; i < kWarmup; ++i)
    if (!run()) return -1;
  cudaEvent_t start, stop;
  CNN_CHECK_CUDA(cudaEventCreate(&start));
  CNN_CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < kReps; ++i) {
    CNN_CHECK_CUDA(cudaEventRecord(start, stream));
    const bool ok = run();
    CNN_CHECK_CUDA(cudaEventRecord(stop, stream));
    CNN_CHECK_CUDA(cudaEventSynchronize(stop));
    if (!ok) break;
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

// Autotune's graph round (GpuContext::graph_tune_below_us): how many of the fastest eager
// candidates are timed again, and how many launches back to back one graph holds.
constexpr size_t kGraphFinalists = 8;
constexpr int kGraphTuneRuns = 20;

std::string prefetch_key(const std::string& plan_key, bool fused) {
  return plan_key + (fused ? ":fused" : ":conv");
}

}  // namespace

// Candidate plans built ahead of prepare() on a helper thread (prefetch_conv_plans).
struct PrefetchedCandidates {
  std::shared_ptr<OpGraph> graph;
  std::vector<Candidate> candidates;
};

std::string ConvSpec::signature() const {
  return std::string("conv:") + precision_name(precision) + ":" + x.str() + ":" + y.str() + ":k" +
         std::to_string(kernel) + "x" + std::to_string(kw()) + "s" + std::to_string(stride) + "p" +
         std::to_string(pad) + "x" + std::to_string(pw()) + "d" + std::to_string(dilation) + "g" +
         std::to_string(groups) + (residual && !residual_after_act ? ":add" : "") +
         (act != Act::None ? std::string(":") + act_name(act) : "") +
         (residual && residual_after_act ? ":add" : "") +
         (ldy() != y.c ? ":ld" + std::to_string(ldy()) : "");
}

std::string ConvSpec::op_name() const {
  return std::string("conv+bias") + (residual && !residual_after_act ? "+add" : "") +
         (act != Act::None ? std::string("+") + act_name(act) : "") +
         (residual && residual_after_act ? "+add" : "");
}

bool engine_excluded(const EngineInfo& info, const std::vector<std::string>& excluded) {
  if (std::find(excluded.begin(), excluded.end(), kNondeterministic) != excluded.end() &&
      info.has_numerical(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC))
    return true;
  return engine_excluded(info.tag(), excluded);
}

bool engine_excluded(const std::string& tag, const std::vector<std::string>& excluded) {
  for (const std::string& e : excluded) {
    // "eng4" excludes eng4 with any knobs, not eng41.
    if (tag.compare(0, e.size(), e) != 0) continue;
    if (tag.size() == e.size() || tag[e.size()] == '{' || tag[e.size()] == '+') return true;
  }
  return false;
}

bool engine_fits_precision(const EngineInfo& e, Precision p) {
  if (e.has_numerical(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return false;
  // fp32 is the accuracy reference: neither TF32 nor the transforms (FFT, Winograd) whose
  // rounding grows with the reduction.
  if (p == Precision::FP32 && (e.has_numerical(CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
                               e.has_numerical(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ||
                               e.has_numerical(CUDNN_NUMERICAL_NOTE_FFT) ||
                               e.has_numerical(CUDNN_NUMERICAL_NOTE_WINOGRAD) ||
                               e.has_numerical(CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4) ||
                               e.has_numerical(CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6) ||
                               e.has_numerical(CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13)))
    return false;
  if (p == Precision::TF32 && e.has_numerical(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
    return false;
  return true;
}

ConvOp::ConvOp(const ConvSpec& spec, const ConvBuffers& buffers) : spec_(spec), buf_(buffers) {
  record_.name = spec.name;
  out_ = buffers.y;
  out_bytes_ = size_t(spec.y.numel()) * dtype_size(storage_type(spec.precision));
  record_.op = spec.op_name();
  record_.shape =
      "in " + spec.x.str() + " -> out " + spec.y.str() + " k" + std::to_string(spec.kernel) +
      (spec.kw() != spec.kernel ? "x" + std::to_string(spec.kw()) : "") + " s" +
      std::to_string(spec.stride) + (spec.groups > 1 ? " g" + std::to_string(spec.groups) : "") +
      (spec.ldy() != spec.y.c ? " into slice of " + std::to_string(spec.ldy()) : "");
  const size_t es = dtype_size(storage_type(spec.precision));
  if (spec.ldy() != spec.y.c)
    set_strided_output(size_t(spec.y.n) * spec.y.h * spec.y.w, size_t(spec.y.c) * es,
                       size_t(spec.ldy()) * es);
}

size_t ConvOp::y_span() const {
  const size_t rows = size_t(spec_.y.n) * spec_.y.h * spec_.y.w;
  return ((rows - 1) * size_t(spec_.ldy()) + size_t(spec_.y.c)) *
         dtype_size(storage_type(spec_.precision));
}

size_t ConvOp::stage_bytes() const {
  const size_t b = size_t(spec_.y.numel()) * dtype_size(storage_type(spec_.precision));
  return (b + 255) / 256 * 256;
}

bool ConvOp::fused() const {
  return plan_ && plan_->fused;
}

std::string ConvOp::plan_key(EngineMode mode) const {
  return spec_.signature() + ":a" + std::to_string(pointer_alignment(buf_.y)) + ":" +
         engine_mode_name(mode);
}

static size_t candidate_limit(EngineMode mode, int top_k) {
  return mode == EngineMode::Autotune ? size_t(std::max(top_k, 1)) : 1;
}

std::shared_ptr<PrefetchedCandidates> ConvOp::build_candidates(
    cudnnHandle_t handle, bool fused, size_t limit, size_t max_workspace,
    const std::vector<std::string>& skip, const std::vector<std::string>& excluded,
    bool mode_b) const {
  auto out = std::make_shared<PrefetchedCandidates>();
  out->graph = std::make_shared<OpGraph>(
      build_graph(handle, spec_, fused, spec_.ldy(), pointer_alignment(buf_.y)));
  out->candidates = candidates(handle, *out->graph, spec_.precision, limit, max_workspace, skip,
                               excluded, mode_b);
  return out;
}

void prefetch_conv_plans(GpuContext& ctx, const std::vector<const ConvOp*>& convs, EngineMode mode,
                         int top_k, size_t max_workspace) {
  if (ctx.build_threads <= 1) return;
  struct Job {
    const ConvOp* op;
    std::string key;
    bool fused;
    std::vector<std::string> skip;
    std::shared_ptr<PrefetchedCandidates> out;
  };
  std::vector<Job> jobs;
  std::set<std::string> seen;
  for (const ConvOp* op : convs) {
    const std::string key = op->plan_key(mode);
    if (ctx.plans.count(key) || !seen.insert(key).second) continue;
    if (ctx.disk_plans && ctx.disk_plans->find(key)) continue;  // one engine to build, in prepare
    auto banned = ctx.banned.find(key);
    const std::vector<std::string> skip =
        banned == ctx.banned.end() ? std::vector<std::string>() : banned->second;
    // Heuristics take the conv alone only where the fused graph has no engine: rare, so left
    // to prepare(). Autotune times both.
    jobs.push_back({op, key, true, skip, nullptr});
    if (mode == EngineMode::Autotune) jobs.push_back({op, key, false, skip, nullptr});
  }
  if (jobs.size() < 2) return;
  const size_t threads = std::min(size_t(ctx.build_threads), jobs.size());
  while (ctx.helper_cudnn.size() < threads) {
    cudnnHandle_t h = nullptr;
    CNN_CHECK_CUDNN(cudnnCreate(&h));
    ctx.helper_cudnn.push_back(h);
    CNN_CHECK_CUDNN(cudnnSetStream(h, ctx.stream));
  }
  int device = 0;
  CNN_CHECK_CUDA(cudaGetDevice(&device));
  const size_t limit = candidate_limit(mode, top_k);
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      if (cudaSetDevice(device) != cudaSuccess) return;
      for (size_t i; (i = next++) < jobs.size();) {
        try {
          jobs[i].out =
              jobs[i].op->build_candidates(ctx.helper_cudnn[t], jobs[i].fused, limit, max_workspace,
                                           jobs[i].skip, ctx.excluded, ctx.heuristic_mode_b);
        } catch (...) {
          jobs[i].out.reset();  // prepare() builds it on the main thread instead
        }
      }
    });
  for (std::thread& t : pool) t.join();
  for (Job& j : jobs)
    if (j.out) ctx.prefetched[prefetch_key(j.key, j.fused)] = std::move(j.out);
}

void ConvOp::prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) {
  handle_ = ctx.cudnn;
  const bool strided = spec_.ldy() != spec_.y.c;
  const int align = pointer_alignment(buf_.y);
  const std::string key = plan_key(mode);
  plan_key_ = key;
  auto it = ctx.plans.find(key);
  if (it != ctx.plans.end()) {
    plan_ = it->second;
    record_.plan_reused = true;
    if (!ctx.share_plans) {
      // The same engine and knobs, in an execution plan of this layer's own, built from a config
      // that heuristics give afresh for an operation graph of this layer's own: cuDNN builds no
      // second plan from a config whose engine it has compiled at run time (NVRTC fails).
      const bool staged = plan_->staged;
      own_graph_ = std::make_shared<OpGraph>(build_graph(
          ctx.cudnn, spec_, plan_->fused, staged ? 0 : spec_.ldy(), staged ? 16 : align));
      const std::string want = plan_->engine.tag();
      std::string why = "heuristics no longer offer it";
      for (RankedConfig& rc : ranked_configs(own_graph_->graph, ctx.heuristic_mode_b)) {
        if (own_plan_.get() || rc.engine.tag() != want) continue;
        own_plan_ = try_plan(ctx.cudnn, rc.config, &why);
      }
      if (!own_plan_.get())
        throw LibraryError("cuDNN", CUDNN_STATUS_NOT_SUPPORTED,
                           "rebuilding " + plan_->engine.tag() + " for " + spec_.name + ": " + why,
                           "ConvOp::prepare", __FILE__, __LINE__);
    }
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    auto entry = std::make_shared<PlanCacheEntry>();
    const bool tune = mode == EngineMode::Autotune;
    const size_t limit = candidate_limit(mode, top_k);
    // Heuristics take the fused graph where any engine builds it. Autotune times the fused
    // graph's candidates and the conv alone followed by our epilogue kernel, and keeps the
    // fastest: a run-time-compiled fusion is not always faster than a tuned conv plus one pass.
    // Either way a plan must give the same output replayed from a CUDA graph as run directly.
    // A conv that writes a concat slice tries engines for the strided output first and, where
    // none builds, a packed staging buffer plus a copy.
    struct Timed {
      Candidate c;
      bool fused;
      double us;  // eager; after the graph round, the replay's time
      std::shared_ptr<OpGraph> graph;
      double eager_us = 0;
      bool in_graph = false;
    };
    std::vector<Timed> timed;
    std::vector<std::string> unsafe = ctx.banned[key];
    for (const std::string& tag : unsafe) entry->rejected.push_back(tag + " (whole graph)");
    // --plan_cache: the engine an earlier run's autotune chose for this key, built alone.
    const CachedPlan* cached = tune && ctx.disk_plans ? ctx.disk_plans->find(key) : nullptr;
    if (cached) {
      ++ctx.disk_plans->hits;
      if (from_cache(ctx, *cached, unsafe, strided, align, scratch, *entry))
        ++ctx.disk_plans->used, record_.from_plan_cache = true;
      else
        ++ctx.disk_plans->stale;
    } else if (tune && ctx.disk_plans) {
      ++(ctx.disk_plans->in_other_search(key) ? ctx.disk_plans->outdated : ctx.disk_plans->misses);
    }
    // A conv that writes a concat slice: under autotune both forms are timed, the strided output
    // and a packed staging buffer plus our copy, and the faster kept (in call 16 of 2026-12-03
    // Inception-v3's slice convs took 3 to 5x their roofline bound at batch 256, its packed ones
    // 2x); heuristics take the strided form where any engine builds it.
    const bool from_disk = entry->plan.get() != nullptr;
    std::shared_ptr<PlanCacheEntry> best;  // the faster form's winner
    for (bool staged : strided ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      if (from_disk || (best && !tune)) break;
      unsafe = ctx.banned[key];  // a plan refused in one form says nothing of the other's graph
      const size_t stage = staged ? stage_bytes() : 0;
      if (stage >= scratch.bytes && best) break;  // the strided form stands
      if (stage >= scratch.bytes)
        throw LibraryError("cuDNN", CUDNN_STATUS_NOT_SUPPORTED,
                           "staging " + spec_.signature() + " needs more than the tuning scratch",
                           "ConvOp::prepare", __FILE__, __LINE__);
      staged_ = staged;
      stage_ = scratch.ptr;
      TuneScratch ws{static_cast<char*>(scratch.ptr) + stage, scratch.bytes - stage};
      const int ld = staged ? 0 : spec_.ldy(), y_align = staged ? 16 : align;
      auto e = std::make_shared<PlanCacheEntry>();  // this form's winner
      for (int attempt = 0; attempt < 8 && !e->plan.get(); ++attempt) {
        timed.clear();
        for (bool fused : {true, false}) {
          // Built ahead on a helper thread (the first attempt, packed output), or here.
          std::shared_ptr<OpGraph> g;
          std::vector<Candidate> cs;
          auto pre = ctx.prefetched.find(prefetch_key(key, fused));
          if (attempt == 0 && !staged && pre != ctx.prefetched.end()) {
            g = pre->second->graph;
            cs = std::move(pre->second->candidates);
            ctx.prefetched.erase(pre);
          } else {
            g = std::make_shared<OpGraph>(build_graph(ctx.cudnn, spec_, fused, ld, y_align));
            cs = candidates(ctx.cudnn, *g, spec_.precision, limit, ws.bytes, unsafe, ctx.excluded,
                            ctx.heuristic_mode_b);
          }
          for (Candidate& c : cs) {
            ++entry->candidates;
            double us = 0;
            if (tune) {
              BackendDesc vp = variant_pack(target_buffers(), fused, spec_.residual, ws.ptr);
              us = time_us([&] { return execute(c.handle, c.plan, vp, fused, ctx.stream); },
                           ctx.stream);
              if (us < 0) continue;
            }
            timed.push_back({std::move(c), fused, us, g});
          }
          if (!tune && !timed.empty()) break;
        }
        if (timed.empty()) break;
        auto by_time = [](const Timed& a, const Timed& b) { return a.us < b.us; };
        std::stable_sort(timed.begin(), timed.end(), by_time);
        for (Timed& t : timed) t.eager_us = t.us;
        const double fastest_eager = timed.front().us;
        // The graph round: the fastest few (each checked for its replay first) timed again as
        // the benchmark replays them. A finalist that cannot be captured is refused as one
        // whose replay departs.
        bool checked = false;
        if (tune && ctx.graph_tune_below_us > 0 && timed.front().us < ctx.graph_tune_below_us) {
          std::vector<Timed> finalists;
          for (Timed& t : timed) {
            if (finalists.size() == kGraphFinalists) break;
            const bool safe =
                !ctx.check_replays || graph_safe(ctx, t.c.handle, t.c.plan, t.fused, ws);
            const double us = safe ? replay_us(ctx, t.c.handle, t.c.plan, t.fused, ws) : -1;
            if (us < 0) {
              unsafe.push_back(t.c.engine.tag());
              entry->rejected.push_back(t.c.engine.tag() + (safe ? " (graph capture)" : ""));
              continue;
            }
            t.us = us;
            t.in_graph = true;
            finalists.push_back(std::move(t));
          }
          std::stable_sort(finalists.begin(), finalists.end(), by_time);
          timed = std::move(finalists);
          checked = true;
        }
        for (Timed& t : timed) {
          if (ctx.check_replays && !checked &&
              !graph_safe(ctx, t.c.handle, t.c.plan, t.fused, ws)) {
            unsafe.push_back(t.c.engine.tag());
            entry->rejected.push_back(t.c.engine.tag());
            continue;
          }
          e->plan = std::move(t.c.plan);
          e->handle = t.c.handle;
          e->config = std::move(t.c.config);
          e->graph = t.graph;
          e->engine = t.c.engine;
          e->workspace = t.c.workspace;
          e->fused = t.fused;
          e->staged = staged;
          e->tuned_us = t.us;
          e->tuned_in_graph = t.in_graph;
          e->eager_us = t.eager_us;
          e->fastest_eager_us = fastest_eager;
          e->source = t.c.source;
          break;
        }
      }
      // The two forms of a slice conv by their graph times where both had the round, else by
      // their fastest eager times (a round's winner need not be its form's fastest eagerly).
      auto faster = [](const PlanCacheEntry& a, const PlanCacheEntry& b) {
        return a.tuned_in_graph && b.tuned_in_graph ? a.tuned_us < b.tuned_us
                                                    : a.fastest_eager_us < b.fastest_eager_us;
      };
      if (e->plan.get() && (!best || faster(*e, *best))) best = e;
    }
    if (best) {
      entry->plan = std::move(best->plan);
      entry->handle = best->handle;
      entry->config = std::move(best->config);
      entry->graph = best->graph;
      entry->engine = best->engine;
      entry->workspace = best->workspace;
      entry->fused = best->fused;
      entry->staged = best->staged;
      entry->tuned_us = best->tuned_us;
      entry->tuned_in_graph = best->tuned_in_graph;
      entry->eager_us = best->eager_us;
      entry->source = best->source;
    }
    if (!entry->plan.get())
      throw no_engine_error(spec_.signature(), device_free_or_max(), "ConvOp::prepare", __FILE__,
                            __LINE__);
    if (tune && ctx.disk_plans && !record_.from_plan_cache) {
      CachedPlan c;
      c.engine = entry->engine.tag();
      c.fused = entry->fused;
      c.staged = entry->staged;
      c.tuned_us = entry->tuned_us;
      c.tuned_in_graph = entry->tuned_in_graph;
      c.tuned_eager_us = entry->eager_us;
      c.candidates = entry->candidates;
      ctx.disk_plans->put(key, c);
    }
    entry->build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ctx.plans[key] = entry;
    plan_ = entry;
  }
  // A layer's own plan (share_plans off) is built on the context's handle; a shared one runs on
  // the handle it was built on.
  handle_ = own_plan_.get() ? ctx.cudnn : plan_->handle;
  staged_ = plan_->staged;
  stage_ = scratch.ptr;
  record_.fused = plan_->fused;
  if (!plan_->fused)
    record_.op = "conv | bias" +
                 std::string(spec_.residual && !spec_.residual_after_act ? "+add" : "") +
                 (spec_.act != Act::None ? std::string("+") + act_name(spec_.act) : "") +
                 (spec_.residual && spec_.residual_after_act ? "+add" : "") + " (cnnbench kernel)";
  if (staged_) record_.op += " | copy into slice";
  record_.engine = plan_->engine.tag();
  record_.engine_notes = plan_->engine.notes();
  record_.workspace_bytes = workspace_bytes();
  record_.tuned_us = plan_->tuned_us;
  record_.tuned_in_graph = plan_->tuned_in_graph;
  record_.tuned_eager_us = plan_->tuned_in_graph ? plan_->eager_us : plan_->tuned_us;
  record_.heuristic_source = plan_->source;
  record_.candidates = plan_->candidates;
  record_.build_ms = record_.plan_reused ? 0 : plan_->build_ms;
  record_.rejected = plan_->rejected;
  // Until the arena's workspace exists, run on the tuning scratch (autotune runs layer by layer).
  variant_pack_ = variant_pack(target_buffers(), plan_->fused, spec_.residual,
                               static_cast<char*>(scratch.ptr) + (staged_ ? stage_bytes() : 0));
}

bool ConvOp::from_cache(GpuContext& ctx, const CachedPlan& c,
                        const std::vector<std::string>& unsafe, bool strided, int align,
                        const TuneScratch& scratch, PlanCacheEntry& entry) {
  if (c.staged && !strided) return false;
  if (std::find(unsafe.begin(), unsafe.end(), c.engine) != unsafe.end()) return false;
  const size_t stage = c.staged ? stage_bytes() : 0;
  if (stage >= scratch.bytes) return false;
  staged_ = c.staged;
  stage_ = scratch.ptr;
  const TuneScratch ws{static_cast<char*>(scratch.ptr) + stage, scratch.bytes - stage};
  auto g = std::make_shared<OpGraph>(
      build_graph(ctx.cudnn, spec_, c.fused, c.staged ? 0 : spec_.ldy(), c.staged ? 16 : align));
  for (RankedConfig& rc : ranked_configs(g->graph, ctx.heuristic_mode_b)) {
    BackendDesc& cfg = rc.config;
    EngineInfo& info = rc.engine;
    if (info.tag() != c.engine) continue;
    // The same checks a tuned candidate passes (candidates()): the precision, --exclude_engines.
    if (!engine_fits_precision(info, spec_.precision) || engine_excluded(info, ctx.excluded))
      return false;
    std::string why;
    BackendDesc plan = try_plan(ctx.cudnn, cfg, &why);
    if (!plan.get()) continue;
    const size_t bytes = size_t(plan.get_i64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
    if (bytes > ws.bytes) return false;
    if (ctx.check_replays && !graph_safe(ctx, ctx.cudnn, plan, c.fused, ws)) {
      entry.rejected.push_back(c.engine + " (from the plan cache)");
      return false;
    }
    entry.plan = std::move(plan);
    entry.handle = ctx.cudnn;
    entry.config = std::move(cfg);
    entry.graph = g;
    entry.engine = std::move(info);
    entry.workspace = bytes;
    entry.fused = c.fused;
    entry.staged = c.staged;
    entry.tuned_us = c.tuned_us;
    entry.tuned_in_graph = c.tuned_in_graph;
    entry.eager_us = c.tuned_in_graph ? c.tuned_eager_us : c.tuned_us;
    entry.candidates = 1;
    entry.source = "plan cache";
    return true;
  }
  return false;
}

std::string ConvOp::ban_engine(GpuContext& ctx) {
  if (!plan_) return "";
  const std::string tag = plan_->engine.tag();
  ctx.banned[plan_key_].push_back(tag);
  ctx.plans.erase(plan_key_);
  return tag;
}

ConvBuffers ConvOp::target_buffers() const {
  ConvBuffers b = buf_;
  if (staged_) b.y = stage_;
  return b;
}

const BackendDesc& ConvOp::plan() const {
  return own_plan_.get() ? own_plan_ : plan_->plan;
}

size_t ConvOp::workspace_bytes() const {
  return plan_ ? plan_->workspace + (plan_->staged ? stage_bytes() : 0) : 0;
}

void ConvOp::bind_workspace(void* workspace, size_t bytes) {
  if (bytes < workspace_bytes()) throw std::logic_error("conv: workspace too small");
  stage_ = workspace;
  variant_pack_ = variant_pack(target_buffers(), plan_->fused, spec_.residual,
                               static_cast<char*>(workspace) + (staged_ ? stage_bytes() : 0));
}

bool ConvOp::execute(cudnnHandle_t handle, const BackendDesc& plan, const BackendDesc& vp,
                     bool fused, cudaStream_t stream) {
  if (cudnnBackendExecute(handle, plan.get(), vp.get()) != CUDNN_STATUS_SUCCESS) return false;
  if (!fused) epilogue(target_buffers().y, staged_ ? spec_.y.c : spec_.ldy(), stream);
  if (staged_) unstage(stream);
  return true;
}

bool ConvOp::graph_safe(GpuContext& ctx, cudnnHandle_t handle, const BackendDesc& plan, bool fused,
                        const TuneScratch& scratch) {
  const DType t = storage_type(spec_.precision);
  // The first and the last rows of y, about a million elements each (all of y when smaller),
  // and of each row only the channels this conv writes: the rest of a concat buffer's row
  // belongs to other layers and may hold anything, NaN included.
  const size_t rows = size_t(spec_.y.n) * spec_.y.h * spec_.y.w;
  const size_t ld = size_t(spec_.ldy()), c = size_t(spec_.y.c);
  const size_t window = std::min<size_t>(rows, std::max<size_t>(1, (size_t(1) << 20) / ld));
  auto read = [&] {
    std::vector<float> v;
    for (size_t first : {size_t(0), rows - window}) {
      const char* p = static_cast<const char*>(buf_.y) + first * ld * dtype_size(t);
      const std::vector<float> span = download(p, (window - 1) * ld + c, t);
      for (size_t r = 0; r < window; ++r)
        v.insert(v.end(), span.begin() + r * ld, span.begin() + r * ld + c);
    }
    return v;
  };
  BackendDesc vp = variant_pack(target_buffers(), fused, spec_.residual, scratch.ptr);
  if (!execute(handle, plan, vp, fused, ctx.stream)) return false;
  const std::vector<float> direct = read();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    const bool ran = execute(handle, plan, vp, fused, ctx.stream);
    ok = cudaStreamEndCapture(ctx.stream, &graph) == cudaSuccess && ran &&
         cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  if (ok) {
    // A dirty workspace (and staging buffer) and a poisoned output: the replay must rebuild
    // both by itself.
    CNN_CHECK_CUDA(cudaMemsetAsync(scratch.ptr, 0x7F, scratch.bytes, ctx.stream));
    if (staged_) CNN_CHECK_CUDA(cudaMemsetAsync(stage_, 0x7F, stage_bytes(), ctx.stream));
    poison_output(ctx.stream);
    for (int i = 0; i < 2 && ok; ++i) ok = cudaGraphLaunch(exec, ctx.stream) == cudaSuccess;
    ok = ok && cudaStreamSynchronize(ctx.stream) == cudaSuccess;
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a failed capture leaves its error behind; it is our answer, not sticky
  if (!ok) return false;
  return replay_matches(read(), direct);
}

double ConvOp::replay_us(GpuContext& ctx, cudnnHandle_t handle, const BackendDesc& plan, bool fused,
                         const TuneScratch& scratch) {
  BackendDesc vp = variant_pack(target_buffers(), fused, spec_.residual, scratch.ptr);
  try {
    return graph_us(
        [&](cudaStream_t s) {
          if (!execute(handle, plan, vp, fused, s))
            throw std::runtime_error("cudnnBackendExecute failed while captured");
        },
        ctx.stream, kGraphTuneRuns);
  } catch (const std::exception&) {
    cudaGetLastError();  // what the failed capture left; the plan is refused
    if (cudaStreamSynchronize(ctx.stream) != cudaSuccess) throw;  // a sticky fault is no refusal
    return -1;
  }
}

void ConvOp::epilogue(void* y, int ld, cudaStream_t stream) {
  RowLayout l;
  l.rows = int64_t(spec_.y.n) * spec_.y.h * spec_.y.w;
  l.channels = spec_.y.c;
  l.ld_y = l.ld_x = ld;
  l.ld_z = spec_.y.c;  // the residual is always packed
  l.z_after_act = spec_.residual_after_act;
  launch_epilogue(storage_type(spec_.precision), y, y, nullptr, buf_.bias, buf_.z, spec_.act, l,
                  stream);
}

void ConvOp::unstage(cudaStream_t stream) {
  launch_copy_channels(storage_type(spec_.precision), buf_.y, spec_.ldy(), stage_, spec_.y.c,
                       int64_t(spec_.y.n) * spec_.y.h * spec_.y.w, spec_.y.c, stream);
}

void ConvOp::run(cudaStream_t stream) {
  // On `stream`, which is not always the handle's: a training step is captured on a stream of
  // its own (until 2026-12-04 the forward convs of such a capture ran once, at capture time, on
  // the context's stream, and were missing from the replayed step).
  CNN_CHECK_CUDNN(execute_on(handle_, plan(), variant_pack_, stream));
  if (!plan_->fused) epilogue(target_buffers().y, staged_ ? spec_.y.c : spec_.ldy(), stream);
  if (staged_) unstage(stream);
}

double ConvOp::verify(int samples, uint64_t seed) const {
  const DType t = storage_type(spec_.precision);
  const Dims X = spec_.x, Y = spec_.y;
  const int K = Y.c, C = X.c / spec_.groups, R = spec_.kernel, S = spec_.kw();
  const int ld = spec_.ldy();
  const std::vector<float> x = download(buf_.x, size_t(X.numel()), t);
  const std::vector<float> w = download(buf_.w, size_t(K) * R * S * C, t);
  const std::vector<float> b = download(buf_.bias, size_t(K), t);
  const std::vector<float> y = download(buf_.y, y_span() / dtype_size(t), t);
  const std::vector<float> z =
      spec_.residual ? download(buf_.z, size_t(Y.numel()), t) : std::vector<float>();
  ConvGeometry geom;
  geom.x = X, geom.y = Y, geom.kernel_h = R, geom.kernel_w = S, geom.stride = spec_.stride;
  geom.pad_h = spec_.pad, geom.pad_w = spec_.pw(), geom.dilation = spec_.dilation;
  geom.groups = spec_.groups;
  uint64_t state = seed;
  double num = 0, den = 0;
  for (int i = 0; i < samples; ++i) {
    const SampledOutput o = next_sampled_output(state, Y);
    const int64_t idx = o.idx, row = o.row;
    const int k = o.k, n = o.n, oh = o.oh, ow = o.ow;
    double acc = b[k] + conv_window(geom, x.data(), w.data(), n, k, oh, ow);
    if (spec_.residual && !spec_.residual_after_act) acc += z[idx];
    acc = act_ref(spec_.act, acc);
    if (spec_.residual && spec_.residual_after_act) acc += z[idx];
    const float got = y[size_t(row) * ld + k];
    if (!std::isfinite(got)) return INFINITY;
    num += (got - acc) * (got - acc);
    den += acc * acc;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<EngineCandidate> engine_candidates(cudnnHandle_t h, const BackendDesc& op_graph,
                                               Precision p, size_t limit, size_t max_workspace,
                                               const std::vector<std::string>& excluded,
                                               bool with_mode_b, std::string* why) {
  constexpr int kMaxCompiled = 1;
  CandidateQuota quota(limit, with_mode_b);
  std::vector<EngineCandidate> out;
  int compiled = 0;
  // Each list in its own order; a tag an earlier list already gave is skipped, so mode B's share
  // goes to its own top picks that A's share did not take (not only to tags A never listed).
  for (RankedConfig& rc : ranked_configs(op_graph, quota.extra > 0, false)) {
    if (!quota.wants(rc.source)) continue;
    const EngineInfo& info = rc.engine;
    bool taken = false;
    for (const EngineCandidate& c : out) taken |= c.engine.tag() == info.tag();
    if (taken) continue;
    if (!engine_fits_precision(info, p) || engine_excluded(info, excluded)) continue;
    const bool rtc = info.has_behavior(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
    if (rtc && compiled >= kMaxCompiled) continue;
    BackendDesc plan = try_plan(h, rc.config, why);
    if (!plan.get()) continue;
    const size_t ws = size_t(plan.get_i64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
    if (ws > max_workspace) {
      if (why) *why = info.tag() + " needs " + std::to_string(ws) + " bytes of workspace";
      continue;
    }
    compiled += rtc;
    quota.took(rc.source);
    out.push_back({std::move(plan), rc.engine, ws, std::move(rc.config), h, rc.source});
  }
  return out;
}

ConvWithAlternative::ConvWithAlternative(const ConvSpec& spec, const ConvBuffers& buffers)
    : conv_(std::make_unique<ConvOp>(spec, buffers)) {}

ConvWithAlternative::~ConvWithAlternative() = default;

size_t ConvWithAlternative::workspace_bytes() const {
  return use_cudnn_ ? conv_->workspace_bytes() : 0;
}

void ConvWithAlternative::bind_workspace(void* workspace, size_t bytes) {
  if (use_cudnn_) conv_->bind_workspace(workspace, bytes);
}

std::string ConvWithAlternative::ban_engine(GpuContext& ctx) {
  return use_cudnn_ ? conv_->ban_engine(ctx) : "";
}

}  // namespace cnnbench
