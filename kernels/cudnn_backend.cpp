#include "kernels/cudnn_backend.h"

#include <algorithm>
#include <utility>

#include "harness/check.h"

namespace cnnbench {

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
  }
  return CUDNN_DATA_FLOAT;
}

BackendDesc::BackendDesc(cudnnBackendDescriptorType_t type) {
  CNN_CHECK_CUDNN(cudnnBackendCreateDescriptor(type, &d_));
}

BackendDesc& BackendDesc::operator=(BackendDesc&& o) noexcept {
  if (this != &o) {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

BackendDesc::~BackendDesc() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

BackendDesc& BackendDesc::set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t,
                              int64_t count, const void* values) {
  CNN_CHECK_CUDNN(cudnnBackendSetAttribute(d_, a, t, count, values));
  return *this;
}

BackendDesc& BackendDesc::set_i64(cudnnBackendAttributeName_t a, std::vector<int64_t> v) {
  return set(a, CUDNN_TYPE_INT64, int64_t(v.size()), v.data());
}

BackendDesc& BackendDesc::set_desc(cudnnBackendAttributeName_t a, const BackendDesc& d) {
  cudnnBackendDescriptor_t raw = d.get();
  return set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

BackendDesc& BackendDesc::set_descs(cudnnBackendAttributeName_t a,
                                    const std::vector<const BackendDesc*>& ds) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const BackendDesc* d : ds) raw.push_back(d->get());
  return set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()), raw.data());
}

BackendDesc& BackendDesc::set_handle(cudnnBackendAttributeName_t a, cudnnHandle_t h) {
  return set(a, CUDNN_TYPE_HANDLE, 1, &h);
}

BackendDesc& BackendDesc::finalize() {
  CNN_CHECK_CUDNN(cudnnBackendFinalize(d_));
  return *this;
}

bool BackendDesc::try_finalize(std::string* why) {
  const cudnnStatus_t s = cudnnBackendFinalize(d_);
  if (s == CUDNN_STATUS_SUCCESS) return true;
  if (why) {
    char detail[512] = {0};
    cudnnGetLastErrorString(detail, sizeof(detail));
    *why = std::string(cudnnGetErrorString(s)) + (detail[0] ? std::string(": ") + detail : "");
  }
  return false;
}

int64_t BackendDesc::get_i64(cudnnBackendAttributeName_t a) const {
  int64_t v = 0, count = 0;
  CNN_CHECK_CUDNN(cudnnBackendGetAttribute(d_, a, CUDNN_TYPE_INT64, 1, &count, &v));
  return v;
}

namespace {
BackendDesc tensor(int64_t uid, cudnnDataType_t dt, std::vector<int64_t> dims,
                   std::vector<int64_t> strides, bool is_virtual, int64_t alignment = 16) {
  BackendDesc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt)
      .set_i64(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
      .set_i64(CUDNN_ATTR_TENSOR_STRIDES, strides)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  t.finalize();
  return t;
}
}  // namespace

BackendDesc make_tensor(int64_t uid, DType type, const Dims& d, bool is_virtual, int ld,
                        int alignment) {
  const int64_t n = d.n, c = d.c, h = d.h, w = d.w, l = ld > 0 ? ld : d.c;
  return tensor(uid, cudnn_type(type), {n, c, h, w}, {h * w * l, 1, w * l, l}, is_virtual,
                alignment);
}

BackendDesc make_tensor_of(int64_t uid, cudnnDataType_t type, const Dims& d, bool is_virtual) {
  const int64_t n = d.n, c = d.c, h = d.h, w = d.w;
  return tensor(uid, type, {n, c, h, w}, {h * w * c, 1, w * c, c}, is_virtual);
}

int pointer_alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 1 && v % uintptr_t(a)) a /= 2;
  return a;
}

BackendDesc make_pointwise_desc(cudnnPointwiseMode_t mode) {
  BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
  pw.finalize();
  return pw;
}

BackendDesc make_pointwise_op(const BackendDesc& pw, const BackendDesc& x, const BackendDesc* b,
                              const BackendDesc& y) {
  BackendDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  op.finalize();
  return op;
}

BackendDesc make_conv_descriptor(int64_t stride, int64_t pad_h, int64_t pad_w, int64_t dilation,
                                 cudnnDataType_t compute) {
  BackendDesc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t comp = compute;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set_i64(CUDNN_ATTR_CONVOLUTION_DILATIONS, {dilation, dilation})
      .set_i64(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {stride, stride})
      .set_i64(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {pad_h, pad_w})
      .set_i64(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {pad_h, pad_w});
  conv.finalize();
  return conv;
}

BackendDesc make_channel_tensor(int64_t uid, DType type, int channels) {
  return make_channel_tensor_of(uid, cudnn_type(type), channels);
}

BackendDesc make_channel_tensor_of(int64_t uid, cudnnDataType_t type, int channels) {
  const int64_t c = channels;
  return tensor(uid, type, {1, c, 1, 1}, {c, 1, c, c}, false);
}

bool EngineInfo::has_numerical(int note) const {
  return std::find(numerical_notes.begin(), numerical_notes.end(), note) != numerical_notes.end();
}

bool EngineInfo::has_behavior(int note) const {
  return std::find(behavior_notes.begin(), behavior_notes.end(), note) != behavior_notes.end();
}

std::string EngineInfo::tag() const {
  std::string s = "eng" + std::to_string(global_index) + "{";
  for (size_t i = 0; i < knobs.size(); ++i)
    s += (i ? "," : "") + std::string("k") + std::to_string(knobs[i].first) + "=" +
         std::to_string(knobs[i].second);
  s += "}";
  if (has_behavior(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) s += "+rtc";
  return s;
}

std::string EngineInfo::notes() const {
  static const char* numerical[] = {"tensor_core",       "down_convert_inputs",
                                    "reduced_precision", "fft",
                                    "nondeterministic",  "winograd",
                                    "winograd_4x4",      "winograd_6x6",
                                    "winograd_13x13",    "strict_nan_prop"};
  static const char* behavior[] = {"runtime_compilation", "filter_int8x32_reorder",
                                   "bias_int8x32_reorder", "cuda_graph_native_api",
                                   "cublaslt_dependency"};
  std::string s;
  auto add = [&](const std::string& w) { s += (s.empty() ? "" : ",") + w; };
  for (int n : numerical_notes)
    add(n >= 0 && n < 10 ? numerical[n] : "numerical_" + std::to_string(n));
  for (int n : behavior_notes) add(n >= 0 && n < 5 ? behavior[n] : "behavior_" + std::to_string(n));
  return s;
}

EngineInfo engine_info(const BackendDesc& cfg) {
  EngineInfo info;
  BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t count = 0;
  CNN_CHECK_CUDNN(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw));
  info.global_index = engine.get_i64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX);

  auto notes = [&](cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type) {
    int32_t values[32];  // numerical and behavior notes are 32-bit enums
    int64_t n = 0;
    std::vector<int> out;
    if (cudnnBackendGetAttribute(engine.get(), attr, type, 32, &n, values) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < n; ++i) out.push_back(values[i]);
    return out;
  };
  info.numerical_notes = notes(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE);
  info.behavior_notes = notes(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE);

  constexpr int kMaxKnobs = 32;
  std::vector<BackendDesc> choices;
  std::vector<cudnnBackendDescriptor_t> raws;
  for (int i = 0; i < kMaxKnobs; ++i) {
    choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    raws.push_back(choices.back().get());
  }
  int64_t nknobs = 0;
  CNN_CHECK_CUDNN(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxKnobs, &nknobs,
                                           raws.data()));
  for (int64_t i = 0; i < nknobs; ++i) {
    int32_t type = 0;
    int64_t value = 0, n = 0;
    CNN_CHECK_CUDNN(cudnnBackendGetAttribute(raws[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                             CUDNN_TYPE_KNOB_TYPE, 1, &n, &type));
    CNN_CHECK_CUDNN(cudnnBackendGetAttribute(raws[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                             CUDNN_TYPE_INT64, 1, &n, &value));
    info.knobs.push_back({type, value});
  }
  return info;
}

std::vector<BackendDesc> heuristic_configs(const BackendDesc& op_graph,
                                           cudnnBackendHeurMode_t mode) {
  BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, op_graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  std::vector<BackendDesc> out;
  if (!heur.try_finalize()) return out;
  int64_t count = 0;
  CNN_CHECK_CUDNN(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<cudnnBackendDescriptor_t> raws;
  for (int64_t i = 0; i < count; ++i) {
    out.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raws.push_back(out.back().get());
  }
  int64_t got = 0;
  if (count > 0)
    CNN_CHECK_CUDNN(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                             raws.data()));
  out.resize(size_t(got));
  return out;
}

std::vector<RankedConfig> ranked_configs(const BackendDesc& op_graph, bool with_mode_b, bool once) {
  std::vector<RankedConfig> out;
  std::vector<std::string> tags;
  const std::pair<cudnnBackendHeurMode_t, const char*> lists[] = {
      {CUDNN_HEUR_MODE_A, "A"}, {CUDNN_HEUR_MODE_B, "B"}, {CUDNN_HEUR_MODE_FALLBACK, "fallback"}};
  for (const auto& [mode, source] : lists) {
    if (mode == CUDNN_HEUR_MODE_B && !with_mode_b) continue;
    if (!once) tags.clear();  // each list on its own
    for (BackendDesc& cfg : heuristic_configs(op_graph, mode)) {
      EngineInfo info = engine_info(cfg);
      std::string tag = info.tag();
      if (std::find(tags.begin(), tags.end(), tag) != tags.end()) continue;
      tags.push_back(std::move(tag));
      out.push_back({std::move(cfg), std::move(info), source});
    }
  }
  return out;
}

BackendDesc try_plan(cudnnHandle_t handle, const BackendDesc& engine_config, std::string* why) {
  BackendDesc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan.set_handle(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle)
      .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, engine_config);
  if (!plan.try_finalize(why)) return BackendDesc();
  return plan;
}

cudnnStatus_t execute_on(cudnnHandle_t handle, const BackendDesc& plan, const BackendDesc& pack,
                         cudaStream_t stream) {
  cudaStream_t bound = nullptr;
  CNN_CHECK_CUDNN(cudnnGetStream(handle, &bound));
  if (bound != stream) CNN_CHECK_CUDNN(cudnnSetStream(handle, stream));
  const cudnnStatus_t s = cudnnBackendExecute(handle, plan.get(), pack.get());
  if (bound != stream) CNN_CHECK_CUDNN(cudnnSetStream(handle, bound));
  return s;
}

}  // namespace cnnbench
