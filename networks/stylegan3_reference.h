// StyleGAN3's generator on the host (issue 6): the ground truth of the GPU tests and the
// cross-check against tools/stylegan3_reference.py. Slow: double accumulation, direct convs.
#pragma once

#include <vector>

#include "networks/graph.h"
#include "networks/weights.h"

namespace cnnbench {

// The generator `g` (stylegan3_generator) on weights `w` (NVlabs' state_dict names) for n
// latents z [n][512]: the mapping, the Fourier input, every SynthesisLayer (modulated conv with
// NVlabs' pre-normalisation, demodulation and input gain rsqrt(magnitude_ema), then
// filtered_lrelu with filters designed by design_lowpass_filter from each node's Sg3Spec), the
// ToRGB and the output scale. No truncation. -> [n][3][R][R].
std::vector<float> stylegan3_generate_reference(const Graph& g, const HostWeights& w,
                                                const std::vector<float>& z, int n);

}  // namespace cnnbench
