#include "kernels/storage.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness/check.h"

namespace cnnbench {

std::vector<uint8_t> to_storage(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  if (t == DType::F32) {
    std::memcpy(out.data(), v.data(), out.size());
  } else if (t == DType::F16) {
    for (size_t i = 0; i < v.size(); ++i) {
      const __half h = __float2half_rn(v[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  } else {
    for (size_t i = 0; i < v.size(); ++i) {
      const __nv_bfloat16 h = __float2bfloat16_rn(v[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  }
  return out;
}

std::vector<float> from_storage(const std::vector<uint8_t>& bytes, DType t) {
  std::vector<float> out(bytes.size() / dtype_size(t));
  if (t == DType::F32) {
    std::memcpy(out.data(), bytes.data(), bytes.size());
  } else if (t == DType::F16) {
    for (size_t i = 0; i < out.size(); ++i) {
      __half h;
      std::memcpy(&h, &bytes[2 * i], 2);
      out[i] = __half2float(h);
    }
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      __nv_bfloat16 h;
      std::memcpy(&h, &bytes[2 * i], 2);
      out[i] = __bfloat162float(h);
    }
  }
  return out;
}

std::vector<float> download(const void* p, size_t count, DType t) {
  std::vector<uint8_t> bytes(count * dtype_size(t));
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  CNN_CHECK_CUDA(cudaMemcpy(bytes.data(), p, bytes.size(), cudaMemcpyDeviceToHost));
  return from_storage(bytes, t);
}

std::vector<float> nchw_to_nhwc(const std::vector<float>& nchw, const Dims& d) {
  std::vector<float> nhwc(nchw.size());
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w)
          nhwc[((size_t(n) * d.h + h) * d.w + w) * d.c + c] =
              nchw[((size_t(n) * d.c + c) * d.h + h) * d.w + w];
  return nhwc;
}

std::vector<float> nhwc_to_nchw(const std::vector<float>& nhwc, const Dims& d) {
  std::vector<float> nchw(nhwc.size());
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w)
          nchw[((size_t(n) * d.c + c) * d.h + h) * d.w + w] =
              nhwc[((size_t(n) * d.h + h) * d.w + w) * d.c + c];
  return nchw;
}

void upload_nchw_as_nhwc(void* dst, const std::vector<float>& nchw, const Dims& d, DType t) {
  if (int64_t(nchw.size()) != d.numel())
    throw UserError("input has " + std::to_string(nchw.size()) + " values but " + d.str() +
                    " needs " + std::to_string(d.numel()));
  const std::vector<uint8_t> bytes = to_storage(nchw_to_nhwc(nchw, d), t);
  CNN_CHECK_CUDA(cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}

bool replay_matches(const std::vector<float>& replayed, const std::vector<float>& direct,
                    double tol) {
  if (replayed.size() != direct.size()) return false;
  std::vector<float> a, b;
  for (size_t i = 0; i < direct.size(); ++i) {
    const bool fa = std::isfinite(direct[i]), fb = std::isfinite(replayed[i]);
    if (fa != fb) return false;
    if (fa) a.push_back(direct[i]), b.push_back(replayed[i]);
  }
  return a.empty() || relative_l2(b, a) <= tol;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace cnnbench
