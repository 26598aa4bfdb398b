#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <vector>

#include "harness/check.h"
#include "kernels/conv_ref.h"
#include "kernels/depthwise.h"
#include "kernels/storage.h"
#include "kernels/timing.h"

namespace cnnbench {

namespace {

// Samples of the check that keeps our kernel (a host recompute in double), and its tolerance:
// looser than --verify's, it is there to catch a wrong kernel, not rounding.
constexpr int kCheckSamples = 128;
double check_tolerance(Precision p) {
  return p == Precision::FP32 || p == Precision::TF32 ? 1e-4 : 2e-2;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

DepthwiseSpec depthwise_spec(const ConvSpec& s) {
  DepthwiseSpec d;
  d.x = s.x, d.y = s.y;
  d.kernel = s.kernel, d.stride = s.stride, d.pad = s.pad, d.pad_w = s.pw();
  d.act = s.act;
  return d;
}

bool depthwise_eligible(const ConvSpec& s, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (s.residual_after_act) return no("a residual after the activation");
  if (s.groups <= 1 || s.groups != s.x.c || s.y.c != s.x.c)
    return no("not depthwise: groups, input and output channels differ");
  if (s.kw() != s.kernel) return no("the kernel is not square");
  if (s.dilation != 1) return no("dilated");
  if (s.residual) return no("adds a residual");
  if (s.ldy() != s.y.c) return no("writes a slice of a wider buffer");
  try {
    const DType t = storage_type(s.precision);
    for (bool aligned : {true, false}) depthwise_geometry(t, depthwise_spec(s), aligned);
  } catch (const std::invalid_argument& e) {
    return no(e.what());
  }
  return true;
}

DepthwiseOp::DepthwiseOp(const ConvSpec& spec, const ConvBuffers& buffers, DepthwiseChoice choice)
    : ConvWithAlternative(spec, buffers),
      spec_(spec),
      ds_(depthwise_spec(spec)),
      buf_(buffers),
      choice_(choice) {
  std::string why;
  if (!depthwise_eligible(spec, &why))
    throw std::logic_error("depthwise: " + spec.name + " is not for our kernel: " + why);
  record_ = conv_->record();  // name, op and shape as the conv gives them
  record_.engine = "cnnbench depthwise kernel";
  out_ = buffers.y;
  out_bytes_ = size_t(spec.y.numel()) * dtype_size(storage_type(spec.precision));
  px_ = depthwise_geometry(storage_type(spec.precision), ds_,
                           aligned16(buffers.x) && aligned16(buffers.y))
            .px;
}

DepthwiseOp::~DepthwiseOp() = default;

const ConvOp* DepthwiseOp::cudnn_conv(EngineMode mode) const {
  const bool builds = choice_ == DepthwiseChoice::Cudnn ||
                      (choice_ == DepthwiseChoice::Auto && mode == EngineMode::Autotune);
  return builds ? conv_.get() : nullptr;
}

void DepthwiseOp::prepare_cudnn(GpuContext& ctx, EngineMode mode, int top_k,
                                const TuneScratch& scratch) {
  if (conv_prepared_) return;
  conv_->prepare(ctx, mode, top_k, scratch);
  conv_prepared_ = true;
}

void DepthwiseOp::run_ours(cudaStream_t stream) const {
  launch_depthwise(storage_type(spec_.precision), buf_.x, buf_.w, buf_.bias, buf_.y, ds_, px_,
                   stream);
}

void DepthwiseOp::prepare(GpuContext& ctx, EngineMode mode, int top_k, const TuneScratch& scratch) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  if (choice_ == DepthwiseChoice::Cudnn) {
    prepare_cudnn(ctx, mode, top_k, scratch);
    use_cudnn_ = true;
    record_ = conv_->record();
    return;
  }
  const DType t = storage_type(spec_.precision);
  const bool tune = mode == EngineMode::Autotune;
  const bool race = tune && choice_ == DepthwiseChoice::Auto;
  // cuDNN first (autotune, auto): its own tuning, then its run() timed as ours is.
  double cudnn_us = -1;
  if (race) {
    prepare_cudnn(ctx, mode, top_k, scratch);
    cudnn_us = graph_us([&](cudaStream_t s) { conv_->run(s); }, ctx.stream);
  }
  // Ours: under autotune each px choice timed, the fastest kept; else the geometry's choice.
  const bool aligned = aligned16(buf_.x) && aligned16(buf_.y);
  std::vector<int> choices = tune ? depthwise_px_choices(t, ds_, aligned)
                                  : std::vector<int>{depthwise_geometry(t, ds_, aligned).px};
  double ours_us = 0;
  std::string per_px;
  px_ = choices.front();
  if (tune) {
    ours_us = -1;
    for (int p : choices) {
      const double us = graph_us(
          [&](cudaStream_t s) {
            launch_depthwise(t, buf_.x, buf_.w, buf_.bias, buf_.y, ds_, p, s);
          },
          ctx.stream);
      if (choices.size() > 1)
        per_px +=
            std::string(per_px.empty() ? "" : ", ") + "px" + std::to_string(p) + " " + us_text(us);
      if (ours_us < 0 || us < ours_us) ours_us = us, px_ = p;
    }
  }
  // Ours is kept only while sampled outputs agree with a host recompute from the same inputs.
  run_ours(ctx.stream);
  CNN_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  const double err = verify(kCheckSamples, 0x6477636f6e76ull);
  // False for NaN; true where nothing could be checked (-1: every sampled input non-finite).
  const bool ours_ok = err <= check_tolerance(spec_.precision);
  std::vector<std::string> refused;
  if (!ours_ok) {
    char why[200];
    std::snprintf(why, sizeof why,
                  "cnnbench depthwise kernel (px %d): %d sampled outputs depart from the host "
                  "recompute, rel_l2 %.2e",
                  px_, kCheckSamples, err);
    if (choice_ == DepthwiseChoice::Cnnbench)
      throw std::runtime_error(spec_.name + ": " + why + " (--depthwise=cnnbench)");
    refused.push_back(why);
  }
  use_cudnn_ = !ours_ok || (race && cudnn_us < ours_us);
  if (use_cudnn_) prepare_cudnn(ctx, mode, top_k, scratch);
  if (use_cudnn_) {
    record_ = conv_->record();
    if (race) set_raced_time(record_, cudnn_us);
    if (tune) record_.candidates += int(choices.size());
  } else {
    record_ = conv_->record();  // name and shape; the rest is ours
    record_.op = spec_.op_name();
    record_.engine = "cnnbench depthwise kernel";
    record_.engine_notes.clear();
    record_.fused = true;
    record_.workspace_bytes = 0;
    record_.tuned_us = tune ? ours_us : 0;
    record_.tuned_in_graph = tune;
    record_.tuned_eager_us = 0;
    record_.candidates = int(choices.size()) + (race ? conv_->record().candidates : 0);
    record_.plan_reused = false;
    record_.rejected.clear();
  }
  std::string notes;
  if (race && ours_ok) {
    notes = "cudnn " + conv_->record().engine + " " + us_text(cudnn_us) + ", ours " +
            us_text(ours_us) + " (px " + std::to_string(px_) +
            (per_px.empty() ? "" : ": " + per_px) + ")";
  } else if (!use_cudnn_) {
    notes = std::string(tune ? "ours " + us_text(ours_us) + ", " : "") + "px " +
            std::to_string(px_) + (per_px.empty() ? "" : " (" + per_px + ")") +
            (choice_ == DepthwiseChoice::Cnnbench ? "; --depthwise=cnnbench"
                                                  : "; heuristics take ours, cuDNN not built");
  } else {
    notes = "ours refused";
  }
  if (use_cudnn_ && !conv_->record().engine_notes.empty())
    notes += "; " + conv_->record().engine_notes;
  record_.engine_notes = notes;
  for (const std::string& r : refused) record_.rejected.push_back(r);
  record_.build_ms = elapsed_ms();
}

void DepthwiseOp::run(cudaStream_t stream) {
  if (use_cudnn_)
    conv_->run(stream);
  else
    run_ours(stream);
}

double DepthwiseOp::verify(int samples, uint64_t seed) const {
  // Only what each sampled output reads is downloaded (one window row at a time), so that the
  // check stays cheap for large batches. A sample whose recompute is not finite (its inputs are
  // not) is skipped; with none left there is no check (-1).
  const DType t = storage_type(spec_.precision);
  const size_t es = dtype_size(t);
  const Dims X = spec_.x, Y = spec_.y;
  const int C = X.c, K = ds_.kernel, st = ds_.stride, ph = ds_.pad, pw = ds_.pw();
  if (Y.numel() == 0) return 0;
  const std::vector<float> w = download(buf_.w, size_t(C) * K * K, t);
  const std::vector<float> b =
      buf_.bias ? download(buf_.bias, size_t(C), t) : std::vector<float>(size_t(C), 0.0f);
  const char* xb = static_cast<const char*>(buf_.x);
  const char* yb = static_cast<const char*>(buf_.y);
  uint64_t state = seed;
  double num = 0, den = 0;
  int checked = 0;
  for (int i = 0; i < samples; ++i) {
    const SampledOutput o = next_sampled_output(state, Y);  // y.c == C
    const int64_t idx = o.idx;
    const int c = o.k, n = o.n, oh = o.oh, ow = o.ow;
    double acc = b[size_t(c)];
    const int iw0 = ow * st - pw;
    const int lo = std::max(0, iw0), hi = std::min(X.w - 1, iw0 + K - 1);
    for (int dr = 0; dr < K && lo <= hi; ++dr) {
      const int ih = oh * st - ph + dr;
      if (ih < 0 || ih >= X.h) continue;
      // Channel c of pixels lo..hi of row ih: from (lo, c) to (hi, c), every C-th value.
      const int64_t first = ((int64_t(n) * X.h + ih) * X.w + lo) * C + c;
      const std::vector<float> xs = download(xb + size_t(first) * es, size_t(hi - lo) * C + 1, t);
      for (int iw = lo; iw <= hi; ++iw)
        acc += double(xs[size_t(iw - lo) * C]) * w[(size_t(c) * K + dr) * K + (iw - iw0)];
    }
    acc = act_ref(ds_.act, acc);
    if (!std::isfinite(acc)) continue;  // non-finite inputs: nothing to hold the kernel to
    const float got = download(yb + size_t(idx) * es, 1, t)[0];
    if (!std::isfinite(got)) return INFINITY;
    num += (got - acc) * (got - acc);
    den += acc * acc;
    ++checked;
  }
  return checked == 0 ? -1 : std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace cnnbench
