// The backward of StyleGAN3's SynthesisInput Fourier features, for a training step: host
// references in double of the two forward stages the kernels launch_fourier_prepare and
// launch_fourier_features (kernels/stylegan3.h) compute, and of their gradients; the kernels
// are in kernels/fourier_backward.h.
//
// fourier_prepare: per image, t [4] (the affine's output) -> u = t / |t[0:2]| = (r_c, r_s, t_x,
// t_y); m = m_r @ m_t (its first two rows (r_c, -r_s, -(r_c t_x - r_s t_y)), (r_s, r_c, -(r_s t_x
// + r_c t_y))); a = m[0:2] @ transform [3][3]; per channel with f = freqs[ci] (2): fx = f . a[:,
// 0], fy = f . a[:, 1], phase = phases[ci] + f . a[:, 2], amplitude = clamp(1 - (|(fx, fy)| - bw)
// / (sr / 2 - bw), 0, 1). fp [n][c][4] = (fx, fy, phase, amplitude).
// fourier_features: y [n][size][size][c] (NHWC) = scale * sin(2 pi (gx half fx + gy half fy +
// phase)) * amplitude, gx = (2 ix + 1) / size - 1 (ix the column), gy likewise of the row, half
// = 0.5 size / sr.
#pragma once

#include <vector>

#include "kernels/train_refs.h"

namespace cnnbench {

RefVec fourier_prepare_ref(const RefVec& t, const RefVec& transform, const RefVec& freqs,
                           const RefVec& phases, int n, int c, double sampling_rate,
                           double bandwidth);
RefVec fourier_features_ref(const RefVec& fp, int n, int c, int size, double sampling_rate,
                            double scale);

// dfp [n][c][4], the gradient of sum(dy * y) (y = fourier_features_ref(fp, ..., scale)) with
// respect to fp: with theta = 2 pi (gx half fx + gy half fy + phase) per position, summed over
// the positions,
//   dfx = sum dy scale amp cos(theta) 2 pi gx half, dfy likewise with gy half,
//   dphase = sum dy scale amp cos(theta) 2 pi, damp = sum dy scale sin(theta).
RefVec fourier_features_backward_ref(const RefVec& fp, const RefVec& dy, int n, int c, int size,
                                     double sampling_rate, double scale);
// dt [n][4], the gradient of sum(dfp * fp) (fp = fourier_prepare_ref(t, ...)) with respect to t.
// The amplitude passes its gradient where 0 <= 1 - (r - bw) / (sr / 2 - bw) <= 1 (torch's clamp),
// and none where r = |(fx, fy)| is 0 (torch's norm).
RefVec fourier_prepare_backward_ref(const RefVec& t, const RefVec& transform, const RefVec& freqs,
                                    const RefVec& phases, const RefVec& dfp, int n, int c,
                                    double sampling_rate, double bandwidth);

}  // namespace cnnbench
