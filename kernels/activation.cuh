#pragma once
// The activations as the kernels apply them, in float (act_ref in kernels/pointwise.h is the host
// reference in double), shared by the pointwise and depthwise kernels.
#include "kernels/pointwise.h"

namespace cnnbench {

// sigmoid(v) = 1 / (1 + 2^(-v log2 e)) from two multi-function-unit instructions (ex2.approx,
// rcp.approx), about 10 fewer than expf and an IEEE division (__expf's construction). Relative
// error: the rounding of v log2 e alone gives up to about 2.3e-7 for |v| < 5 and 9e-7 near
// |v| = 20, the two approximations a few units in the last place more; far below fp16's and
// bf16's storage, and inside the fp32 tests' 1e-5. 2^t below the normal range flushes to 0
// (sigmoid 1), and 1 / inf is 0 (sigmoid 0), so both tails come out as their limits. activate's
// SiLU and sigmoid take it on the device (the pointwise, depthwise and stem kernels, the fused
// BatchNorm kernels, whose SiLU backward expf had made issue-bound: NOTES.md, "Issue 9's training
// kernels"), and the unfused SiLU backward; the squeeze-excitation and detection kernels keep
// their own expf.
__device__ __forceinline__ float sigmoid_mufu(float v) {
  float e, s;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v * -1.44269504088896341f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(1.0f + e));
  return s;
}

// On the device SiLU and sigmoid through sigmoid_mufu; on the host (kernels' thread code run as
// tests) with expf.
__host__ __device__ __forceinline__ float activate(Act a, float v) {
  switch (a) {
    case Act::ReLU:
      return fmaxf(v, 0.0f);
    case Act::SiLU:
#ifdef __CUDA_ARCH__
      return v * sigmoid_mufu(v);
#else
      return v / (1.0f + expf(-v));
#endif
    case Act::Sigmoid:
#ifdef __CUDA_ARCH__
      return sigmoid_mufu(v);
#else
      return 1.0f / (1.0f + expf(-v));
#endif
    default:
      return v;
  }
}

}  // namespace cnnbench
