// Training kernels whose threads also run on the host (kernels/train_kernels.cu): their indexing,
// ownership and sums checked against the double references of kernels/train_refs.h on a CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

// The BatchNorm backward's ReLU mask from x (stored_positive): a compare against half the storage
// type's smallest subnormal must say "positive" exactly where rounding to the type and back does,
// since the forward stored y = relu(v) rounded. Checked at and around each threshold (one ulp of
// float either side), over the subnormals and normals of every magnitude, and at zeros, negatives,
// infinities and NaN. A threshold one float ulp off is caught (the values at the threshold).
TEST(BatchNormMask, StoredPositiveIsTheRoundTrip) {
  std::vector<float> vs = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 65504.0f, 1e30f};
  for (float th : {0x1p-25f, 0x1p-24f, 0x1p-134f, 0x1p-133f, 0x1p-149f})
    for (float v : {th, std::nextafter(th, 0.0f), std::nextafter(th, 1.0f), th * 1.5f, -th})
      vs.push_back(v);
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {  // every exponent, sign and mantissa
    const uint32_t b = bits(rng);
    float v;
    std::memcpy(&v, &b, sizeof v);
    vs.push_back(v);
  }
  for (int e = -150; e <= 20; ++e) vs.push_back(std::ldexp(1.0f, e));
  int checked = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const std::vector<float> back = from_storage(to_storage(vs, t), t);
    for (size_t i = 0; i < vs.size(); ++i) {
      ASSERT_EQ(bn_stored_positive(t, vs[i]), back[i] > 0.0f)
          << dtype_name(t) << " v=" << vs[i] << " (bits " << std::hexfloat << vs[i] << ")";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * int(vs.size()));
  // The thresholds are where they must be: the value at each is not positive, the next one is.
  EXPECT_FALSE(bn_stored_positive(DType::F16, 0x1p-25f));
  EXPECT_TRUE(bn_stored_positive(DType::F16, std::nextafter(0x1p-25f, 1.0f)));
  EXPECT_FALSE(bn_stored_positive(DType::BF16, 0x1p-134f));
  EXPECT_TRUE(bn_stored_positive(DType::BF16, std::nextafter(0x1p-134f, 1.0f)));
  EXPECT_TRUE(bn_stored_positive(DType::F32, 0x1p-149f));
}

TEST(ScaleBackward, VecEmulationRefusesUnpackedChannels) {
  std::vector<float> b(64);
  EXPECT_THROW(scale_backward_vec_emulate(DType::F16, b.data(), b.data(), b.data(), b.data(),
                                          b.data(), Dims{1, 12, 2, 2}, false),
               std::invalid_argument);
}

// The reductions' scratch holds partials for the vectorised passes' chunking, about 2048 blocks
// over their column tiles of 256 channels (fp16), at most 1024 chunks: a BatchNorm over 256
// channels or more had got 256 blocks (two an SM) when the scratch followed the per-element
// path's 32-channel tiles. ResNet-50's shapes at batch 256.
TEST(ReduceScratch, RoomForTheVectorisedChunks) {
  struct Case {
    int64_t rows;
    int c, chunks;
  };
  const Case cases[] = {{256LL * 56 * 56, 64, 1024},  {256LL * 56 * 56, 256, 1024},
                        {256LL * 28 * 28, 512, 1024}, {256LL * 14 * 14, 1024, 512},
                        {256LL * 7 * 7, 2048, 256},   {5, 256, 5}};  // no more chunks than rows
  for (const Case& k : cases) {
    const size_t want = (3 * size_t(k.chunks) + 3) * size_t(k.c) * sizeof(float);
    EXPECT_EQ(channel_reduce_scratch_bytes(k.rows, k.c), want) << k.rows << " x " << k.c;
  }
  // Segments (the scale backward: an image each) share the blocks: 5 tiles of 1152 channels by
  // 256 images want 2 chunks an image.
  EXPECT_EQ(channel_reduce_scratch_bytes(49, 1152, 256), (3 * size_t(2) * 256 + 3) * 1152 * 4);
}

// The grouped optimizer launches (launch_sgd_steps, launch_adam_steps): tensors split by gradient
// type, at most kOptTable a launch, empty ones left out; every element of every tensor visited by
// exactly one thread of one block (opt_slot over each group's starts, 256 threads a block), and a
// tensor's blocks capped at kOptMaxBlocks.
TEST(OptGroups, EveryElementOnceAndTensorsByGradientType) {
  std::mt19937 rng(5);
  std::vector<OptTensor> ts;
  const int64_t sizes[] = {1, 64, 255, 256, 257, 1000, 4096, 65536, 2359296, 0, 3, 1 << 20};
  for (int k = 0; k < 200; ++k) {
    OptTensor o;
    o.n = sizes[size_t(k) % (sizeof sizes / sizeof sizes[0])];
    o.gt = k % 3 == 0 ? DType::F32 : k % 3 == 1 ? DType::F16 : DType::BF16;
    if (k % 7 == 0) o.n = int64_t(rng() % 5000);
    ts.push_back(o);
  }
  const std::vector<OptGroup> groups = opt_groups(ts);
  std::vector<std::vector<uint8_t>> seen(ts.size());
  for (size_t k = 0; k < ts.size(); ++k) seen[k].assign(size_t(ts[k].n), 0);
  std::vector<int> groups_of(ts.size(), 0);
  constexpr int kT = 256;
  for (const OptGroup& g : groups) {
    const int used = int(g.tensors.size());
    ASSERT_GT(used, 0);
    ASSERT_LE(used, kOptTable);
    ASSERT_EQ(g.start.size(), size_t(used) + 1);
    for (int b = 0; b < used; ++b) {
      const OptTensor& o = ts[size_t(g.tensors[size_t(b)])];
      EXPECT_EQ(o.gt, g.gt);
      EXPECT_GT(o.n, 0);
      const int blocks = g.start[size_t(b) + 1] - g.start[size_t(b)];
      EXPECT_GE(blocks, 1);
      EXPECT_LE(blocks, kOptMaxBlocks);
      ++groups_of[size_t(g.tensors[size_t(b)])];
    }
    for (int block = 0; block < g.start.back(); ++block)
      for (int thread = 0; thread < kT; ++thread) {
        const OptSlot s = opt_slot(g.start.data(), used, block, thread, kT);
        ASSERT_GE(s.tensor, 0);
        ASSERT_LT(s.tensor, used);
        const size_t k = size_t(g.tensors[size_t(s.tensor)]);
        for (int64_t i = s.first; i < ts[k].n; i += s.stride) ++seen[k][size_t(i)];
      }
  }
  for (size_t k = 0; k < ts.size(); ++k) {
    EXPECT_EQ(groups_of[k], ts[k].n > 0 ? 1 : 0) << "tensor " << k;
    int64_t wrong = 0;
    for (uint8_t v : seen[k]) wrong += v != 1;
    EXPECT_EQ(wrong, 0) << "tensor " << k << " of " << ts[k].n;
  }
  EXPECT_GE(groups.size(), 6u);  // three gradient types, 200 tensors: two tables each
}

}  // namespace
}  // namespace cnnbench
