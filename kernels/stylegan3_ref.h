// StyleGAN3's alias-free ops (issue 6), as NVlabs' stylegan3 defines them: filtered_lrelu (bias,
// up-sampling with an FIR filter, leaky ReLU with gain and clamp, FIR filter and down-sampling:
// the reference path _filtered_lrelu_ref) and SynthesisInput's Fourier features. Host
// references, plain C++ in double on NCHW float tensors; kernels/stylegan3.h has the kernels.
#pragma once

#include <vector>

namespace cnnbench {

// filtered_lrelu's geometry and activation. The padding (x0, x1, y0, y1) is applied after the
// zero-insertion up-sampling (negative: crops). slope 1 and gain 1: linear (ToRGB). clamp <= 0:
// none. out_scale multiplies the result after the down-sampling (the synthesis' output_scale
// on its last layer).
struct FilteredLreluSpec {
  int up = 1, down = 1;
  int pad_x0 = 0, pad_x1 = 0, pad_y0 = 0, pad_y1 = 0;
  float gain = 1.41421356f, slope = 0.2f, clamp = 0.f, out_scale = 1.f;
  // Sizes through the op for an input of h x w, with filters of fu_taps and fd_taps (1: none).
  int tmp_h(int h, int fu_taps) const { return h * up + pad_y0 + pad_y1 - fu_taps + 1; }
  int tmp_w(int w, int fu_taps) const { return w * up + pad_x0 + pad_x1 - fu_taps + 1; }
  int out_h(int h, int fu_taps, int fd_taps) const {
    return (tmp_h(h, fu_taps) - fd_taps) / down + 1;
  }
  int out_w(int w, int fu_taps, int fd_taps) const {
    return (tmp_w(w, fu_taps) - fd_taps) / down + 1;
  }
};

// y = out_scale * upfirdn2d(clamp(lrelu(upfirdn2d(x + bias, fu, up, pad, gain up^2)) * gain),
// fd, down). fu: 1D taps applied along both axes (empty: none); fd: 1D taps, or, where fd_2d,
// fd_taps x fd_taps row-major (StyleGAN3-R's radial filter); empty: none. Both filters are true
// convolutions (NVlabs flips them). bias [c] or empty. x [n][c][h][w] -> [n][c][out_h][out_w].
std::vector<float> filtered_lrelu_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                            const std::vector<float>& fu,
                                            const std::vector<float>& fd, bool fd_2d,
                                            const std::vector<float>& bias,
                                            const FilteredLreluSpec& s);

// SynthesisInput.forward for n latents w [n][wdim]: the affine (w . affine_w[j] * weight_gain +
// affine_b[j], j < 4), normalised by the norm of its first two, as a rotation and translation
// applied after `transform` [3][3]; the frequencies freqs [C][2] and phases [C] transformed, the
// amplitudes' band limit at `bandwidth` within sampling_rate / 2; sin(2 pi (grid . f + phase)) *
// amplitude on the size x size grid (affine_grid, align_corners false, half-extent 0.5 size /
// sampling_rate); then the channels mixed by weight [C][C] / sqrt(C). -> [n][C][size][size].
std::vector<float> fourier_input_reference(
    const std::vector<float>& w, int n, int wdim, const std::vector<float>& affine_w,
    const std::vector<float>& affine_b, float affine_weight_gain,
    const std::vector<float>& transform, const std::vector<float>& freqs,
    const std::vector<float>& phases, const std::vector<float>& weight, int channels, int size,
    double sampling_rate, double bandwidth);

}  // namespace cnnbench
