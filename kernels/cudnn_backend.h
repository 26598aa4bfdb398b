// Thin RAII wrappers over the cuDNN backend (graph) API, and the few builders our ops need:
// tensors, a convolution, pointwise ops, an operation graph, heuristics and execution plans.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace cnnbench {

cudnnDataType_t cudnn_type(DType t);

// One backend descriptor, destroyed with its owner.
class BackendDesc {
 public:
  BackendDesc() = default;
  explicit BackendDesc(cudnnBackendDescriptorType_t type);
  BackendDesc(BackendDesc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  BackendDesc& operator=(BackendDesc&& o) noexcept;
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  ~BackendDesc();

  cudnnBackendDescriptor_t get() const { return d_; }

  BackendDesc& set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t count,
                   const void* values);
  BackendDesc& set_i64(cudnnBackendAttributeName_t a, std::vector<int64_t> v);
  BackendDesc& set_desc(cudnnBackendAttributeName_t a, const BackendDesc& d);
  BackendDesc& set_descs(cudnnBackendAttributeName_t a, const std::vector<const BackendDesc*>& ds);
  BackendDesc& set_handle(cudnnBackendAttributeName_t a, cudnnHandle_t h);
  BackendDesc& finalize();
  // Finalize that reports failure instead of throwing (a plan an engine cannot build).
  bool try_finalize(std::string* why = nullptr);

  int64_t get_i64(cudnnBackendAttributeName_t a) const;

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A tensor in NHWC storage with logical dims N, C, H, W (filters: K, C, R, S stored KRSC). With
// ld > C, rows of C channels every ld elements: a channel slice of a wider (concat) buffer, whose
// pointer is aligned to `alignment` bytes.
BackendDesc make_tensor(int64_t uid, DType type, const Dims& dims, bool is_virtual = false,
                        int ld = 0, int alignment = 16);
// The largest power of two up to 16 that divides the address.
int pointer_alignment(const void* p);
// The same, packed, in any cuDNN data type (FP8's, which no Precision stores: kernels/fp8_conv.h).
BackendDesc make_tensor_of(int64_t uid, cudnnDataType_t type, const Dims& dims,
                           bool is_virtual = false);
// A per-channel [1, C, 1, 1] tensor, e.g. a bias (channels = 1: one scalar for the whole tensor).
BackendDesc make_channel_tensor(int64_t uid, DType type, int channels);
BackendDesc make_channel_tensor_of(int64_t uid, cudnnDataType_t type, int channels);
// A finalized pointwise descriptor computing in float, and an operation applying it: y = op(x)
// or y = op(x, b).
BackendDesc make_pointwise_desc(cudnnPointwiseMode_t mode);
BackendDesc make_pointwise_op(const BackendDesc& pw, const BackendDesc& x, const BackendDesc* b,
                              const BackendDesc& y);
// A finalized 2-D cross-correlation descriptor computing in float, for the forward and both
// backward operations alike.
BackendDesc make_conv_descriptor(int64_t stride, int64_t pad_h, int64_t pad_w, int64_t dilation,
                                 cudnnDataType_t compute = CUDNN_DATA_FLOAT);

// What an engine config is: its global index, knobs and notes.
struct EngineInfo {
  int64_t global_index = -1;
  std::vector<std::pair<int, int64_t>> knobs;  // (knob type, value)
  std::vector<int> numerical_notes, behavior_notes;
  bool has_numerical(int note) const;
  bool has_behavior(int note) const;
  std::string tag() const;    // "eng12{k2=1,k3=0}", with "+rtc" where compiled at run time
  std::string notes() const;  // "tensor_core,runtime_compilation,...": every note, by name
};
EngineInfo engine_info(const BackendDesc& engine_config);

// Engine configs for an operation graph from one heuristics mode, best first. Empty when the
// mode offers none.
std::vector<BackendDesc> heuristic_configs(const BackendDesc& op_graph,
                                           cudnnBackendHeurMode_t mode);

// One engine config, what it is, and which heuristics list offered it: "A", "B" or "fallback".
struct RankedConfig {
  BackendDesc config;
  EngineInfo engine;
  const char* source = "A";
};
// Heuristics' configs for an operation graph in the order autotune takes them: mode A's, then
// (with_mode_b) mode B's, then the fallback list's. Each tag appears once (its first list) where
// `once`; otherwise once per list, so that B's own ranking survives for tags A lists too and the
// caller skips what it has already taken (engine_candidates). Mode B ranks with a slower, more
// accurate model (cuDNN's CUDNN_HEUR_MODE_B).
std::vector<RankedConfig> ranked_configs(const BackendDesc& op_graph, bool with_mode_b,
                                         bool once = true);

// An execution plan for one engine config, or an empty descriptor if it does not build.
BackendDesc try_plan(cudnnHandle_t handle, const BackendDesc& engine_config, std::string* why);

// cudnnBackendExecute on `stream`: the handle is bound to `stream` for the call where it is bound
// to another (a training step captured on a stream of its own: work on the handle's stream would
// run at capture time and be missing from the graph), then bound back. Returns cuDNN's status.
cudnnStatus_t execute_on(cudnnHandle_t handle, const BackendDesc& plan, const BackendDesc& pack,
                         cudaStream_t stream);

}  // namespace cnnbench
