// Loading and storing our three storage types as float inside kernels (and on the host, where a
// kernel's code is run there for a test).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cnnbench {

__host__ __device__ __forceinline__ float load_f(const float* p, int64_t i) {
  return p[i];
}
__host__ __device__ __forceinline__ float load_f(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
__host__ __device__ __forceinline__ float load_f(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__host__ __device__ __forceinline__ void store_f(float* p, int64_t i, float v) {
  p[i] = v;
}
__host__ __device__ __forceinline__ void store_f(__half* p, int64_t i, float v) {
  p[i] = __float2half_rn(v);
}
__host__ __device__ __forceinline__ void store_f(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

// Calls f.template operator()<T>() with T the CUDA type of t.
#define CNN_DISPATCH_DTYPE(t, ...)    \
  do {                                \
    switch (t) {                      \
      case ::cnnbench::DType::F32: {  \
        using T = float;              \
        __VA_ARGS__;                  \
      } break;                        \
      case ::cnnbench::DType::F16: {  \
        using T = __half;             \
        __VA_ARGS__;                  \
      } break;                        \
      case ::cnnbench::DType::BF16: { \
        using T = __nv_bfloat16;      \
        __VA_ARGS__;                  \
      } break;                        \
    }                                 \
  } while (0)

}  // namespace cnnbench
