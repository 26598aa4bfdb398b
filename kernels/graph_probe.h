// One cuDNN operation graph probed the way the FP8 and BatchNorm-fusion probes need: every engine
// config heuristics offer (ranked_configs: A, B, fallback) tried, those that build (up to a limit)
// timed with CUDA events, the fastest run once more for its output. For questions of the form
// "does cuDNN build this fused graph here, and how fast is it", asked before a network uses it.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cudnn_backend.h"
#include "kernels/op.h"

namespace cnnbench {

// A graph under construction: the descriptors it refers to, kept alive at stable addresses, and
// the real tensors' uids, which the variant pack names.
struct ProbeGraph {
  std::deque<BackendDesc> keep;
  std::vector<BackendDesc> ops;
  std::vector<int64_t> uids;
  BackendDesc graph;
  const BackendDesc* hold(BackendDesc d) {
    keep.push_back(std::move(d));
    return &keep.back();
  }
  const BackendDesc* real(int64_t uid, BackendDesc tensor) {
    uids.push_back(uid);
    return hold(std::move(tensor));
  }
  // y = mode(x[, b]), computing in float.
  void pointwise(cudnnPointwiseMode_t mode, const BackendDesc& x, const BackendDesc* b,
                 const BackendDesc& y);
  // Finalizes the operation graph over ops; false (and why) where cuDNN refuses it.
  bool finalize(cudnnHandle_t handle, std::string* why);
};

struct ProbeEngine {
  std::string tag, notes;
  size_t workspace = 0;
  double us = -1;  // median of five timed groups of launches; negative where a launch failed
};

class GraphProbe {
 public:
  // Builds plans for the finalized graph g: every config ranked_configs offers is counted, at most
  // max_engines that build with a workspace up to max_workspace are kept.
  GraphProbe(GpuContext& ctx, const ProbeGraph& g, int max_engines,
             size_t max_workspace = size_t(1) << 30);
  int configs() const { return configs_; }
  const std::vector<std::string>& refusals() const { return refusals_; }  // the first four
  bool built() const { return !plans_.empty(); }
  size_t workspace_bytes() const;
  // The variant pack: a device pointer for each of g's real uids, and a workspace of at least
  // workspace_bytes(). Throws where a uid has no pointer.
  void bind(const std::map<int64_t, void*>& ptrs, void* workspace);
  bool run_first();  // the plans in order until one runs, once (delayed scaling's first run)
  // Each plan: two warm-up runs, then five groups of `launches` runs; fastest first.
  std::vector<ProbeEngine> time_all(int launches);
  bool run_fastest();  // after time_all: the fastest plan, once

 private:
  struct Plan {
    BackendDesc plan;
    EngineInfo engine;
    size_t workspace = 0;
  };
  bool run(const Plan& p);
  GpuContext& ctx_;
  const ProbeGraph& g_;
  int configs_ = 0;
  std::vector<std::string> refusals_;
  std::vector<Plan> plans_;
  size_t fastest_ = 0;
  BackendDesc pack_;
};

// The first of several forms of one graph that some engine config builds: form i is built by
// build(G, i) for i = 0 .. labels.size() - 1, and labels[i] ("" for none) prefixes its refusals
// and its reason for failing. (The BatchNorm-fusion probe's weight gradient with dW in fp16, then
// fp32; the FP8 probe's INT8 conv with a float, then an int32 output.)
struct ProbedForm {
  std::unique_ptr<ProbeGraph> graph;  // before probe: outlives it
  std::unique_ptr<GraphProbe> probe;  // null where no form built
  size_t form = 0;
  int configs = 0;  // summed over the forms tried
  std::vector<std::string> refusals;
  std::string error;  // where none built: each form's reason, "; "-joined
};
ProbedForm probe_first_form(GpuContext& ctx, const std::vector<std::string>& labels,
                            int max_engines, const std::function<void(ProbeGraph&, size_t)>& build);

// A device allocation freed with its owner.
struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t bytes);
  ~DeviceMem();
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  void upload(const void* src, size_t bytes);
  template <typename T>
  void upload(const std::vector<T>& v) {
    upload(v.data(), v.size() * sizeof(T));
  }
  std::vector<uint8_t> download(size_t bytes) const;
};

}  // namespace cnnbench
