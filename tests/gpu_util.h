// Helpers for the GPU tests: device buffers of a storage type, random data, CPU references.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "harness/check.h"
#include "kernels/storage.h"
#include "networks/compile.h"

namespace cnnbench::test {

// Values as the device holds them: rounded to the storage type and back.
inline std::vector<float> rounded(const std::vector<float>& v, DType t) {
  return from_storage(to_storage(v, t), t);
}

inline std::vector<float> random_vector(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class DeviceBuffer {
 public:
  DeviceBuffer(size_t count, DType t) : count_(count), t_(t) {
    CNN_CHECK_CUDA(cudaMalloc(&p_, std::max<size_t>(count * dtype_size(t), 1)));
    poison();
  }
  DeviceBuffer(const std::vector<float>& v, DType t) : DeviceBuffer(v.size(), t) { upload(v); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  void upload(const std::vector<float>& v) {
    const auto bytes = to_storage(v, t_);
    CNN_CHECK_CUDA(cudaMemcpy(p_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  void poison() { CNN_CHECK_CUDA(cudaMemset(p_, 0xFF, count_ * dtype_size(t_))); }  // NaN
  std::vector<float> download() const {
    std::vector<uint8_t> bytes(count_ * dtype_size(t_));
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    CNN_CHECK_CUDA(cudaMemcpy(bytes.data(), p_, bytes.size(), cudaMemcpyDeviceToHost));
    return from_storage(bytes, t_);
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  size_t count_;
  DType t_;
};

// ||a - b|| / ||b||; infinite when a holds a non-finite value.
inline double rel_l2(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

inline double tolerance(Precision p) {
  switch (p) {
    case Precision::FP32:
      return 1e-5;
    case Precision::TF32:
      return 1e-3;
    default:
      return 1e-2;
  }
}

}  // namespace cnnbench::test
