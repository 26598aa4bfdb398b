// StyleGAN's synthesis ops (issue 6), as NVlabs' torch_utils/ops define them: upfirdn2d (up-sample
// by zero insertion, pad, FIR filter, down-sample), bias_act's lrelu with its gain and clamp (plus
// the synthesis layers' noise), and the modulated convolution in its scale-conv-scale form
// (modulated_conv2d with fused_modconv=False: x * styles, a conv with the shared weight, then
// the demodulation coefficients), whose conv is cuDNN's. The host references, plain C++ in double
// on NCHW float tensors (kernels/stylegan.h has the kernels, on NHWC in the storage type).
#pragma once

#include <cstdint>
#include <vector>

namespace cnnbench {

// upfirdn2d's geometry: up-sampling, down-sampling and padding (x0, x1, y0, y1), and the filter's
// size. `gain` multiplies the result (upsample2d passes up * up). The filter is applied as a true
// convolution (NVlabs flips it unless flip_filter); a separable filter is the outer product of
// its 1D taps.
struct FirSpec {
  int up = 1, down = 1;
  int pad_x0 = 0, pad_x1 = 0, pad_y0 = 0, pad_y1 = 0;
  int fh = 1, fw = 1;
  float gain = 1.f;
  int out_h(int h) const { return (h * up + pad_y0 + pad_y1 - fh) / down + 1; }
  int out_w(int w) const { return (w * up + pad_x0 + pad_x1 - fw) / down + 1; }
};
// NVlabs' upsample2d(x, f, up=2) for a filter of `taps` per axis: padding so the output is
// exactly twice the input, gain 4.
FirSpec upsample2d_spec(int taps, int up = 2);
// StyleGAN2's [1, 3, 3, 1] as given (unnormalised).
std::vector<float> stylegan2_fir_1d();
// The 2D filter: outer(t, t) normalized to sum 1 (setup_filter).
std::vector<float> fir_2d(const std::vector<float>& taps_1d);
// The 1-D taps normalized to sum 1: outer(fir_1d(t), fir_1d(t)) is fir_2d(t), the separable form.
std::vector<float> fir_1d(const std::vector<float>& taps_1d);

// x [n][c][h][w] -> [n][c][out_h][out_w], filter f [fh][fw].
std::vector<float> upfirdn2d_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                       const std::vector<float>& f, const FirSpec& s);

// bias_act('lrelu', alpha 0.2, gain sqrt(2), clamp) after the noise, as SynthesisLayer does it:
// y = clamp(lrelu(x + noise_strength * noise[y][x] + b[c]) * gain, -clamp, clamp); clamp <= 0:
// none; noise may be empty (ToRGB: linear, gain 1, no noise: slope 1).
struct BiasActSpec {
  float slope = 0.2f;  // 1: linear
  float gain = 1.41421356f;
  float clamp = 0.f;
  float noise_strength = 0.f;
};
std::vector<float> bias_act_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                      const std::vector<float>& bias,
                                      const std::vector<float>& noise, const BiasActSpec& s);

// The demodulation coefficients d[n][k] = 1 / sqrt(sum_{c,r,s} (W[k][c][r][s] * styles[n][c])^2
// + 1e-8), W [k][c][r][s] with its weight gain applied.
std::vector<float> demod_reference(const std::vector<float>& w, int k, int c, int r, int s,
                                   const std::vector<float>& styles, int n);
// The explicit per-sample modulated conv (the test's ground truth): for each image, the weight
// W[k][c] * styles[n][c] (* d[n][k] where demodulate), a plain conv of stride 1 and padding
// (r - 1) / 2. x [n][c][h][w] -> [n][k][h][w].
std::vector<float> modconv_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                     const std::vector<float>& weight, int k, int r,
                                     const std::vector<float>& styles, bool demodulate);

}  // namespace cnnbench
