// NVTX ranges in a domain of our own ("cnnbench"), so a profiler can keep ours apart from the
// libraries': `ncu --nvtx --nvtx-include "cnnbench@layer3.0.conv2/"`,
// `nsys profile --nvtx-domain-include=cnnbench`. Ranges: one per timed iteration ("iteration
// (graph replays)" / "iteration (eager)"), one per profiled forward ("profile"), and, in eager
// forwards, one per layer named by its parameter path ("layer3.0.conv2").
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace cnnbench {

inline nvtxDomainHandle_t nvtx_domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("cnnbench");
  return d;
}

inline void nvtx_push(const char* name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  nvtxDomainRangePushEx(nvtx_domain(), &a);
}

inline void nvtx_pop() {
  nvtxDomainRangePop(nvtx_domain());
}

}  // namespace cnnbench
