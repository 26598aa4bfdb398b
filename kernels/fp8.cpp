#include "kernels/fp8.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace cnnbench {

uint8_t fp8_encode(float v) {
  return uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

float fp8_decode(uint8_t q) {
  const __half h(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(q), __NV_E4M3));
  return __half2float(h);
}

float fp16_round(float v) {
  return __half2float(__float2half_rn(v));
}

double abs_max(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) {
    if (std::isnan(x)) return NAN;
    m = std::max(m, double(std::fabs(x)));
  }
  return m;
}

float fp8_scale_for(double amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.f;
  const float scale = float(kFp8E4M3Max / amax);
  return std::isfinite(scale) ? scale : 1.f;  // amax below 448 / FLT_MAX
}

namespace {
void check_rows(size_t count, int64_t row_len, size_t rows) {
  if (row_len <= 0 || count % size_t(row_len) != 0 || count / size_t(row_len) != rows)
    throw std::invalid_argument("fp8: " + std::to_string(count) + " values are not " +
                                std::to_string(rows) + " rows of " + std::to_string(row_len));
}

// Each row's max |v| through scale_for.
std::vector<float> row_scales(const std::vector<float>& v, int64_t row_len,
                              float (*scale_for)(double)) {
  if (row_len <= 0 || v.size() % size_t(row_len) != 0)
    throw std::invalid_argument("fp8: rows of " + std::to_string(row_len) + " do not divide " +
                                std::to_string(v.size()) + " values");
  std::vector<float> scales(v.size() / size_t(row_len));
  for (size_t r = 0; r < scales.size(); ++r) {
    double m = 0;
    for (int64_t i = 0; i < row_len; ++i)
      m = std::max(m, double(std::fabs(v[r * size_t(row_len) + size_t(i)])));
    scales[r] = scale_for(m);
  }
  return scales;
}

// Codes of v[i] * scales[i / row_len] (row_len v.size() and one scale: per tensor), and back.
template <typename Q, typename Encode>
std::vector<Q> quantize_with(const std::vector<float>& v, const std::vector<float>& scales,
                             size_t row_len, Encode encode) {
  std::vector<Q> q(v.size());
  for (size_t i = 0; i < v.size(); ++i) q[i] = encode(v[i] * scales[i / row_len]);
  return q;
}
template <typename Q, typename Decode>
std::vector<float> dequantize_with(const std::vector<Q>& q, const std::vector<float>& scales,
                                   size_t row_len, Decode decode) {
  std::vector<float> v(q.size());
  for (size_t i = 0; i < q.size(); ++i) v[i] = decode(q[i]) / scales[i / row_len];
  return v;
}
float int8_decode(int8_t q) {
  return float(q);
}
}  // namespace

std::vector<uint8_t> fp8_quantize(const std::vector<float>& v, float scale) {
  return quantize_with<uint8_t>(v, {scale}, std::max<size_t>(v.size(), 1), fp8_encode);
}

std::vector<float> fp8_row_scales(const std::vector<float>& v, int64_t row_len) {
  return row_scales(v, row_len, fp8_scale_for);
}

std::vector<uint8_t> fp8_quantize_rows(const std::vector<float>& v, int64_t row_len,
                                       const std::vector<float>& scales) {
  check_rows(v.size(), row_len, scales.size());
  return quantize_with<uint8_t>(v, scales, size_t(row_len), fp8_encode);
}

std::vector<float> fp8_dequantize(const std::vector<uint8_t>& q, float scale) {
  return dequantize_with(q, {scale}, std::max<size_t>(q.size(), 1), fp8_decode);
}

std::vector<float> fp8_dequantize_rows(const std::vector<uint8_t>& q, int64_t row_len,
                                       const std::vector<float>& scales) {
  check_rows(q.size(), row_len, scales.size());
  return dequantize_with(q, scales, size_t(row_len), fp8_decode);
}

int8_t int8_encode(float v) {
  if (std::isnan(v)) return 0;
  const float r = std::nearbyint(std::clamp(v, -kInt8Max, kInt8Max));  // ties to even
  return int8_t(r);
}

float int8_scale_for(double amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.f;
  const float scale = float(kInt8Max / amax);
  return std::isfinite(scale) ? scale : 1.f;
}

std::vector<int8_t> int8_quantize(const std::vector<float>& v, float scale) {
  return quantize_with<int8_t>(v, {scale}, std::max<size_t>(v.size(), 1), int8_encode);
}

std::vector<float> int8_row_scales(const std::vector<float>& v, int64_t row_len) {
  return row_scales(v, row_len, int8_scale_for);
}

std::vector<int8_t> int8_quantize_rows(const std::vector<float>& v, int64_t row_len,
                                       const std::vector<float>& scales) {
  check_rows(v.size(), row_len, scales.size());
  return quantize_with<int8_t>(v, scales, size_t(row_len), int8_encode);
}

std::vector<float> int8_dequantize(const std::vector<int8_t>& q, float scale) {
  return dequantize_with(q, {scale}, std::max<size_t>(q.size(), 1), int8_decode);
}

std::vector<float> int8_dequantize_rows(const std::vector<int8_t>& q, int64_t row_len,
                                        const std::vector<float>& scales) {
  check_rows(q.size(), row_len, scales.size());
  return dequantize_with(q, scales, size_t(row_len), int8_decode);
}

}  // namespace cnnbench
