// StyleGAN's minibatch standard deviation (NVlabs' MinibatchStdLayer, num_channels 1) for a
// training step: the forward, its backward, and the "dual" forms an R1 double-backward needs
// (the forward carried with a tangent, and the backward of that). Host references in double on
// NHWC tensors; kernels/mbstd.h has the kernels.
//
// Groups: x [n][h][w][c], n a multiple of `group` (G); sample i belongs to group j = i % (n / G)
// (NVlabs' x.reshape(G, -1, F, c, H, W)), whose members are j, j + n/G, ..., j + (G-1) n/G.
// Per group and (h, w, ch): mu = mean of its G members, var = mean of (x - mu)^2, sd = sqrt(var +
// 1e-8); s_j = mean of sd over (h, w, ch). K = h * w * c below.
#pragma once

#include <vector>

#include "kernels/train_refs.h"

namespace cnnbench {

constexpr double kMbstdEps = 1e-8;

// y [n][h][w][c + 1]: y[..., :c] = x, y[..., c] = s_{i % (n/G)} at every (h, w).
RefVec mbstd_forward_ref(const RefVec& x, int n, int h, int w, int c, int group);
// dx [n][h][w][c] from dy [n][h][w][c + 1]: dx_p = dy[..., :c]_p + S_j (x_p - mu) / (G sd K),
// S_j = the sum of dy[..., c] over the group's members and (h, w).
RefVec mbstd_backward_ref(const RefVec& x, const RefVec& dy, int n, int h, int w, int c, int group);

// The dual forms on stacked buffers of 2n samples: x2 [2n][h][w][c], the first n the primal x,
// the last n a tangent xd. y2 [2n][h][w][c + 1]: the first n the forward of x, the last n
// (xd, sd_dot_j) with sd_dot_j = (1/K) sum_(h,w,ch) sum_m (x_m - mu) xd_m / (G sd), the
// derivative of s_j along xd.
RefVec mbstd_forward_dual_ref(const RefVec& x2, int n, int h, int w, int c, int group);
// dx2 [2n][h][w][c], the gradient of sum(dy2 * y2) with respect to x2, from dy2 [2n][h][w][c + 1]
// (gp its first n, gd its last n). With y = x - mu, ydot = xd - mean(xd), A = sum_m y_m xd_m per
// (h, w, ch), S_j and Gd_j the sums of gp[..., c] and gd[..., c] over the group and (h, w):
//   dx_p  = gp[..., :c]_p + S_j y_p / (G sd K) + Gd_j / (G K) (ydot_p / sd - A y_p / (G sd^3))
//   dxd_p = gd[..., :c]_p + Gd_j y_p / (G sd K)
RefVec mbstd_backward_dual_ref(const RefVec& x2, const RefVec& dy2, int n, int h, int w, int c,
                               int group);

}  // namespace cnnbench
