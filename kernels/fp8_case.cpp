#include "kernels/fp8_case.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "kernels/fp8.h"

namespace cnnbench {

const char* fp8_variant_name(Fp8Variant v) {
  switch (v) {
    case Fp8Variant::Fp16:
      return "fp16";
    case Fp8Variant::Fp8Sample:
      return "fp8_sample";
    case Fp8Variant::Fp8ToFp16:
      return "fp8_to_fp16";
    case Fp8Variant::Fp8ToFp16PerChannel:
      return "fp8_to_fp16_per_channel";
    case Fp8Variant::Fp8ToFp8:
      return "fp8_to_fp8";
    case Fp8Variant::Int8ToFp16PerChannel:
      return "int8_to_fp16_per_channel";
    case Fp8Variant::Int8ToInt8PerChannel:
      return "int8_to_int8_per_channel";
    case Fp8Variant::Fp16ToInt8:
      return "fp16_to_int8";
    case Fp8Variant::Fp16Residual:
      return "fp16_residual";
    case Fp8Variant::Int8ToFp16Residual:
      return "int8_to_fp16_residual";
  }
  return "?";
}

std::vector<Fp8Variant> all_fp8_variants() {
  return {Fp8Variant::Fp16,
          Fp8Variant::Fp8Sample,
          Fp8Variant::Fp8ToFp16,
          Fp8Variant::Fp8ToFp16PerChannel,
          Fp8Variant::Fp8ToFp8,
          Fp8Variant::Int8ToFp16PerChannel,
          Fp8Variant::Int8ToInt8PerChannel,
          Fp8Variant::Fp16ToInt8,
          Fp8Variant::Fp16Residual,
          Fp8Variant::Int8ToFp16Residual};
}

bool fp16_inputs(Fp8Variant v) {
  return v == Fp8Variant::Fp16 || v == Fp8Variant::Fp16ToInt8 || v == Fp8Variant::Fp16Residual;
}
bool fp8_inputs(Fp8Variant v) {
  return !fp16_inputs(v) && !int8_inputs(v);
}
bool int8_inputs(Fp8Variant v) {
  return v == Fp8Variant::Int8ToFp16PerChannel || v == Fp8Variant::Int8ToInt8PerChannel ||
         v == Fp8Variant::Int8ToFp16Residual;
}
bool int8_output(Fp8Variant v) {
  return v == Fp8Variant::Int8ToInt8PerChannel || v == Fp8Variant::Fp16ToInt8;
}
float output_scale_for(Fp8Variant v, double amax) {
  if (fp8_output(v)) return fp8_scale_for(amax);
  if (int8_output(v)) return amax > 0 ? float(127.0 / amax) : 1.f;
  return 1.f;
}
int int8_round(float v) {
  if (std::isnan(v)) return 0;
  return int(std::clamp(std::nearbyint(v), -128.f, 127.f));  // the default mode: ties to even
}
bool fp8_output(Fp8Variant v) {
  return v == Fp8Variant::Fp8Sample || v == Fp8Variant::Fp8ToFp8;
}
bool has_epilogue(Fp8Variant v) {
  return v != Fp8Variant::Fp8Sample;
}
bool has_residual(Fp8Variant v) {
  return v == Fp8Variant::Fp16Residual || v == Fp8Variant::Int8ToFp16Residual;
}

float residual_value(uint64_t seed, int64_t i) {
  // splitmix64 of (seed, i), two uniforms, Box-Muller.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const uint64_t h = mix(seed * 0x2545f4914f6cdd1dull ^ mix(uint64_t(i)));
  const double u1 = (double(h >> 40) + 1.0) / 16777217.0;  // (0, 1]
  const double u2 = double(h & 0xffffff) / 16777216.0;
  const double n = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  return fp16_round(float(std::max(0.0, n)));
}

namespace {
std::vector<float> rounded16(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = fp16_round(v[i]);
  return out;
}
}  // namespace

Fp8CaseData make_fp8_case(const Fp8Case& c, uint64_t seed, int samples) {
  const ConvGeometry& g = c.g;
  if (g.groups != 1 || g.x.c % 16 || g.y.c % 16)
    throw std::invalid_argument("fp8 probe: " + c.name +
                                ": needs groups 1 and channels in "
                                "multiples of 16 (x " +
                                std::to_string(g.x.c) + ", y " + std::to_string(g.y.c) + ")");
  Fp8CaseData d;
  d.c = c;
  d.seed = seed;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  d.x.resize(size_t(g.x.numel()));
  for (float& v : d.x) v = std::max(0.f, normal(rng));
  const int64_t row = int64_t(g.kernel_h) * g.kernel_w * g.x.c;
  const float he = std::sqrt(2.f / float(row));
  d.w.resize(size_t(row) * size_t(g.y.c));
  for (float& v : d.w) v = he * normal(rng);
  d.bias.resize(size_t(g.y.c));
  for (float& v : d.bias) v = 0.1f * normal(rng);

  d.x16 = rounded16(d.x);
  d.w16 = rounded16(d.w);
  d.x_scale = fp8_scale_for(abs_max(d.x));
  d.w_scale = fp8_scale_for(abs_max(d.w));
  d.w_scales = fp8_row_scales(d.w, row);
  d.xq = fp8_quantize(d.x, d.x_scale);
  d.wq = fp8_quantize(d.w, d.w_scale);
  d.wq_rows = fp8_quantize_rows(d.w, row, d.w_scales);
  d.x_dq = fp8_dequantize(d.xq, d.x_scale);
  d.w_dq = fp8_dequantize(d.wq, d.w_scale);
  d.w_dq_rows = fp8_dequantize_rows(d.wq_rows, row, d.w_scales);
  d.x_scale_i8 = int8_scale_for(abs_max(d.x));
  d.w_scales_i8 = int8_row_scales(d.w, row);
  d.xi8 = int8_quantize(d.x, d.x_scale_i8);
  d.wi8_rows = int8_quantize_rows(d.w, row, d.w_scales_i8);
  d.x_dq_i8 = int8_dequantize(d.xi8, d.x_scale_i8);
  d.w_dq_rows_i8 = int8_dequantize_rows(d.wi8_rows, row, d.w_scales_i8);

  const int64_t total = g.y.numel();
  for (int i = 0; i < samples; ++i) {
    Fp8Sample s;
    s.index = int64_t(rng() % uint64_t(total));
    int64_t r = s.index;
    s.k = int(r % g.y.c), r /= g.y.c;
    s.ow = int(r % g.y.w), r /= g.y.w;
    s.oh = int(r % g.y.h), s.n = int(r / g.y.h);
    d.samples.push_back(s);
    d.exact_conv.push_back(conv_window(g, d.x.data(), d.w.data(), s.n, s.k, s.oh, s.ow));
  }
  return d;
}

std::vector<double> fp8_exact(const Fp8CaseData& d, Fp8Variant v) {
  std::vector<double> out(d.samples.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = has_epilogue(v)
                 ? std::max(0.0, d.exact_conv[i] + d.bias[size_t(d.samples[i].k)] +
                                     (has_residual(v) ? residual_value(d.seed, d.samples[i].index)
                                                      : 0.0))
                 : d.exact_conv[i];
  return out;
}

std::vector<double> fp8_emulated(const Fp8CaseData& d, Fp8Variant v, float y_scale) {
  // INT8's int32 sums are exact; the double conv of the dequantized codes is the same sum times
  // the two scales' inverses.
  const std::vector<float>& x = int8_inputs(v) ? d.x_dq_i8 : fp8_inputs(v) ? d.x_dq : d.x16;
  const std::vector<float>& w =
      fp16_inputs(v)                                                        ? d.w16
      : int8_inputs(v)                                                      ? d.w_dq_rows_i8
      : (v == Fp8Variant::Fp8ToFp16PerChannel || v == Fp8Variant::Fp8ToFp8) ? d.w_dq_rows
                                                                            : d.w_dq;
  std::vector<double> out(d.samples.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const Fp8Sample& s = d.samples[i];
    double y = conv_window(d.c.g, x.data(), w.data(), s.n, s.k, s.oh, s.ow);
    if (has_epilogue(v)) {
      // fp16's bias is stored in fp16 as the network's; the fp8 and int8 graphs' in float. The
      // residual, where there is one, is fp16 in every form.
      const float b = d.bias[size_t(s.k)];
      const bool half_bias = v == Fp8Variant::Fp16 || v == Fp8Variant::Fp16Residual;
      y += half_bias ? fp16_round(b) : b;
      if (has_residual(v)) y += residual_value(d.seed, s.index);
      y = std::max(0.0, y);
    }
    out[i] = fp8_output(v)    ? double(fp8_round(float(y) * y_scale)) / y_scale
             : int8_output(v) ? double(int8_round(float(y) * y_scale)) / y_scale
                              : double(fp16_round(float(y)));
  }
  return out;
}

double relative_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) throw std::invalid_argument("relative_l2: sizes differ");
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace cnnbench
