#include "kernels/conv_backward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <vector>

#include "harness/check.h"
#include "kernels/storage.h"
#include "kernels/train_kernels.h"

namespace cnnbench {

struct ConvBackwardGraph {
  std::deque<BackendDesc> keep;  // descriptors the graph refers to
  BackendDesc op;
  BackendDesc graph;
};

namespace {

enum Uid : int64_t { kX = 1, kW = 2, kDY = 3, kDX = 4, kDW = 5 };

Dims filter_dims(const ConvBackwardSpec& s) {
  return {s.y.c, s.x.c / s.groups, s.kernel, s.kw()};
}

// The graph of the one backward op, or null where cuDNN refuses the op (e.g. a type mix no
// engine knows). dw_type: the filter gradient's type.
std::unique_ptr<ConvBackwardGraph> build_graph(cudnnHandle_t handle, const ConvBackwardSpec& s,
                                               ConvGrad grad, const ConvBackwardBuffers& b,
                                               DType dw_type, std::string* why) {
  auto g = std::make_unique<ConvBackwardGraph>();
  const DType t = storage_type(s.precision);
  const Dims wd = filter_dims(s);

  BackendDesc conv = make_conv_descriptor(s.stride, s.pad, s.pw(), s.dilation);
  g->keep.push_back(std::move(conv));
  const BackendDesc& c = g->keep.back();

  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  if (grad == ConvGrad::Data) {
    g->keep.push_back(make_tensor(kDX, t, s.x, false, 0, pointer_alignment(b.dx)));
    const BackendDesc& dx = g->keep.back();
    g->keep.push_back(make_tensor(kW, t, wd, false, 0, pointer_alignment(b.w)));
    const BackendDesc& w = g->keep.back();
    g->keep.push_back(make_tensor(kDY, t, s.y, false, 0, pointer_alignment(b.dy)));
    const BackendDesc& dy = g->keep.back();
    g->op = BackendDesc(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
    g->op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, dx)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, dy)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, c)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  } else {
    g->keep.push_back(make_tensor(kX, t, s.x, false, 0, pointer_alignment(b.x)));
    const BackendDesc& x = g->keep.back();
    g->keep.push_back(make_tensor(kDW, dw_type, wd, false, 0, pointer_alignment(b.dw)));
    const BackendDesc& dw = g->keep.back();
    g->keep.push_back(make_tensor(kDY, t, s.y, false, 0, pointer_alignment(b.dy)));
    const BackendDesc& dy = g->keep.back();
    g->op = BackendDesc(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
    g->op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, dw)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, dy)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, c)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  }
  if (!g->op.try_finalize(why)) return nullptr;
  g->graph = BackendDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g->graph.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle)
      .set_descs(CUDNN_ATTR_OPERATIONGRAPH_OPS, {&g->op});
  if (!g->graph.try_finalize(why)) return nullptr;
  return g;
}

using Candidate = EngineCandidate;

std::vector<Candidate> candidates(cudnnHandle_t h, const ConvBackwardGraph& g, Precision p,
                                  size_t limit, size_t max_workspace,
                                  const std::vector<std::string>& excluded, bool mode_b,
                                  std::string* why) {
  return engine_candidates(h, g.graph, p, limit, max_workspace, excluded, mode_b, why);
}

const char* grad_name(ConvGrad g) {
  return g == ConvGrad::Data ? "conv_bwd_data" : "conv_bwd_filter";
}

}  // namespace

std::string ConvBackwardSpec::signature(ConvGrad g) const {
  return std::string(grad_name(g)) + ":" + precision_name(precision) + ":" + x.str() + ":" +
         y.str() + ":k" + std::to_string(kernel) + "x" + std::to_string(kw()) + "s" +
         std::to_string(stride) + "p" + std::to_string(pad) + "x" + std::to_string(pw()) + "d" +
         std::to_string(dilation) + "g" + std::to_string(groups) + (accumulate ? ":acc" : "") +
         (fp32_dw ? ":dw32" : "");
}

ConvBackwardSpec ConvBackwardSpec::of(const ConvSpec& f) {
  ConvBackwardSpec s;
  s.name = f.name;
  s.x = f.x, s.y = f.y;
  s.kernel = f.kernel, s.kernel_w = f.kernel_w, s.stride = f.stride, s.pad = f.pad;
  s.pad_w = f.pad_w, s.dilation = f.dilation, s.groups = f.groups;
  s.precision = f.precision;
  return s;
}

ConvBackwardOp::ConvBackwardOp(const ConvBackwardSpec& spec, ConvGrad grad,
                               const ConvBackwardBuffers& buffers)
    : spec_(spec), grad_(grad), buf_(buffers) {
  if (spec.groups < 1 || spec.x.c % spec.groups || spec.y.c % spec.groups)
    throw std::logic_error("conv backward: channels not divisible by groups in " + spec.name);
  const bool data = grad == ConvGrad::Data;
  if (data ? !(buffers.dy && buffers.w && buffers.dx) : !(buffers.x && buffers.dy && buffers.dw))
    throw std::logic_error(std::string(grad_name(grad)) + ": a buffer is missing in " + spec.name);
  record_.name = spec.name;
  record_.op = std::string(grad_name(grad)) + (spec.accumulate ? " (accumulate)" : "");
  record_.shape =
      "in " + spec.x.str() + " -> out " + spec.y.str() + " k" + std::to_string(spec.kernel) +
      (spec.kw() != spec.kernel ? "x" + std::to_string(spec.kw()) : "") + " s" +
      std::to_string(spec.stride) + (spec.groups > 1 ? " g" + std::to_string(spec.groups) : "");
  const DType t = storage_type(spec.precision);
  dw_type_ = data ? t : DType::F32;
  out_ = data ? buffers.dx : buffers.dw;
  out_bytes_ = data ? size_t(spec.x.numel()) * dtype_size(t) : 0;  // dw's: once its type is known
}

ConvBackwardOp::~ConvBackwardOp() = default;

BackendDesc ConvBackwardOp::variant_pack(void* workspace) const {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  if (grad_ == ConvGrad::Data) {
    uids = {kDX, kW, kDY};
    ptrs = {buf_.dx, const_cast<void*>(buf_.w), const_cast<void*>(buf_.dy)};
  } else {
    uids = {kX, kDW, kDY};
    ptrs = {const_cast<void*>(buf_.x), buf_.dw, const_cast<void*>(buf_.dy)};
  }
  BackendDesc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
           ptrs.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  vp.finalize();
  return vp;
}

bool ConvBackwardOp::execute(const BackendDesc& plan, const BackendDesc& vp, cudaStream_t stream) {
  return execute_on(handle_, plan, vp, stream) == CUDNN_STATUS_SUCCESS;
}

bool ConvBackwardOp::graph_safe(GpuContext& ctx, const BackendDesc& plan,
                                const TuneScratch& scratch) {
  const DType t = grad_ == ConvGrad::Data ? storage_type(spec_.precision) : dw_type_;
  const size_t n = out_bytes_ / dtype_size(t);
  // The first and the last million elements (all of the output when smaller), as ConvOp's check
  // reads y: the whole of a data gradient at batch 256 (411 MB in fp16 at ResNet-50's layer1,
  // downloaded as floats twice and copied again by replay_matches) made a training model's build
  // most of a breakdown's 95 s (calls 107 and 110).
  const size_t window = std::min<size_t>(n, size_t(1) << 20);
  auto read = [&] {
    std::vector<float> v = download(out_, window, t);
    if (n > window) {
      const char* tail = static_cast<const char*>(out_) + (n - window) * dtype_size(t);
      const std::vector<float> end = download(tail, window, t);
      v.insert(v.end(), end.begin(), end.end());
    }
    return v;
  };
  const BackendDesc vp = variant_pack(scratch.ptr);
  // From zeros (all bits zero is 0 in every type), so that an accumulating op adds to a known
  // output whatever the caller's buffer holds.
  CNN_CHECK_CUDA(cudaMemsetAsync(out_, 0, out_bytes_, ctx.stream));
  if (!execute(plan, vp, ctx.stream)) return false;
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  const std::vector<float> direct = read();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    const bool ran = execute(plan, vp, ctx.stream);
    ok = cudaStreamEndCapture(ctx.stream, &graph) == cudaSuccess && ran &&
         cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  if (ok) {
    // A dirty workspace, and the output poisoned (accumulating: zeros again): the replay must
    // rebuild everything by itself. An accumulating op replays once, others twice.
    CNN_CHECK_CUDA(cudaMemsetAsync(scratch.ptr, 0x7F, scratch.bytes, ctx.stream));
    if (spec_.accumulate)
      CNN_CHECK_CUDA(cudaMemsetAsync(out_, 0, out_bytes_, ctx.stream));
    else
      poison_output(ctx.stream);
    const int replays = spec_.accumulate ? 1 : 2;
    for (int i = 0; i < replays && ok; ++i) ok = cudaGraphLaunch(exec, ctx.stream) == cudaSuccess;
    ok = ok && cudaStreamSynchronize(ctx.stream) == cudaSuccess;
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a failed capture leaves its error behind; it is our answer, not sticky
  if (!ok) return false;
  // The op's inputs are the step's own: an fp16 step's scaled gradients may overflow.
  return replay_matches(read(), direct);
}

void ConvBackwardOp::prepare(GpuContext& ctx, EngineMode mode, int top_k,
                             const TuneScratch& scratch) {
  const auto t0 = std::chrono::steady_clock::now();
  handle_ = ctx.cudnn;
  const DType t = storage_type(spec_.precision);
  const bool tune = mode == EngineMode::Autotune;
  const bool runs = tune || ctx.check_replays;  // whether a candidate runs here at all
  const size_t limit = tune ? size_t(std::max(top_k, 1)) : 1;
  // The filter gradient of fp16 and bf16: in the storage type, as PyTorch's autocast writes it,
  // then in fp32; under autotune both are timed and the faster is kept.
  std::vector<DType> dw_types{t};
  if (grad_ == ConvGrad::Filter && t != DType::F32) dw_types.push_back(DType::F32);
  if (spec_.fp32_dw && dw_types.size() == 2) std::swap(dw_types[0], dw_types[1]);
  DType chosen_dw = t;
  std::string why = "heuristics offer no engine";
  std::vector<std::string> skip = ctx.excluded;  // and engines whose graph replay disagreed
  // The output as it was, restored at the end; not zeroed first (the copy fills it: zeroing 411
  // MB, a data gradient at batch 256, cost about as much as the copy).
  std::unique_ptr<uint8_t[]> initial;
  size_t initial_bytes = 0;
  record_.rejected.clear();
  bool chosen = false;
  int tried = 0;
  double best_us = 0;
  if (spec_.force_padded && paddable()) dw_types.clear();
  // The most bytes the output may hold (dw in fp32): kept to put back after the runs.
  const size_t max_out_bytes = grad_ == ConvGrad::Data
                                   ? size_t(spec_.x.numel()) * dtype_size(t)
                                   : size_t(filter_dims(spec_).numel()) * sizeof(float);
  for (DType dwt : dw_types) {
    if (chosen && (!tune || spec_.fp32_dw)) break;
    auto g = build_graph(ctx.cudnn, spec_, grad_, buf_, dwt, &why);
    if (!g) continue;
    dw_type_ = dwt;
    out_bytes_ = grad_ == ConvGrad::Data ? size_t(spec_.x.numel()) * dtype_size(t)
                                         : size_t(filter_dims(spec_).numel()) * dtype_size(dwt);
    // Saved only where a run will write it (timing or the replay check): at a large batch the
    // copy both ways took most of a training model's build (20 s at ResNet-50's 1,024 images).
    if (runs && !initial) {
      initial.reset(new uint8_t[max_out_bytes]);
      initial_bytes = max_out_bytes;
      CNN_CHECK_CUDA(cudaMemcpy(initial.get(), out_, max_out_bytes, cudaMemcpyDeviceToHost));
    }
    bool got = false;
    for (int attempt = 0; attempt < 8 && !got; ++attempt) {
      std::vector<Candidate> cs = candidates(ctx.cudnn, *g, spec_.precision, limit, scratch.bytes,
                                             skip, ctx.heuristic_mode_b, &why);
      if (cs.empty()) break;
      tried += int(cs.size());
      std::vector<double> us(cs.size(), 0.0);
      if (tune) {
        // Median of five timed runs after two warm-ups; a candidate that fails to run is last.
        cudaEvent_t start, stop;
        CNN_CHECK_CUDA(cudaEventCreate(&start));
        CNN_CHECK_CUDA(cudaEventCreate(&stop));
        const BackendDesc vp = variant_pack(scratch.ptr);
        double fastest = 1e30;
        for (size_t i = 0; i < cs.size(); ++i) {
          std::vector<float> times;
          bool slow = false;
          for (int rep = 0; rep < 7; ++rep) {
            CNN_CHECK_CUDA(cudaEventRecord(start, ctx.stream));
            const bool ok = execute(cs[i].plan, vp, ctx.stream);
            CNN_CHECK_CUDA(cudaEventRecord(stop, ctx.stream));
            CNN_CHECK_CUDA(cudaEventSynchronize(stop));
            if (!ok) break;
            float ms = 0;
            CNN_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
            // A second run four times slower than the fastest median so far cannot win: its
            // time stands as it is, and the rest of its runs are saved (fp32's eng0 took 32 ms).
            if (rep == 1 && ms * 1000.0 > 4 * fastest) {
              us[i] = ms * 1000.0;
              slow = true;
              break;
            }
            if (rep >= 2) times.push_back(ms);
          }
          if (slow) continue;
          std::sort(times.begin(), times.end());
          us[i] = times.size() < 5 ? 1e30 : times[2] * 1000.0;
          fastest = std::min(fastest, us[i]);
        }
        CNN_CHECK_CUDA(cudaEventDestroy(start));
        CNN_CHECK_CUDA(cudaEventDestroy(stop));
      }
      std::vector<size_t> order(cs.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return us[a] < us[b]; });
      for (size_t i : order) {
        const std::string tag = cs[i].engine.tag();
        if (us[i] >= 1e30 || (ctx.check_replays && !graph_safe(ctx, cs[i].plan, scratch))) {
          skip.push_back(tag);
          record_.rejected.push_back(tag);
          continue;
        }
        got = true;
        if (!chosen || us[i] < best_us) {  // the first, or faster than the other dw type's
          config_ = std::move(cs[i].config);
          plan_ = std::move(cs[i].plan);
          engine_ = cs[i].engine;
          workspace_ = cs[i].workspace;
          record_.heuristic_source = cs[i].source;
          best_us = us[i];
          graph_ = std::move(g);
          chosen_dw = dwt;
          chosen = true;
        }
        break;
      }
    }
  }
  if (chosen) {
    dw_type_ = chosen_dw;
    out_bytes_ = grad_ == ConvGrad::Data
                     ? size_t(spec_.x.numel()) * dtype_size(t)
                     : size_t(filter_dims(spec_).numel()) * dtype_size(chosen_dw);
  }
  if (initial)
    CNN_CHECK_CUDA(cudaMemcpy(out_, initial.get(), initial_bytes, cudaMemcpyHostToDevice));
  if (!chosen && paddable()) {
    prepare_padded(ctx, mode, top_k, scratch);
    record_.build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return;
  }
  if (!chosen)
    throw no_engine_error(spec_.signature(grad_) + ": " + why, device_free_or_max(),
                          "ConvBackwardOp::prepare", __FILE__, __LINE__);
  record_.engine = engine_.tag();
  record_.engine_notes = engine_.notes();
  record_.op = std::string(grad_name(grad_)) + (spec_.accumulate ? " (accumulate)" : "") +
               (grad_ == ConvGrad::Filter ? std::string(" dw ") + dtype_name(dw_type_) : "");
  record_.workspace_bytes = workspace_;
  record_.tuned_us = tune ? best_us : 0;
  record_.candidates = tried;
  record_.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  variant_pack_ = variant_pack(scratch.ptr);
}

bool ConvBackwardOp::paddable() const {
  return grad_ == ConvGrad::Filter && storage_type(spec_.precision) != DType::F32 &&
         spec_.groups == 1 && spec_.x.c % 8 != 0 && !padded_;
}

void ConvBackwardOp::prepare_padded(GpuContext& ctx, EngineMode mode, int top_k,
                                    const TuneScratch& scratch) {
  const auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  const DType t = storage_type(spec_.precision);
  ConvBackwardSpec ps = spec_;
  ps.x.c = (spec_.x.c + 7) / 8 * 8;
  ps.accumulate = false;  // our copy back adds where this op accumulates
  ps.force_padded = false;
  ps.name = spec_.name + " (x padded)";
  pad_dw_offset_ = align(size_t(ps.x.numel()) * dtype_size(t));
  pad_ws_offset_ = pad_dw_offset_ + align(size_t(filter_dims(ps).numel()) * sizeof(float));
  // The padded tensors do not fit in the caller's scratch at large batches: a scratch of our own
  // for choosing the inner op's engine, with the caller's bytes left for its workspace.
  TuneScratch own;
  own.bytes = pad_ws_offset_ + scratch.bytes;
  CNN_CHECK_CUDA(cudaMalloc(&own.ptr, own.bytes));
  char* base = static_cast<char*>(own.ptr);
  ConvBackwardBuffers pb;
  pb.x = base;
  pb.dy = buf_.dy;
  pb.dw = base + pad_dw_offset_;
  try {
    padded_ = std::make_unique<ConvBackwardOp>(ps, ConvGrad::Filter, pb);
    padded_->prepare(ctx, mode, top_k, TuneScratch{base + pad_ws_offset_, scratch.bytes});
  } catch (...) {
    padded_.reset();
    cudaFree(own.ptr);
    throw;
  }
  CNN_CHECK_CUDA(cudaFree(own.ptr));
  dw_type_ = padded_->dw_type();
  out_bytes_ = size_t(filter_dims(spec_).numel()) * dtype_size(dw_type_);
  engine_ = padded_->engine_;
  workspace_ = pad_ws_offset_ + padded_->workspace_bytes();
  const LayerRecord& r = padded_->record();
  record_.engine =
      r.engine + " on x padded " + std::to_string(spec_.x.c) + "->" + std::to_string(ps.x.c);
  record_.engine_notes = r.engine_notes;
  record_.op = std::string(grad_name(grad_)) + (spec_.accumulate ? " (accumulate)" : "") + " dw " +
               dtype_name(dw_type_);
  record_.workspace_bytes = workspace_;
  record_.tuned_us = r.tuned_us;
  record_.candidates = r.candidates;
  record_.rejected = r.rejected;
  workspace_ptr_ = nullptr;  // bound by bind_workspace
}

void ConvBackwardOp::bind_workspace(void* workspace, size_t bytes) {
  if (bytes < workspace_) throw std::logic_error("conv backward: workspace too small");
  if (padded_) {
    char* base = static_cast<char*>(workspace);
    workspace_ptr_ = workspace;
    padded_->buf_.x = base;
    padded_->buf_.dw = base + pad_dw_offset_;
    padded_->bind_workspace(base + pad_ws_offset_, bytes - pad_ws_offset_);
    return;
  }
  variant_pack_ = variant_pack(workspace);
}

void ConvBackwardOp::run(cudaStream_t stream) {
  if (padded_) {
    if (!workspace_ptr_) throw std::logic_error("conv backward: padded op run before binding");
    const DType t = storage_type(spec_.precision);
    const Dims& xp = padded_->spec_.x;
    char* base = static_cast<char*>(workspace_ptr_);
    launch_repack_channels(t, buf_.x, spec_.x.c, base, xp.c, int64_t(xp.n) * xp.h * xp.w, false,
                           stream);
    padded_->run(stream);
    const Dims f = filter_dims(spec_);
    launch_repack_channels(dw_type_, base + pad_dw_offset_, xp.c, buf_.dw, f.c,
                           int64_t(f.n) * f.h * f.w, spec_.accumulate, stream);
    return;
  }
  if (!plan_.get()) throw std::logic_error("conv backward: run before prepare");
  CNN_CHECK_CUDNN(execute_on(handle_, plan_, variant_pack_, stream));
}

}  // namespace cnnbench
