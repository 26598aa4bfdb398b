// Host-side conversions between float and a storage type, and reading device buffers back.
#pragma once

#include <cuda_runtime.h>
#include <cstdint>

#include <vector>

#include "kernels/tensor.h"

namespace cnnbench {

// Little-endian bytes of `v` in type t (round to nearest even), and back.
std::vector<uint8_t> to_storage(const std::vector<float>& v, DType t);
std::vector<float> from_storage(const std::vector<uint8_t>& bytes, DType t);
// A device buffer's values as host floats (synchronizes the device first).
std::vector<float> download(const void* p, size_t count, DType t);
// The same values in the other layout: NCHW to NHWC and back, for dims d (also OIHW to KRSC
// weights, with n = K, c = C, h x w = R x S).
std::vector<float> nchw_to_nhwc(const std::vector<float>& nchw, const Dims& d);
std::vector<float> nhwc_to_nchw(const std::vector<float>& nhwc, const Dims& d);
// Uploads an NCHW host batch of dims d into the NHWC device buffer `dst` in type t; UserError
// when the count does not match d.
void upload_nchw_as_nhwc(void* dst, const std::vector<float>& nchw, const Dims& d, DType t);
// Writes into `dst` (NHWC, type t), on the device and on stream s, bit for bit what
// upload_nchw_as_nhwc(dst, random_uniform(seed, name, d.numel(), lo, hi), d, t) writes, given
// `state` = random_stream_state(seed, name) (networks/weights.h): a synthetic batch of thousands
// of images without the host's passes over it (kernels/synthetic.cu).
void fill_uniform_nhwc(void* dst, uint64_t state, const Dims& d, DType t, float lo, float hi,
                       cudaStream_t s);
// Video frames as a decoder hands them over, uint8 RGB in HWC order one after another (d.n
// frames of d.h x d.w, d.c = 3), written into a network's NHWC input of type t as x / 255
// (YOLOR's detect.py: img /= 255.0), on stream s.
void frames_to_input(const uint8_t* frames, const Dims& d, DType t, void* dst, cudaStream_t s);
// ||got - ref|| / ||ref||, infinite where got holds a non-finite value.
double relative_l2(const std::vector<float>& got, const std::vector<float>& ref);
// Whether a plan's CUDA-graph replay reproduced its direct run (the engines' replay check): inf
// and NaN at the same places (an fp16 step's scaled gradients may overflow), and the finite rest
// within relative L2 `tol`.
bool replay_matches(const std::vector<float>& replayed, const std::vector<float>& direct,
                    double tol = 1e-3);

}  // namespace cnnbench
