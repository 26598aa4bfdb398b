// Training kernels whose threads also run on the host (kernels/train_kernels.cu): their indexing,
// ownership and sums checked against the double references of kernels/train_refs.h on a CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/storage.h"
#include "kernels/train_kernels.h"
#include "kernels/train_refs.h"

namespace cnnbench {
namespace {

// Squeeze-excitation's scale backward, vectorised (a thread a 16-byte pack, lanes over an image's
// rows, chunks of rows, images as the grid's third dimension): every dx element is dy * gate
// (+ dx) rounded once, exactly as a thread computes it, and written once; the per-image sums of
// dy * x match the reference. Shapes: EfficientNet's 7x7 rows with many channels, one image's
// rows split over several chunks, a last column tile with an idle pack, in fp32, fp16 and bf16.
TEST(ScaleBackward, VecThreadsMatchTheReference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2, 2);
  const Dims shapes[] = {{3, 96, 7, 7}, {2, 16, 56, 56}, {2, 264, 5, 9}, {1, 32, 1, 1}};
  int cases = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (const Dims& d0 : shapes)
      for (bool accumulate : {false, true}) {
        const Dims& d = d0;
        const size_t count = size_t(d.numel()), gates = size_t(d.n) * d.c;
        std::vector<float> x(count), dy(count), dx0(count), gate(gates);
        for (float& v : x) v = u(rng);
        for (float& v : dy) v = u(rng);
        for (float& v : dx0) v = u(rng);
        for (float& v : gate) v = u(rng) / 2;
        const std::vector<uint8_t> xs = to_storage(x, t), dys = to_storage(dy, t);
        std::vector<uint8_t> dxs = to_storage(dx0, t);
        x = from_storage(xs, t), dy = from_storage(dys, t), dx0 = from_storage(dxs, t);
        if (!accumulate) std::fill(dxs.begin(), dxs.end(), uint8_t(0xFF));  // must be overwritten
        std::vector<float> dgate(gates, NAN);
        scale_backward_vec_emulate(t, xs.data(), gate.data(), dys.data(), dxs.data(), dgate.data(),
                                   d, accumulate);
        // dx as a thread computes it: float(dy) * gate, plus float(dx), rounded once.
        const size_t hw = size_t(d.h) * d.w;
        std::vector<float> want(count);
        for (size_t i = 0; i < count; ++i) {
          const size_t n = i / (hw * d.c), c = i % d.c;
          want[i] = dy[i] * gate[n * d.c + c] + (accumulate ? dx0[i] : 0.0f);
        }
        EXPECT_EQ(from_storage(dxs, t), from_storage(to_storage(want, t), t))
            << dtype_name(t) << " " << d.str() << (accumulate ? " acc" : "");
        const ScaleGradRef ref =
            scale_backward_ref(RefVec(x.begin(), x.end()), RefVec(gate.begin(), gate.end()),
                               RefVec(dy.begin(), dy.end()), d);
        double worst = 0;
        for (size_t g = 0; g < gates; ++g) {
          const size_t n = g / d.c, c = g % d.c;
          double mag = 0;  // what the sum is a sum of
          for (size_t p = 0; p < hw; ++p) {
            const size_t i = (n * hw + p) * d.c + c;
            mag += std::abs(double(dy[i]) * x[i]);
          }
          worst = std::max(worst, std::abs(dgate[g] - ref.dgate[g]) / (mag + 1e-30));
        }
        EXPECT_LT(worst, 1e-6) << dtype_name(t) << " " << d.str() << " dgate";
        ++cases;
      }
  EXPECT_EQ(cases, 24);
}

TEST(ScaleBackward, VecEmulationRefusesUnpackedChannels) {
  std::vector<float> b(64);
  EXPECT_THROW(scale_backward_vec_emulate(DType::F16, b.data(), b.data(), b.data(), b.data(),
                                          b.data(), Dims{1, 12, 2, 2}, false),
               std::invalid_argument);
}

}  // namespace
}  // namespace cnnbench
