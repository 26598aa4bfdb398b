#include "kernels/tensor.h"

#include "harness/check.h"

namespace cnnbench {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::FP32;
  if (name == "tf32") return Precision::TF32;
  if (name == "fp16") return Precision::FP16;
  if (name == "bf16") return Precision::BF16;
  throw UserError("unknown precision '" + name + "': valid precisions are fp32, tf32, fp16, bf16");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32:
      return "fp32";
    case Precision::TF32:
      return "tf32";
    case Precision::FP16:
      return "fp16";
    case Precision::BF16:
      return "bf16";
  }
  return "?";
}

DType storage_type(Precision p) {
  switch (p) {
    case Precision::FP16:
      return DType::F16;
    case Precision::BF16:
      return DType::BF16;
    default:
      return DType::F32;
  }
}

size_t dtype_size(DType t) {
  return t == DType::F32 ? 4 : 2;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
  }
  return "?";
}

std::string Dims::str() const {
  return std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
         std::to_string(w);
}

}  // namespace cnnbench
