// FP8 (E4M3) on the host, and the FP8 probe's data and emulation (kernels/fp8.h, fp8_case.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/fp8.h"
#include "kernels/fp8_case.h"

namespace cnnbench {
namespace {

TEST(Fp8, DecodesTheE4M3Table) {
  // 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 subnormal; S.1111.111 NaN.
  for (int q = 0; q < 256; ++q) {
    const int sign = q >> 7, e = (q >> 3) & 15, m = q & 7;
    const float got = fp8_decode(uint8_t(q));
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(got)) << q;
      continue;
    }
    const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    EXPECT_EQ(double(got), sign ? -mag : mag) << "code " << q;
  }
  EXPECT_EQ(fp8_decode(0x7e), 448.f);
  EXPECT_EQ(fp8_decode(0x01), std::ldexp(1.f, -9));
}

TEST(Fp8, EncodeRoundsToNearestEvenAndSaturates) {
  for (int q = 0; q < 256; ++q) {  // every finite code comes back
    const float v = fp8_decode(uint8_t(q));
    if (std::isnan(v)) continue;
    if (v == 0.f) continue;  // -0 and +0
    EXPECT_EQ(fp8_encode(v), q) << v;
  }
  EXPECT_EQ(fp8_round(1.0625f), 1.0f);   // halfway between 1 (mantissa 0) and 1.125: even
  EXPECT_EQ(fp8_round(1.1875f), 1.25f);  // halfway between 1.125 and 1.25 (mantissa 2): even
  EXPECT_EQ(fp8_round(1.07f), 1.125f);   // past halfway
  EXPECT_EQ(fp8_round(1000.f), 448.f);   // saturating, not NaN
  EXPECT_EQ(fp8_round(-1e9f), -448.f);
  EXPECT_EQ(fp8_round(std::ldexp(1.f, -11)), 0.f);  // below half the smallest subnormal
  EXPECT_TRUE(std::isnan(fp8_round(NAN)));
}

TEST(Fp8, ScalesMapTheAbsMaxOntoTheLargestFiniteValue) {
  EXPECT_FLOAT_EQ(fp8_scale_for(2.0), 224.f);
  EXPECT_EQ(fp8_scale_for(0.0), 1.f);  // an all-zero tensor
  EXPECT_EQ(fp8_scale_for(INFINITY), 1.f);
  EXPECT_DOUBLE_EQ(abs_max({1.f, -3.5f, 2.f}), 3.5);
  EXPECT_TRUE(std::isnan(abs_max({1.f, NAN})));
  const std::vector<float> w = {0.5f, -1.f, 0.25f, 4.f, -2.f, 1.f};  // two rows of three
  const std::vector<float> s = fp8_row_scales(w, 3);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FLOAT_EQ(s[0], 448.f);
  EXPECT_FLOAT_EQ(s[1], 112.f);
  const std::vector<float> back = fp8_dequantize_rows(fp8_quantize_rows(w, 3, s), 3, s);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(back[i], w[i]);  // all representable
  EXPECT_THROW(fp8_row_scales(w, 4), std::invalid_argument);
  EXPECT_THROW(fp8_quantize_rows(w, 3, {1.f}), std::invalid_argument);
}

TEST(Fp8, QuantizationErrorIsWithinHalfAStep) {
  // E4M3 has 3 mantissa bits: a normal value rounds by at most 2^-4 of itself.
  const std::vector<float> v = {0.013f, 0.31f, 1.7f, 5.5f, 100.f, 447.f};
  const float scale = fp8_scale_for(abs_max(v));
  const std::vector<float> back = fp8_dequantize(fp8_quantize(v, scale), scale);
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_LE(std::fabs(back[i] - v[i]), std::ldexp(std::fabs(v[i]), -4) * 1.0001) << v[i];
}

TEST(Int8, EncodeRoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(int8_encode(0.5f), 0);
  EXPECT_EQ(int8_encode(1.5f), 2);
  EXPECT_EQ(int8_encode(2.5f), 2);
  EXPECT_EQ(int8_encode(-2.5f), -2);
  EXPECT_EQ(int8_encode(-0.49f), 0);
  EXPECT_EQ(int8_encode(126.6f), 127);
  EXPECT_EQ(int8_encode(300.f), 127);
  EXPECT_EQ(int8_encode(-300.f), -127);  // symmetric: -128 is never used
  EXPECT_EQ(int8_encode(std::nanf("")), 0);
  EXPECT_FLOAT_EQ(int8_scale_for(2.54), 50.f);
  EXPECT_EQ(int8_scale_for(0.0), 1.f);
}

TEST(Int8, QuantizationErrorIsWithinHalfAStep) {
  const std::vector<float> v = {-3.1f, -0.02f, 0.0f, 0.013f, 0.31f, 1.7f, 2.9f, 5.5f};
  const float scale = int8_scale_for(abs_max(v));
  const std::vector<int8_t> q = int8_quantize(v, scale);
  const std::vector<float> back = int8_dequantize(q, scale);
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_LE(std::fabs(back[i] - v[i]), 0.5f / scale * 1.0001f) << v[i];
  EXPECT_EQ(q.back(), 127);  // the amax maps onto the largest code
  // Per row: each row's own amax maps onto 127.
  const std::vector<float> rows = {1.f, -2.f, 0.5f, 0.25f};
  const std::vector<float> sc = int8_row_scales(rows, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(int8_quantize_rows(rows, 2, sc), (std::vector<int8_t>{64, -127, 127, 64}));
  EXPECT_THROW(int8_quantize_rows(rows, 3, sc), std::invalid_argument);
}

Fp8Case small_case() {
  Fp8Case c;
  c.name = "test.conv";
  c.g.x = Dims{2, 32, 9, 9};
  c.g.y = Dims{2, 48, 9, 9};
  c.g.kernel_h = c.g.kernel_w = 3;
  c.g.pad_h = c.g.pad_w = 1;
  return c;
}

// INT8's output rounding (cvt.rni.sat.s8.f32): the nearest integer, ties to even, saturated to
// [-128, 127]; NaN gives 0. And each output type's scale for an amax.
TEST(Fp8Case, Int8RoundingAndOutputScales) {
  EXPECT_EQ(int8_round(2.5f), 2);
  EXPECT_EQ(int8_round(3.5f), 4);
  EXPECT_EQ(int8_round(-2.5f), -2);
  EXPECT_EQ(int8_round(2.4999f), 2);
  EXPECT_EQ(int8_round(-0.6f), -1);
  EXPECT_EQ(int8_round(126.6f), 127);
  EXPECT_EQ(int8_round(1000.f), 127);
  EXPECT_EQ(int8_round(-1000.f), -128);
  EXPECT_EQ(int8_round(std::nanf("")), 0);
  EXPECT_FLOAT_EQ(output_scale_for(Fp8Variant::Int8ToInt8PerChannel, 2.0), 63.5f);
  EXPECT_FLOAT_EQ(output_scale_for(Fp8Variant::Int8ToInt8PerChannel, 0.0), 1.f);
  EXPECT_FLOAT_EQ(output_scale_for(Fp8Variant::Fp8ToFp8, 2.0), fp8_scale_for(2.0));
  EXPECT_FLOAT_EQ(output_scale_for(Fp8Variant::Int8ToFp16PerChannel, 2.0), 1.f);
  EXPECT_EQ(std::string(fp8_variant_name(Fp8Variant::Int8ToInt8PerChannel)),
            "int8_to_int8_per_channel");
}

TEST(Fp8Case, EmulationsMeasureWhatEachStorageCosts) {
  const Fp8CaseData d = make_fp8_case(small_case(), 7, 512);
  ASSERT_EQ(d.samples.size(), 512u);
  ASSERT_EQ(d.w_scales.size(), 48u);
  // fp16 costs about 2^-11 per value; E4M3 about 2^-4 per value, averaged down over the
  // 288-term sums but far above fp16's.
  const double e16 =
      relative_l2(fp8_emulated(d, Fp8Variant::Fp16, 1.f), fp8_exact(d, Fp8Variant::Fp16));
  const double e8 =
      relative_l2(fp8_emulated(d, Fp8Variant::Fp8ToFp16, 1.f), fp8_exact(d, Fp8Variant::Fp8ToFp16));
  const double e8c = relative_l2(fp8_emulated(d, Fp8Variant::Fp8ToFp16PerChannel, 1.f),
                                 fp8_exact(d, Fp8Variant::Fp8ToFp16PerChannel));
  EXPECT_LT(e16, 2e-3);
  EXPECT_GT(e8, 5e-3);
  EXPECT_LT(e8, 1e-1);
  EXPECT_GT(e8, 5 * e16);
  EXPECT_LE(e8c, e8 * 1.05);  // a scale per output channel is no worse than one per tensor
  // INT8 (127 levels, exact int32 sums) lies between: far coarser than fp16, finer than E4M3's
  // three mantissa bits on these activations.
  const double ei8 = relative_l2(fp8_emulated(d, Fp8Variant::Int8ToFp16PerChannel, 1.f),
                                 fp8_exact(d, Fp8Variant::Int8ToFp16PerChannel));
  EXPECT_GT(ei8, 5 * e16);
  EXPECT_LT(ei8, e8c);
  EXPECT_TRUE(int8_inputs(Fp8Variant::Int8ToFp16PerChannel));
  EXPECT_FALSE(fp8_inputs(Fp8Variant::Int8ToFp16PerChannel));
  EXPECT_EQ(d.w_scales_i8.size(), 48u);
  EXPECT_EQ(d.xi8.size(), d.x.size());
  // An E4M3 output at a calibrated scale adds its own rounding on top.
  double amax = 0;
  for (double v : fp8_exact(d, Fp8Variant::Fp8ToFp8)) amax = std::max(amax, std::fabs(v));
  const float sy = fp8_scale_for(amax);
  const double e88 =
      relative_l2(fp8_emulated(d, Fp8Variant::Fp8ToFp8, sy), fp8_exact(d, Fp8Variant::Fp8ToFp8));
  EXPECT_GT(e88, e8c);
  EXPECT_LT(e88, 1e-1);
  // INT8 into INT8 at the exact samples' amax: every value a code of 0..127 over y_scale (ReLU's
  // outputs), the amax's sample near code 127, and the output's rounding on top of INT8's inputs.
  const Fp8Variant v88 = Fp8Variant::Int8ToInt8PerChannel;
  EXPECT_TRUE(int8_inputs(v88));
  EXPECT_TRUE(int8_output(v88));
  EXPECT_FALSE(fp8_inputs(v88));
  EXPECT_FALSE(fp8_output(v88));
  EXPECT_FALSE(int8_output(Fp8Variant::Int8ToFp16PerChannel));
  // An INT8 output variant at its exact samples' amax: the amax, the scale, the emulated values
  // and the largest code, each value checked to be a code of 0..127 over the scale.
  struct Int8Out {
    double amax = 0;
    float scale = 1;
    std::vector<double> values;
    int top = 0;
  };
  auto int8_out = [&](Fp8Variant v) {
    Int8Out o;
    for (double e : fp8_exact(d, v)) o.amax = std::max(o.amax, std::fabs(e));
    o.scale = output_scale_for(v, o.amax);
    o.values = fp8_emulated(d, v, o.scale);
    for (double e : o.values) {
      const double code = e * o.scale;
      EXPECT_NEAR(code, std::nearbyint(code), 1e-3) << fp8_variant_name(v);
      EXPECT_GE(code, -1e-3) << fp8_variant_name(v);
      EXPECT_LE(code, 127 + 1e-3) << fp8_variant_name(v);
      o.top = std::max(o.top, int(std::nearbyint(code)));
    }
    return o;
  };
  const Int8Out o8 = int8_out(v88);
  EXPECT_FLOAT_EQ(o8.scale, float(127.0 / o8.amax));
  const std::vector<double>& q8 = o8.values;
  const int top = o8.top;
  EXPECT_GE(top, 125);  // the exact amax's sample, through INT8's inputs (about 1% off), at the top
  EXPECT_LE(top, 127);
  const double ei88 = relative_l2(q8, fp8_exact(d, v88));
  EXPECT_GT(ei88, ei8);
  EXPECT_LT(ei88, 5e-2);
  // fp16 into INT8 (a bottleneck's first conv, fed the fp16 residual stream): fp16's inputs, so
  // only the output's 127 levels cost, less than INT8 inputs and output together, far more than
  // fp16 alone; every value a code of 0..127 over y_scale.
  const Fp8Variant v168 = Fp8Variant::Fp16ToInt8;
  EXPECT_TRUE(fp16_inputs(v168));
  EXPECT_FALSE(fp8_inputs(v168));
  EXPECT_FALSE(int8_inputs(v168));
  EXPECT_TRUE(int8_output(v168));
  EXPECT_FALSE(fp8_output(v168));
  EXPECT_TRUE(fp16_inputs(Fp8Variant::Fp16));
  EXPECT_FALSE(fp16_inputs(v88));
  EXPECT_EQ(std::string(fp8_variant_name(v168)), "fp16_to_int8");
  const std::vector<double> q168 = int8_out(v168).values;
  const double e168 = relative_l2(q168, fp8_exact(d, v168));
  EXPECT_GT(e168, 5 * e16);
  EXPECT_LT(e168, ei88);
  // The residual forms: z (fp16, post-ReLU values) joins before the ReLU, so the exact results
  // differ from the plain ones where z is not zero; fp16 with z costs fp16's rounding, INT8 in
  // with z about what INT8 in costs without it.
  for (Fp8Variant v : {Fp8Variant::Fp16Residual, Fp8Variant::Int8ToFp16Residual})
    EXPECT_TRUE(has_residual(v)) << fp8_variant_name(v);
  EXPECT_FALSE(has_residual(Fp8Variant::Fp16));
  EXPECT_FALSE(has_residual(Fp8Variant::Int8ToFp16PerChannel));
  EXPECT_TRUE(fp16_inputs(Fp8Variant::Fp16Residual));
  EXPECT_TRUE(int8_inputs(Fp8Variant::Int8ToFp16Residual));
  EXPECT_FALSE(int8_output(Fp8Variant::Int8ToFp16Residual));
  const std::vector<double> plain = fp8_exact(d, Fp8Variant::Fp16),
                            with_z = fp8_exact(d, Fp8Variant::Fp16Residual);
  int raised = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_GE(with_z[i], plain[i] - 1e-12);  // z >= 0 only raises the ReLU's input
    raised += with_z[i] > plain[i] + 1e-9;
  }
  EXPECT_GT(raised, int(plain.size()) / 4);
  EXPECT_EQ(fp8_exact(d, Fp8Variant::Int8ToFp16Residual), with_z);
  const double e16r = relative_l2(fp8_emulated(d, Fp8Variant::Fp16Residual, 1.f), with_z);
  const double ei8r = relative_l2(fp8_emulated(d, Fp8Variant::Int8ToFp16Residual, 1.f), with_z);
  EXPECT_LT(e16r, 2e-3);
  EXPECT_GT(ei8r, 5 * e16r);
  EXPECT_LT(ei8r, 5e-2);
  // The residual's values: fp16-stored, post-ReLU, the same for the same (seed, index), about
  // half of them zero.
  int zeros = 0;
  for (int64_t i = 0; i < 4000; ++i) {
    const float z = residual_value(7, i);
    EXPECT_GE(z, 0.f);
    EXPECT_EQ(z, fp16_round(z));
    EXPECT_EQ(z, residual_value(7, i));
    zeros += z == 0.f;
  }
  EXPECT_GT(zeros, 1700);
  EXPECT_LT(zeros, 2300);
  int differ = 0;  // another seed, other values (both zero about a quarter of the time)
  for (int64_t i = 0; i < 400; ++i) differ += residual_value(7, i) != residual_value(8, i);
  EXPECT_GT(differ, 240);
  // The sample variant is the conv alone: no bias, no ReLU, so negative outputs stay.
  bool negative = false;
  for (double v : fp8_exact(d, Fp8Variant::Fp8Sample)) negative |= v < 0;
  EXPECT_TRUE(negative);
  for (double v : fp8_exact(d, Fp8Variant::Fp16)) EXPECT_GE(v, 0.0);
}

TEST(Fp8Case, RefusesShapesE4M3CannotAlign) {
  Fp8Case c = small_case();
  c.g.x.c = 3;  // a stem conv on RGB
  EXPECT_THROW(make_fp8_case(c, 1, 8), std::invalid_argument);
}

TEST(Fp8Case, SameSeedSameData) {
  const Fp8CaseData a = make_fp8_case(small_case(), 3, 16), b = make_fp8_case(small_case(), 3, 16);
  EXPECT_EQ(a.xq, b.xq);
  EXPECT_EQ(a.exact_conv, b.exact_conv);
  const Fp8CaseData c = make_fp8_case(small_case(), 4, 16);
  EXPECT_NE(a.xq, c.xq);
}

}  // namespace
}  // namespace cnnbench

// The BatchNorm-fusion probe's references (kernels/bn_fusion_ref.h): the weight and data gradients
// are the convolution's adjoints, <dy, conv(a, w)> = <dW, w> = <dX, a>, exactly (in double) on a
// small layer with stride and padding.
#include "kernels/bn_fusion_ref.h"

namespace cnnbench {
namespace {

TEST(BnFusionRef, GradientsAreTheConvolutionsAdjoints) {
  ConvGeometry g;
  g.x = Dims{2, 5, 7, 6};
  g.kernel_h = 3, g.kernel_w = 3, g.stride = 2, g.pad_h = 1, g.pad_w = 1;
  g.y = Dims{2, 4, 4, 3};
  const BnFusionData d = make_bn_fusion_data(g, 5);
  double lhs = 0;  // <dy, conv(a, w)>
  for (int n = 0; n < 2; ++n)
    for (int oh = 0; oh < 4; ++oh)
      for (int ow = 0; ow < 3; ++ow)
        for (int k = 0; k < 4; ++k)
          lhs += double(d.dy[((size_t(n) * 4 + oh) * 3 + ow) * 4 + k]) *
                 conv_window(g, d.a.data(), d.w.data(), n, k, oh, ow);
  double via_dw = 0, via_dx = 0;
  for (int k = 0; k < 4; ++k)
    for (int r = 0; r < 3; ++r)
      for (int s = 0; s < 3; ++s)
        for (int c = 0; c < 5; ++c)
          via_dw += wgrad_entry(g, d.a.data(), d.dy.data(), k, r, s, c) *
                    d.w[((size_t(k) * 3 + r) * 3 + s) * 5 + c];
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 7; ++h)
      for (int w = 0; w < 6; ++w)
        for (int c = 0; c < 5; ++c)
          via_dx += dgrad_entry(g, d.dy.data(), d.w.data(), n, h, w, c) *
                    d.a[((size_t(n) * 7 + h) * 6 + w) * 5 + c];
  EXPECT_NE(lhs, 0.0);
  EXPECT_NEAR(via_dw, lhs, 1e-9 * std::fabs(lhs));
  EXPECT_NEAR(via_dx, lhs, 1e-9 * std::fabs(lhs));
  // a is the ReLU of the folded BatchNorm, in fp16: zero where x * scale + bias < 0.
  int zeros = 0;
  for (size_t i = 0; i < d.a.size(); ++i) {
    const float pre = d.x[i] * d.scale[i % 5] + d.bias[i % 5];
    EXPECT_EQ(d.a[i], pre > 0 ? fp16_round(pre) : 0.f);
    zeros += d.a[i] == 0.f;
  }
  EXPECT_GT(zeros, 0);
}

}  // namespace
}  // namespace cnnbench
