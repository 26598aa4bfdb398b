// Element types, precisions and NHWC activation shapes shared by every op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cnnbench {

// A benchmark precision: the storage type of weights and activations plus the math mode.
//   fp32: float storage, float math, TF32 off.   tf32: float storage, TF32 tensor-core math.
//   fp16 / bf16: half / bfloat16 storage, float accumulation.
enum class Precision { FP32, TF32, FP16, BF16 };
enum class DType { F32, F16, BF16 };

Precision parse_precision(const std::string& name);  // UserError on an unknown name
const char* precision_name(Precision p);
DType storage_type(Precision p);
size_t dtype_size(DType t);
const char* dtype_name(DType t);

// Logical N, C, H, W; every activation is stored NHWC (channels innermost).
struct Dims {
  int n = 0, c = 0, h = 0, w = 0;
  int64_t numel() const { return int64_t(n) * c * h * w; }
  std::string str() const;  // "NxCxHxW"
};

// d with its batch set to n (graph nodes hold one image's dims).
inline Dims batched(Dims d, int n) {
  d.n = n;
  return d;
}

}  // namespace cnnbench
