#pragma once
// The activations as the kernels apply them, in float (act_ref in kernels/pointwise.h is the host
// reference in double), shared by the pointwise and depthwise kernels.
#include "kernels/pointwise.h"

namespace cnnbench {

__host__ __device__ __forceinline__ float activate(Act a, float v) {
  switch (a) {
    case Act::ReLU:
      return fmaxf(v, 0.0f);
    case Act::SiLU:
      return v / (1.0f + expf(-v));
    case Act::Sigmoid:
      return 1.0f / (1.0f + expf(-v));
    default:
      return v;
  }
}

}  // namespace cnnbench
