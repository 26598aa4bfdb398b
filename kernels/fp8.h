// FP8 (E4M3) on the host: the encoding Hopper's tensor cores read (1 sign, 4 exponent bits of
// bias 7, 3 mantissa bits; largest finite 448, smallest subnormal 2^-9, no infinities), per-tensor
// and per-channel scales from an absolute maximum, and the emulation the FP8 probe checks the
// device against (kernels/fp8_conv.h). Issue 9's opt-in precision; never presented as fp16.
#pragma once

#include <cstdint>
#include <vector>

namespace cnnbench {

constexpr float kFp8E4M3Max = 448.f;

// Round to nearest even, saturating to +-448 (CUDA's __NV_SATFINITE); NaN stays NaN.
uint8_t fp8_encode(float v);
float fp8_decode(uint8_t q);
// The value fp8 storage gives back for v: fp8_decode(fp8_encode(v)).
inline float fp8_round(float v) {
  return fp8_decode(fp8_encode(v));
}
// The value fp16 storage gives back for v (round to nearest even).
float fp16_round(float v);

// The largest |v|; NaN where any value is NaN.
double abs_max(const std::vector<float>& v);
// The scale that maps amax onto E4M3's largest finite value: 448 / amax, and 1 where amax is 0
// (an all-zero tensor) or not finite.
float fp8_scale_for(double amax);

// q[i] = fp8_encode(v[i] * scale).
std::vector<uint8_t> fp8_quantize(const std::vector<float>& v, float scale);
// Rows of `row_len` values (KRSC weights: one row per output channel), each with its own scale:
// scales[r] = fp8_scale_for(max |row r|).
std::vector<float> fp8_row_scales(const std::vector<float>& v, int64_t row_len);
std::vector<uint8_t> fp8_quantize_rows(const std::vector<float>& v, int64_t row_len,
                                       const std::vector<float>& scales);
// What the quantized values stand for: fp8_decode(q[i]) / scale (per row where scales has one
// entry per row of row_len).
std::vector<float> fp8_dequantize(const std::vector<uint8_t>& q, float scale);
std::vector<float> fp8_dequantize_rows(const std::vector<uint8_t>& q, int64_t row_len,
                                       const std::vector<float>& scales);

// INT8, the other opt-in precision of issue 9: symmetric codes -127..127 (-128 unused), a scale
// per tensor (activations) or per output channel (weights) of 127 / amax, products summed exactly
// in int32 by the device.
constexpr float kInt8Max = 127.f;
// Round to nearest even, saturating to +-127; NaN gives 0.
int8_t int8_encode(float v);
// 127 / amax, and 1 where amax is 0 or not finite.
float int8_scale_for(double amax);
std::vector<int8_t> int8_quantize(const std::vector<float>& v, float scale);
std::vector<float> int8_row_scales(const std::vector<float>& v, int64_t row_len);
std::vector<int8_t> int8_quantize_rows(const std::vector<float>& v, int64_t row_len,
                                       const std::vector<float>& scales);
std::vector<float> int8_dequantize(const std::vector<int8_t>& q, float scale);
std::vector<float> int8_dequantize_rows(const std::vector<int8_t>& q, int64_t row_len,
                                        const std::vector<float>& scales);

}  // namespace cnnbench
