// The training kernels (kernels/train_kernels.h) against the double-precision references of
// kernels/train_refs.h, in every storage type, on fresh random shapes each run (the seed is in
// every failure message): relative L2 error below 1e-5 for fp32 and 1e-2 for fp16 and bf16
// (tolerance() of gpu_util.h). fp32 results computed from values exactly as the device holds them
// (batch statistics, parameter gradients, the loss, master weights and optimizer state) are held
// to 1e-5 in every storage type: only fp32 arithmetic stands between them and the reference.
// Sums whose value may cancel to near zero (a channel's sum of gradients, its mean) are measured
// against the same sums of the terms' magnitudes, which is what fp32 rounding scales with
// (sum_error), so that a channel whose sum happens to be small cannot fail a correct kernel.
// Outputs start poisoned (NaN); strided cases write into a channel slice whose other channels must
// stay NaN, and read inputs whose other channels are NaN. Edge cases: pooling windows over
// padding and ties, a skipped optimizer step, the loss scale's backoff and growth, dropout's
// determinism and keep fraction, and a captured step replayed twice like eager launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "kernels/stem_wgrad.h"
#include "kernels/train_kernels.h"
#include "kernels/train_refs.h"
#include "tests/stem_pool_case.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

const Precision kStorage[] = {Precision::FP32, Precision::FP16, Precision::BF16};
const int kChannels[] = {1, 3, 17, 32, 45, 70};
constexpr double kF32 = 1e-5;  // fp32 results from exactly known inputs, in any storage type

unsigned fresh_seed() {
  return std::random_device{}();
}

std::string seed_note(unsigned seed) {
  return "seed " + std::to_string(seed);
}

RefVec to_ref(const std::vector<float>& v) {
  return RefVec(v.begin(), v.end());
}

std::vector<float> to_float(const RefVec& v) {
  return std::vector<float>(v.begin(), v.end());
}

// Batch 2..4, odd height and width 3..11.
Dims random_dims(std::mt19937& rng, int channels) {
  std::uniform_int_distribution<int> n(2, 4), hw(1, 5);
  return {n(rng), channels, 2 * hw(rng) + 1, 2 * hw(rng) + 1};
}

int64_t rows_of(const Dims& d) {
  return int64_t(d.n) * d.h * d.w;
}

// A device array of a plain type (fp32 state, labels, masks, scratch), poisoned (0xFF) at first.
template <class U>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    CNN_CHECK_CUDA(cudaMalloc(&p_, std::max<size_t>(n * sizeof(U), 1)));
    CNN_CHECK_CUDA(cudaMemset(p_, 0xFF, n * sizeof(U)));
  }
  explicit DeviceArray(const std::vector<U>& v) : DeviceArray(v.size()) { upload(v); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  void upload(const std::vector<U>& v) {
    ASSERT_EQ(v.size(), n_);
    CNN_CHECK_CUDA(cudaMemcpy(p_, v.data(), n_ * sizeof(U), cudaMemcpyHostToDevice));
  }
  std::vector<U> download() const {
    std::vector<U> v(n_);
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    CNN_CHECK_CUDA(cudaMemcpy(v.data(), p_, n_ * sizeof(U), cudaMemcpyDeviceToHost));
    return v;
  }
  void zero() { CNN_CHECK_CUDA(cudaMemset(p_, 0, n_ * sizeof(U))); }
  U* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  U* p_ = nullptr;
  size_t n_;
};

// rows x channels values of type t on the device: packed, or at channel `off` of rows `ld` wide
// (ld 0: packed from element `off`, so off 1 makes every pointer misaligned). Whatever lies
// outside the values is NaN: an input there would poison the result, an output there must not
// touch it.
class Rows {
 public:
  Rows(int64_t rows, int channels, DType t, int ld = 0, int off = 0)
      : rows_(rows),
        c_(channels),
        ld_(ld),
        off_(off),
        width_(ld > 0 ? ld : channels),
        t_(t),
        buf_(size_t(rows) * width_ + off, t) {}
  void* ptr() const { return static_cast<char*>(buf_.get()) + size_t(off_) * dtype_size(t_); }
  int ld() const { return ld_; }
  void upload(const std::vector<float>& v) {
    EXPECT_EQ(v.size(), size_t(rows_) * c_);
    std::vector<float> wide(size_t(rows_) * width_ + off_, NAN);
    for (int64_t r = 0; r < rows_; ++r)
      for (int c = 0; c < c_; ++c) wide[at(r, c)] = v[size_t(r) * c_ + c];
    buf_.upload(wide);
  }
  // The values, counting into *stray the entries outside them that are no longer NaN.
  std::vector<float> download(int* stray = nullptr) const {
    const std::vector<float> wide = buf_.download();
    std::vector<float> v(size_t(rows_) * c_);
    std::vector<bool> mine(wide.size(), false);
    for (int64_t r = 0; r < rows_; ++r)
      for (int c = 0; c < c_; ++c) v[size_t(r) * c_ + c] = wide[at(r, c)], mine[at(r, c)] = true;
    if (stray) {
      *stray = 0;
      for (size_t i = 0; i < wide.size(); ++i) *stray += !mine[i] && !std::isnan(wide[i]);
    }
    return v;
  }

 private:
  size_t at(int64_t r, int c) const { return size_t(off_) + size_t(r) * width_ + c; }
  int64_t rows_;
  int c_, ld_, off_, width_;
  DType t_;
  DeviceBuffer buf_;
};

// The three layouts every elementwise test runs: packed and aligned, packed from a misaligned
// element (the scalar path), and a channel slice of a wider buffer.
struct Layout {
  const char* name;
  int extra_ld, off;  // ld = channels + extra_ld when extra_ld > 0
};
const Layout kLayouts[] = {{"packed", 0, 0}, {"misaligned", 0, 1}, {"slice", 9, 4}};
int ld_for(const Layout& l, int channels) {
  return l.extra_ld > 0 ? channels + l.extra_ld : 0;
}

RefVec absolute(const RefVec& v) {
  RefVec a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::abs(v[i]);
  return a;
}

RefVec product(const RefVec& a, const RefVec& b) {
  RefVec p(a.size());
  for (size_t i = 0; i < a.size(); ++i) p[i] = a[i] * b[i];
  return p;
}

// ||got - ref|| / ||magnitude||, magnitude the same sums over the terms' absolute values;
// infinite where got holds a non-finite value.
double sum_error(const std::vector<float>& got, const RefVec& ref, const RefVec& magnitude) {
  EXPECT_EQ(got.size(), ref.size());
  EXPECT_EQ(got.size(), magnitude.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += magnitude[i] * magnitude[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

RefVec add(const RefVec& a, const std::vector<float>& b) {
  RefVec s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

// ---- BatchNorm case data -----------------------------------------------------------------------

struct BnCase {
  Dims d;
  double offset;  // added to every channel's mean
};

std::vector<BnCase> bn_cases(std::mt19937& rng) {
  std::vector<BnCase> cases;
  for (int c : kChannels) cases.push_back({random_dims(rng, c), 0.0});
  cases.push_back({{3, 40, 41, 57}, 0.0});   // 7011 rows: hundreds of chunks
  cases.push_back({{2, 1, 63, 65}, 0.0});    // one channel, many rows
  cases.push_back({{2, 24, 37, 41}, 50.0});  // a mean far from zero beside the spread
  // The vectorised path's geometries (packed, channels a multiple of the 16-byte pack): one
  // column tile of 8 packs, 33 packs in two tiles of 17, 256 packs in eight tiles, 4 fp32 packs.
  cases.push_back({{4, 64, 29, 31}, 0.0});
  cases.push_back({{2, 264, 9, 11}, 0.0});
  cases.push_back({{2, 2048, 7, 5}, 3.0});
  cases.push_back({{3, 4, 20, 19}, 0.0});
  return cases;
}

// x with a mean per channel of offset + U(-1, 1) and spread U(-1, 1), in type t.
std::vector<float> bn_input(const BnCase& cs, DType t, std::mt19937& rng) {
  const int C = cs.d.c;
  const std::vector<float> shift = random_vector(C, rng, -1, 1);
  std::vector<float> x = random_vector(size_t(rows_of(cs.d)) * C, rng, -1, 1);
  for (size_t i = 0; i < x.size(); ++i) x[i] += float(cs.offset) + shift[i % C];
  return rounded(x, t);
}

}  // namespace

// ---- BatchNorm ---------------------------------------------------------------------------------

// The activations a BatchNorm fuses (kernels/batchnorm_train.cu), each case run with each; a
// residual z added before the activation in the cases where `residual` says so.
const Act kBnActs[] = {Act::None, Act::ReLU, Act::SiLU};

TEST(GpuTrain, BatchNormForwardMatchesReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  const std::vector<BnCase> cases = bn_cases(rng);
  const double eps = 1e-5, momentum = 0.2;
  int turn = 0;
  for (Precision p : kStorage)
    for (const BnCase& cs : cases)
      for (Act act : kBnActs)
        for (bool strided : {false, true}) {
          const bool residual = (turn++ % 3) != 0;  // two of three runs add one
          const DType t = storage_type(p);
          const int C = cs.d.c;
          const int64_t rows = rows_of(cs.d);
          std::ostringstream what;
          what << precision_name(p) << " " << cs.d.str() << " offset " << cs.offset << " act '"
               << act_name(act) << "'" << (residual ? " residual" : "")
               << (strided ? " strided" : "");
          const auto x = bn_input(cs, t, rng);
          const auto zin = rounded(random_vector(size_t(rows) * C, rng), t);
          const auto gamma = random_vector(C, rng, 0.5, 1.5), beta = random_vector(C, rng, -.5, .5);
          const auto rm = random_vector(C, rng, -0.5, 0.5), rv = random_vector(C, rng, 0.5, 1.5);
          BnRef ref = bn_forward_train_ref(to_ref(x), C, to_ref(gamma), to_ref(beta), eps);
          for (size_t i = 0; i < ref.y.size(); ++i)
            ref.y[i] = act_ref(act, ref.y[i] + (residual ? double(zin[i]) : 0.0));
          RefVec rm_ref = to_ref(rm), rv_ref = to_ref(rv);
          bn_running_update_ref(rm_ref, rv_ref, to_ref(x), C, momentum);
          // The magnitudes the mean and the running mean are sums of.
          RefVec mean_mag = bias_backward_ref(absolute(to_ref(x)), C), rm_mag(C);
          for (int c = 0; c < C; ++c) {
            mean_mag[c] /= double(rows);
            rm_mag[c] = (1 - momentum) * std::abs(rm[c]) + momentum * mean_mag[c];
          }

          Rows dx(rows, C, t, strided ? C + 5 : 0, strided ? 2 : 0);
          Rows dz(rows, C, t, strided ? C + 3 : 0, strided ? 1 : 0);
          Rows dy(rows, C, t, strided ? C + 9 : 0, strided ? 7 : 0);
          dx.upload(x);
          dz.upload(zin);
          DeviceArray<float> dgamma(gamma), dbeta(beta), mean(C), invstd(C), drm(rm), drv(rv);
          DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, C));
          BnTrainSpec s;
          s.rows = rows, s.channels = C, s.eps = eps, s.momentum = momentum, s.act = act;
          s.ld_x = dx.ld(), s.ld_y = dy.ld(), s.ld_z = dz.ld();
          launch_bn_forward_train(t, dx.ptr(), residual ? dz.ptr() : nullptr, dy.ptr(),
                                  dgamma.get(), dbeta.get(), mean.get(), invstd.get(), drm.get(),
                                  drv.get(), s, scratch.get(), nullptr);
          int stray = 0;
          const auto y = dy.download(&stray);
          EXPECT_EQ(stray, 0) << what.str() << ": wrote outside y";
          // Far from zero the fp32 mean carries a rounding of about ulp(50) = 4e-6, which
          // x - mean turns into an error of that size beside a spread of about 0.6.
          const double y_tol = p == Precision::FP32 && cs.offset != 0 ? 1e-4 : tolerance(p);
          EXPECT_LT(rel_l2(y, ref.y), y_tol) << what.str();
          EXPECT_LT(sum_error(mean.download(), ref.mean, mean_mag), kF32) << what.str() << " mean";
          EXPECT_LT(rel_l2(invstd.download(), ref.invstd), kF32) << what.str() << " invstd";
          EXPECT_LT(sum_error(drm.download(), rm_ref, rm_mag), kF32)
              << what.str() << " running mean";
          EXPECT_LT(rel_l2(drv.download(), rv_ref), kF32) << what.str() << " running var";
        }
}

TEST(GpuTrain, BatchNormBackwardMatchesReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  const std::vector<BnCase> cases = bn_cases(rng);
  int turn = 0;
  for (Precision p : kStorage)
    for (const BnCase& cs : cases)
      for (Act act : kBnActs)
        for (bool accumulate : {false, true}) {
          const DType t = storage_type(p);
          const int C = cs.d.c;
          const int64_t rows = rows_of(cs.d);
          const int k = turn++;
          const bool strided = k % 2 == 1;
          // The residual's gradient (not with SiLU), written or added, in turn.
          const bool residual = act != Act::SiLU && k % 3 != 0;
          const bool accumulate_dz = residual && k % 4 >= 2;
          std::ostringstream what;
          what << precision_name(p) << " " << cs.d.str() << " act '" << act_name(act) << "'"
               << (accumulate ? " accumulate" : "") << (strided ? " strided" : "")
               << (residual ? (accumulate_dz ? " dz+=" : " dz=") : "");
          const auto x = bn_input(cs, t, rng);
          const auto gamma = random_vector(C, rng, 0.5, 1.5), beta = random_vector(C, rng, -.5, .5);
          const auto dy = rounded(random_vector(size_t(rows) * C, rng), t);
          const auto dx0 = rounded(random_vector(size_t(rows) * C, rng), t);
          const auto dz0 = rounded(random_vector(size_t(rows) * C, rng), t);
          const auto zin = rounded(random_vector(size_t(rows) * C, rng), t);
          // The statistics as the forward left them on the device (fp32), and its output.
          const BnRef fwd = bn_forward_train_ref(to_ref(x), C, to_ref(gamma), to_ref(beta), 1e-5);
          const auto mean = to_float(fwd.mean), invstd = to_float(fwd.invstd);
          // v: the pre-activation from the fp32 statistics, as the kernel recomputes it.
          RefVec v(x.size()), y_out(x.size());
          for (size_t i = 0; i < x.size(); ++i) {
            const int c = int(i % C);
            v[i] = (x[i] - double(mean[c])) * invstd[c] * gamma[c] + beta[c];
            y_out[i] = act_ref(act, v[i] + (residual ? double(zin[i]) : 0.0));
          }
          const auto y = rounded(to_float(y_out), t);
          RefVec dy_in = to_ref(dy);
          if (act == Act::ReLU) dy_in = relu_backward_ref(to_ref(y), to_ref(dy));
          if (act == Act::SiLU) dy_in = silu_backward_ref(v, to_ref(dy));
          BnGradRef ref =
              bn_backward_ref(to_ref(x), dy_in, C, to_ref(gamma), to_ref(mean), to_ref(invstd));
          if (accumulate) ref.dx = add(ref.dx, dx0);
          const RefVec dz_ref = accumulate_dz ? add(dy_in, dz0) : dy_in;
          RefVec xhat(x.size());
          for (size_t i = 0; i < x.size(); ++i)
            xhat[i] = (x[i] - double(mean[i % C])) * invstd[i % C];
          const RefVec dbeta_mag = bias_backward_ref(absolute(dy_in), C);
          const RefVec dgamma_mag = bias_backward_ref(absolute(product(dy_in, xhat)), C);

          Rows bx(rows, C, t, strided ? C + 3 : 0, strided ? 1 : 0);
          Rows by(rows, C, t, strided ? C + 6 : 0, strided ? 5 : 0);
          Rows bdy(rows, C, t, strided ? C + 6 : 0, strided ? 5 : 0);
          Rows bdx(rows, C, t, strided ? C + 3 : 0, strided ? 1 : 0);
          Rows bdz(rows, C, t, strided ? C + 11 : 0, strided ? 3 : 0);
          bx.upload(x), by.upload(y), bdy.upload(dy);
          if (accumulate) bdx.upload(dx0);
          if (accumulate_dz) bdz.upload(dz0);
          DeviceArray<float> dgamma_in(gamma), dbeta_in(beta), dmean(mean), dinvstd(invstd),
              dgamma(C), dbeta(C);
          DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, C));
          BnTrainSpec s;
          s.rows = rows, s.channels = C, s.act = act;
          s.ld_x = bx.ld(), s.ld_y = bdy.ld(), s.ld_z = bdz.ld();
          // y only where the activation needs it (ReLU's mask): SiLU's must not read it.
          launch_bn_backward(t, bx.ptr(), act == Act::ReLU ? by.ptr() : nullptr, bdy.ptr(),
                             bdx.ptr(), dgamma_in.get(), dbeta_in.get(), dmean.get(), dinvstd.get(),
                             dgamma.get(), dbeta.get(), s, accumulate,
                             residual ? bdz.ptr() : nullptr, accumulate_dz, scratch.get(), nullptr);
          int stray = 0;
          EXPECT_LT(rel_l2(bdx.download(&stray), ref.dx), tolerance(p)) << what.str() << " dx";
          EXPECT_EQ(stray, 0) << what.str() << ": wrote outside dx";
          if (residual) {
            EXPECT_LT(rel_l2(bdz.download(&stray), dz_ref), tolerance(p)) << what.str() << " dz";
            EXPECT_EQ(stray, 0) << what.str() << ": wrote outside dz";
          }
          EXPECT_LT(sum_error(dgamma.download(), ref.dgamma, dgamma_mag), kF32)
              << what.str() << " dgamma";
          EXPECT_LT(sum_error(dbeta.download(), ref.dbeta, dbeta_mag), kF32)
              << what.str() << " dbeta";
        }
}

// ReLU's mask recomputed from x (y null, no residual) is the forward's own, bit for bit: the
// backward gives exactly what it gives reading the y the forward wrote, packed (vectorised) and
// strided (per element), in every storage type.
TEST(GpuTrain, BatchNormBackwardReluMaskFromInputIsTheSavedOnes) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  for (Precision p : kStorage)
    for (const BnCase& cs : bn_cases(rng))
      for (bool strided : {false, true}) {
        const DType t = storage_type(p);
        const int C = cs.d.c;
        const int64_t rows = rows_of(cs.d);
        std::ostringstream what;
        what << precision_name(p) << " " << cs.d.str() << (strided ? " strided" : "");
        const auto x = bn_input(cs, t, rng);
        const auto gamma = random_vector(C, rng, 0.5, 1.5), beta = random_vector(C, rng, -.5, .5);
        const auto dy = rounded(random_vector(size_t(rows) * C, rng), t);
        Rows bx(rows, C, t, strided ? C + 3 : 0, strided ? 1 : 0);
        Rows by(rows, C, t, strided ? C + 6 : 0, strided ? 5 : 0);
        Rows bdy(rows, C, t, strided ? C + 6 : 0, strided ? 5 : 0);
        Rows dx_y(rows, C, t, strided ? C + 3 : 0, strided ? 1 : 0);
        Rows dx_x(rows, C, t, strided ? C + 3 : 0, strided ? 1 : 0);
        bx.upload(x), bdy.upload(dy);
        DeviceArray<float> dgamma_in(gamma), dbeta_in(beta), mean(C), invstd(C);
        DeviceArray<float> dg_y(C), db_y(C), dg_x(C), db_x(C);
        DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, C));
        BnTrainSpec s;
        s.rows = rows, s.channels = C, s.act = Act::ReLU;
        s.ld_x = bx.ld(), s.ld_y = by.ld();
        launch_bn_forward_train(t, bx.ptr(), nullptr, by.ptr(), dgamma_in.get(), dbeta_in.get(),
                                mean.get(), invstd.get(), nullptr, nullptr, s, scratch.get(),
                                nullptr);
        s.ld_y = bdy.ld();
        launch_bn_backward(t, bx.ptr(), by.ptr(), bdy.ptr(), dx_y.ptr(), dgamma_in.get(),
                           dbeta_in.get(), mean.get(), invstd.get(), dg_y.get(), db_y.get(), s,
                           false, nullptr, false, scratch.get(), nullptr);
        launch_bn_backward(t, bx.ptr(), nullptr, bdy.ptr(), dx_x.ptr(), dgamma_in.get(),
                           dbeta_in.get(), mean.get(), invstd.get(), dg_x.get(), db_x.get(), s,
                           false, nullptr, false, scratch.get(), nullptr);
        int zeros = 0;
        for (float v : by.download()) zeros += v == 0.f;
        EXPECT_GT(zeros, 0) << what.str() << ": the ReLU masked nothing";
        EXPECT_EQ(dx_x.download(), dx_y.download()) << what.str() << " dx";
        EXPECT_EQ(dg_x.download(), dg_y.download()) << what.str() << " dgamma";
        EXPECT_EQ(db_x.download(), db_y.download()) << what.str() << " dbeta";
      }
  // A residual inside the ReLU cannot be recomputed from x: refused.
  BnTrainSpec s;
  s.rows = 4, s.channels = 8, s.act = Act::ReLU;
  DeviceArray<float> f(64);
  EXPECT_THROW(
      launch_bn_backward(DType::F32, f.get(), nullptr, f.get(), f.get(), nullptr, nullptr, f.get(),
                         f.get(), f.get(), f.get(), s, false, f.get(), false, f.get(), nullptr),
      std::invalid_argument);
}

// ReLU's mask as bits (a fused residual tail's, TrainOp::relu_mask): the forward writes the same
// y with or without them, and a bit per element set exactly where the stored y is positive; the
// backward from the bits gives exactly what it gives reading y (dx, the residual's gradient,
// dgamma, dbeta), written or added, in every storage type, over the vectorised geometries. Bits
// without ReLU, or on rows the vectorised kernels do not take, are refused.
TEST(GpuTrain, BatchNormReluMaskBitsAreTheSavedOnes) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  int compared = 0;
  for (Precision p : kStorage)
    for (const BnCase& cs : bn_cases(rng))
      for (bool accumulate : {false, true}) {
        const DType t = storage_type(p);
        const int C = cs.d.c, V = 16 / int(dtype_size(t));
        if (C % V != 0) continue;
        const int64_t rows = rows_of(cs.d);
        std::ostringstream what;
        what << precision_name(p) << " " << cs.d.str() << (accumulate ? " accumulate" : "");
        const auto x = bn_input(cs, t, rng);
        const auto z = rounded(random_vector(size_t(rows) * C, rng), t);
        const auto gamma = random_vector(C, rng, 0.5, 1.5), beta = random_vector(C, rng, -.5, .5);
        const auto dy = rounded(random_vector(size_t(rows) * C, rng), t);
        const auto dx0 = rounded(random_vector(size_t(rows) * C, rng), t);
        Rows bx(rows, C, t), bz(rows, C, t), by(rows, C, t), by_bits(rows, C, t), bdy(rows, C, t);
        Rows dx_y(rows, C, t), dx_b(rows, C, t), dz_y(rows, C, t), dz_b(rows, C, t);
        bx.upload(x), bz.upload(z), bdy.upload(dy);
        for (Rows* r : {&dx_y, &dx_b, &dz_y, &dz_b}) r->upload(dx0);
        const size_t mask_bytes = size_t(rows) * C / V;
        DeviceArray<uint8_t> mask(mask_bytes);
        DeviceArray<float> dgamma_in(gamma), dbeta_in(beta), mean(C), invstd(C);
        DeviceArray<float> dg_y(C), db_y(C), dg_b(C), db_b(C);
        DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, C));
        BnTrainSpec s;
        s.rows = rows, s.channels = C, s.act = Act::ReLU;
        launch_bn_forward_train(t, bx.ptr(), bz.ptr(), by.ptr(), dgamma_in.get(), dbeta_in.get(),
                                mean.get(), invstd.get(), nullptr, nullptr, s, scratch.get(),
                                nullptr);
        launch_bn_forward_train(t, bx.ptr(), bz.ptr(), by_bits.ptr(), dgamma_in.get(),
                                dbeta_in.get(), mean.get(), invstd.get(), nullptr, nullptr, s,
                                scratch.get(), nullptr, mask.get());
        const std::vector<float> y = by.download();
        EXPECT_EQ(by_bits.download(), y) << what.str() << ": y changed by writing the bits";
        const std::vector<uint8_t> bits = mask.download();
        int wrong = 0, zeros = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          const bool set = (bits[i / V] >> (i % V)) & 1;
          wrong += set != (y[i] > 0.f);
          zeros += y[i] == 0.f;
        }
        EXPECT_EQ(wrong, 0) << what.str() << ": bits unlike y > 0";
        EXPECT_GT(zeros, 0) << what.str() << ": the ReLU masked nothing";
        launch_bn_backward(t, bx.ptr(), by.ptr(), bdy.ptr(), dx_y.ptr(), dgamma_in.get(),
                           dbeta_in.get(), mean.get(), invstd.get(), dg_y.get(), db_y.get(), s,
                           accumulate, dz_y.ptr(), accumulate, scratch.get(), nullptr);
        launch_bn_backward(t, bx.ptr(), nullptr, bdy.ptr(), dx_b.ptr(), dgamma_in.get(),
                           dbeta_in.get(), mean.get(), invstd.get(), dg_b.get(), db_b.get(), s,
                           accumulate, dz_b.ptr(), accumulate, scratch.get(), nullptr, mask.get());
        EXPECT_EQ(dx_b.download(), dx_y.download()) << what.str() << " dx";
        EXPECT_EQ(dz_b.download(), dz_y.download()) << what.str() << " dz";
        EXPECT_EQ(dg_b.download(), dg_y.download()) << what.str() << " dgamma";
        EXPECT_EQ(db_b.download(), db_y.download()) << what.str() << " dbeta";
        ++compared;
      }
  EXPECT_GT(compared, 0);
  // Refused: bits with SiLU; bits on strided rows (the per-element kernels).
  BnTrainSpec s;
  s.rows = 4, s.channels = 8, s.act = Act::SiLU;
  DeviceArray<float> f(256);
  DeviceArray<uint8_t> m(16);
  EXPECT_THROW(
      launch_bn_forward_train(DType::F32, f.get(), nullptr, f.get(), nullptr, nullptr, f.get(),
                              f.get(), nullptr, nullptr, s, f.get(), nullptr, m.get()),
      std::invalid_argument);
  s.act = Act::ReLU, s.ld_x = 12;
  EXPECT_THROW(launch_bn_backward(DType::F32, f.get(), nullptr, f.get(), f.get(), nullptr, nullptr,
                                  f.get(), f.get(), f.get(), f.get(), s, false, f.get(), false,
                                  f.get(), nullptr, m.get()),
               std::invalid_argument);
}

// BatchNorm's sweep orders (bn_sweep, CNNBENCH_BN_SWEEP): every pass walked from the end, or in
// one wave of blocks, gives what the default order gives, bit for bit: y, ReLU's bits, the
// statistics, dx, the residual's gradient, dgamma and dbeta, over the vectorised geometries and a
// tensor of 320,000 rows (more row blocks than fit on the device at once, so the one-wave grid
// is smaller than the default's). A reversed index that skipped or repeated a row, or a chunk
// whose partials moved, changes some of them. Bad bits are refused.
TEST(GpuTrain, BatchNormSweepOrdersChangeNoBit) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  struct Restore {
    int bits = set_bn_sweep(0);
    ~Restore() { set_bn_sweep(bits); }
  } restore;
  std::vector<BnCase> cases;
  for (const BnCase& cs : bn_cases(rng))
    if (cs.d.c % 8 == 0) cases.push_back(cs);
  cases.push_back({{8, 64, 200, 200}, 1.0});
  int compared = 0;
  for (Precision p : kStorage)
    for (const BnCase& cs : cases)
      for (Act act : {Act::ReLU, Act::SiLU}) {
        const DType t = storage_type(p);
        const int C = cs.d.c, V = 16 / int(dtype_size(t));
        const int64_t rows = rows_of(cs.d);
        if (C % V != 0 || (rows > 100000 && p != Precision::FP16)) continue;
        const bool relu = act == Act::ReLU;
        std::ostringstream what;
        what << precision_name(p) << " " << cs.d.str() << " " << act_name(act);
        const size_t n = size_t(rows) * C, mask_bytes = relu ? n / V : 1;
        const auto x = bn_input(cs, t, rng);
        const auto z = rounded(random_vector(n, rng), t);
        const auto dy = rounded(random_vector(n, rng), t);
        const auto gamma = random_vector(C, rng, 0.5, 1.5), beta = random_vector(C, rng, -.5, .5);
        Rows bx(rows, C, t), bz(rows, C, t), bdy(rows, C, t), by(rows, C, t), bdx(rows, C, t),
            bdz(rows, C, t);
        bx.upload(x), bz.upload(z), bdy.upload(dy);
        DeviceArray<float> g(gamma), b(beta), mean(C), invstd(C), dg(C), db(C);
        DeviceArray<uint8_t> mask(mask_bytes), scratch(channel_reduce_scratch_bytes(rows, C));
        BnTrainSpec s;
        s.rows = rows, s.channels = C, s.act = act;
        struct Out {
          std::vector<float> y, dx, dz, mean, invstd, dg, db;
          std::vector<uint8_t> bits;
        };
        auto run = [&](int bits) {
          set_bn_sweep(bits);
          // ReLU with a residual inside and the bits; SiLU (no residual with its backward).
          launch_bn_forward_train(t, bx.ptr(), relu ? bz.ptr() : nullptr, by.ptr(), g.get(),
                                  b.get(), mean.get(), invstd.get(), nullptr, nullptr, s,
                                  scratch.get(), nullptr, relu ? mask.get() : nullptr);
          launch_bn_backward(t, bx.ptr(), nullptr, bdy.ptr(), bdx.ptr(), g.get(), b.get(),
                             mean.get(), invstd.get(), dg.get(), db.get(), s, false,
                             relu ? bdz.ptr() : nullptr, false, scratch.get(), nullptr,
                             relu ? mask.get() : nullptr);
          Out o;
          o.y = by.download(), o.dx = bdx.download(), o.mean = mean.download();
          o.invstd = invstd.download(), o.dg = dg.download(), o.db = db.download();
          if (relu) o.dz = bdz.download(), o.bits = mask.download();
          return o;
        };
        const Out ref = run(0);
        for (int bits :
             std::initializer_list<int>{kBnSweepStats, kBnSweepApply, kBnSweepSums, kBnSweepDx,
                                        kBnSweepOneWave, kBnSweepDefault, kBnSweepAll}) {
          const Out o = run(bits);
          const std::string at = what.str() + " sweep " + std::to_string(bits);
          EXPECT_EQ(o.y, ref.y) << at << " y";
          EXPECT_EQ(o.bits, ref.bits) << at << " ReLU's bits";
          EXPECT_EQ(o.mean, ref.mean) << at << " mean";
          EXPECT_EQ(o.invstd, ref.invstd) << at << " invstd";
          EXPECT_EQ(o.dx, ref.dx) << at << " dx";
          EXPECT_EQ(o.dz, ref.dz) << at << " dz";
          EXPECT_EQ(o.dg, ref.dg) << at << " dgamma";
          EXPECT_EQ(o.db, ref.db) << at << " dbeta";
          ++compared;
        }
      }
  EXPECT_GT(compared, 0);
  EXPECT_THROW(set_bn_sweep(kBnSweepAll + 1), std::invalid_argument);
  EXPECT_THROW(set_bn_sweep(-1), std::invalid_argument);
}

// ReLU's mask recomputed from x at the rounding thresholds (stored_positive's compare on the
// device): each channel is constant, so its mean is its value, x - mean is 0 and the forward's
// pre-activation is beta exactly; the betas sit at half each type's smallest subnormal (2^-25
// fp16, 2^-134 bf16) and one float ulp either side, and about them. The forward's y must be
// positive exactly where the host's round trip of beta is (so that the boundary is reached), its
// bits must agree, and the backward must give the same bits from y, from the bits and from x,
// written and added. A threshold off by one ulp, or 0, changes dx at one channel.
TEST(GpuTrain, BatchNormReluMaskFromInputAtTheRoundingThresholds) {
  std::mt19937 rng(11);
  int boundary_channels = 0;
  for (Precision p : kStorage) {
    const DType t = storage_type(p);
    const int V = 16 / int(dtype_size(t)), C = 16;
    const float th = t == DType::F16 ? 0x1p-25f : t == DType::BF16 ? 0x1p-134f : 0x1p-149f;
    std::vector<float> beta = {th,
                               std::nextafter(th, 1.0f),
                               std::nextafter(th, 0.0f),
                               2 * th,
                               1.5f * th,
                               0.5f * th,
                               0.0f,
                               -th,
                               -std::nextafter(th, 1.0f),
                               3 * th,
                               std::nextafter(2 * th, 0.0f),
                               1e-3f,
                               -1e-3f,
                               std::nextafter(0.0f, 1.0f),
                               th,
                               std::nextafter(th, 1.0f)};
    std::vector<float> expect_pos(C);
    const std::vector<float> back = from_storage(to_storage(beta, t), t);
    for (int c = 0; c < C; ++c) expect_pos[c] = back[c] > 0.0f ? 1.0f : 0.0f;
    const int64_t rows = 96;
    std::vector<float> x(size_t(rows) * C);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f + 0.125f * float(i % C);  // exact in all
    const auto gamma = std::vector<float>(C, 1.0f);
    const auto dy = rounded(random_vector(size_t(rows) * C, rng), t);
    const auto dx0 = rounded(random_vector(size_t(rows) * C, rng), t);
    for (bool accumulate : {false, true}) {
      std::ostringstream what;
      what << precision_name(p) << (accumulate ? " accumulate" : "");
      Rows bx(rows, C, t), by(rows, C, t), bdy(rows, C, t), dx_y(rows, C, t), dx_b(rows, C, t),
          dx_x(rows, C, t);
      bx.upload(x), bdy.upload(dy);
      for (Rows* r : {&dx_y, &dx_b, &dx_x}) r->upload(dx0);
      DeviceArray<uint8_t> mask(size_t(rows) * C / V);
      DeviceArray<float> dgamma_in(gamma), dbeta_in(beta), mean(C), invstd(C);
      DeviceArray<float> dg_y(C), db_y(C), dg_b(C), db_b(C), dg_x(C), db_x(C);
      DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, C));
      BnTrainSpec s;
      s.rows = rows, s.channels = C, s.act = Act::ReLU;
      launch_bn_forward_train(t, bx.ptr(), nullptr, by.ptr(), dgamma_in.get(), dbeta_in.get(),
                              mean.get(), invstd.get(), nullptr, nullptr, s, scratch.get(), nullptr,
                              mask.get());
      const std::vector<float> y = by.download();
      const std::vector<uint8_t> bits = mask.download();
      int wrong_y = 0, wrong_bits = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        wrong_y += (y[i] > 0.0f ? 1.0f : 0.0f) != expect_pos[i % C];
        wrong_bits += bool((bits[i / V] >> (i % V)) & 1) != (y[i] > 0.0f);
      }
      ASSERT_EQ(wrong_y, 0) << what.str() << ": y is not relu(beta) rounded (the case misses the "
                            << "boundary it is for)";
      EXPECT_EQ(wrong_bits, 0) << what.str() << ": bits unlike y > 0";
      launch_bn_backward(t, bx.ptr(), by.ptr(), bdy.ptr(), dx_y.ptr(), dgamma_in.get(),
                         dbeta_in.get(), mean.get(), invstd.get(), dg_y.get(), db_y.get(), s,
                         accumulate, nullptr, false, scratch.get(), nullptr);
      launch_bn_backward(t, bx.ptr(), nullptr, bdy.ptr(), dx_b.ptr(), dgamma_in.get(),
                         dbeta_in.get(), mean.get(), invstd.get(), dg_b.get(), db_b.get(), s,
                         accumulate, nullptr, false, scratch.get(), nullptr, mask.get());
      launch_bn_backward(t, bx.ptr(), nullptr, bdy.ptr(), dx_x.ptr(), dgamma_in.get(),
                         dbeta_in.get(), mean.get(), invstd.get(), dg_x.get(), db_x.get(), s,
                         accumulate, nullptr, false, scratch.get(), nullptr);
      const std::vector<float> ref = dx_y.download();
      EXPECT_EQ(dx_b.download(), ref) << what.str() << " dx from the bits";
      EXPECT_EQ(dx_x.download(), ref) << what.str() << " dx from x";
      EXPECT_EQ(db_x.download(), db_y.download()) << what.str() << " dbeta from x";
      EXPECT_EQ(db_b.download(), db_y.download()) << what.str() << " dbeta from the bits";
      EXPECT_EQ(dg_x.download(), dg_y.download()) << what.str() << " dgamma from x";
    }
    for (int c = 0; c < C; ++c) boundary_channels += expect_pos[c] == 0.0f && beta[c] > 0.0f;
  }
  // Positive betas that round to zero were there (the thresholds were met from below).
  EXPECT_GE(boundary_channels, 6);
}

// A residual gradient with SiLU is refused (SiLU's derivative is taken at bn(x), without z).
TEST(GpuTrain, BatchNormBackwardRefusesSiluWithResidual) {
  BnTrainSpec s;
  s.rows = 4, s.channels = 8, s.act = Act::SiLU;
  DeviceArray<float> f(64);
  EXPECT_THROW(
      launch_bn_backward(DType::F32, f.get(), nullptr, f.get(), f.get(), nullptr, nullptr, f.get(),
                         f.get(), f.get(), f.get(), s, false, f.get(), false, f.get(), nullptr),
      std::invalid_argument);
}

// ---- Softmax cross-entropy ---------------------------------------------------------------------

TEST(GpuTrain, SoftmaxCrossEntropyMatchesReferenceAndRepeats) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> batch(2, 80);
  struct Case {
    int batch, classes;
  };
  const Case cases[] = {{batch(rng), 10}, {batch(rng), 1000}, {3, 2}, {70, 37}, {9, 200}};
  for (Precision p : kStorage)
    for (const Case& cs : cases)
      for (bool scaled : {false, true}) {
        const DType t = storage_type(p);
        std::ostringstream what;
        what << precision_name(p) << " batch " << cs.batch << " classes " << cs.classes
             << (scaled ? " loss-scaled" : "");
        const double weight = scaled ? 0.4 : 1.0;
        const float loss_scale = 1024.0f;
        const auto logits = rounded(random_vector(size_t(cs.batch) * cs.classes, rng, -6, 6), t);
        std::vector<int> labels(cs.batch);
        std::uniform_int_distribution<int> label(0, cs.classes - 1);
        for (int& l : labels) l = label(rng);
        XentRef ref = softmax_xent_ref(to_ref(logits), labels, cs.classes, weight);
        if (scaled)
          for (double& v : ref.dlogits) v *= loss_scale;

        DeviceBuffer dz(logits, t), ddz(logits.size(), t);
        DeviceArray<int> dlabels(labels);
        DeviceArray<float> loss(1), dscale(std::vector<float>{loss_scale});
        DeviceArray<uint8_t> scratch(xent_scratch_bytes(cs.batch));
        scratch.zero();
        auto run = [&] {
          launch_softmax_xent(t, dz.get(), dlabels.get(), cs.batch, cs.classes, weight,
                              scaled ? dscale.get() : nullptr, loss.get(), ddz.get(), scratch.get(),
                              nullptr);
        };
        run();
        const float got = loss.download()[0];
        // A row the model gets right by a wide margin has a loss near zero that fp32 log-sum-exp
        // holds only to about 1e-7 absolute, so the error is taken relative to the loss or to
        // its weight, whichever is larger.
        EXPECT_LT(std::abs(got - ref.loss), kF32 * std::max(std::abs(ref.loss), weight))
            << what.str() << " loss";
        const auto grad = ddz.download();
        EXPECT_LT(rel_l2(grad, ref.dlogits), tolerance(p)) << what.str() << " dlogits";
        // Again, outputs poisoned: the same bits (the block counter reset itself).
        ddz.poison();
        CNN_CHECK_CUDA(cudaMemset(loss.get(), 0xFF, sizeof(float)));
        run();
        EXPECT_EQ(loss.download()[0], got) << what.str() << ": a second run's loss differs";
        EXPECT_TRUE(ddz.download() == grad) << what.str() << ": a second run's dlogits differ";
      }
}

// ---- Elementwise backward ----------------------------------------------------------------------

TEST(GpuTrain, ActivationBackwardMatchesReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  for (Precision p : kStorage)
    for (Act act : {Act::None, Act::ReLU, Act::Sigmoid, Act::SiLU})
      for (const Layout& lay : kLayouts)
        for (bool accumulate : {false, true})
          for (int C : {19, 64}) {
            const DType t = storage_type(p);
            const Dims d = random_dims(rng, C);
            const int64_t rows = rows_of(d);
            const size_t n = size_t(rows) * C;
            std::ostringstream what;
            what << precision_name(p) << " " << (act == Act::None ? "identity" : act_name(act))
                 << " " << lay.name << (accumulate ? " accumulate" : "") << " " << d.str();
            // What the forward saved: ReLU's and sigmoid's output (zeros included), SiLU's input.
            const auto pre = random_vector(n, rng, -4, 4);
            std::vector<float> saved(n);
            for (size_t i = 0; i < n; ++i)
              saved[i] = act == Act::SiLU ? pre[i] : float(act_ref(act, pre[i]));
            saved = rounded(saved, t);
            const auto dy = rounded(random_vector(n, rng), t);
            const auto dx0 = rounded(random_vector(n, rng), t);
            RefVec ref;
            switch (act) {
              case Act::ReLU:
                ref = relu_backward_ref(to_ref(saved), to_ref(dy));
                break;
              case Act::Sigmoid:
                ref = sigmoid_backward_ref(to_ref(saved), to_ref(dy));
                break;
              case Act::SiLU:
                ref = silu_backward_ref(to_ref(saved), to_ref(dy));
                break;
              default:
                ref = to_ref(dy);
            }
            if (accumulate) ref = add(ref, dx0);
            Rows bs(rows, C, t, ld_for(lay, C), lay.off), bdy(rows, C, t, ld_for(lay, C), lay.off);
            Rows bdx(rows, C, t, ld_for(lay, C) ? ld_for(lay, C) + 2 : 0, lay.off);
            bs.upload(saved), bdy.upload(dy);
            if (accumulate) bdx.upload(dx0);
            GradLayout l;
            l.rows = rows, l.channels = C, l.ld_dx = bdx.ld(), l.ld_saved = bs.ld();
            l.ld_dy = bdy.ld();
            launch_act_backward(t, act, bs.ptr(), bdy.ptr(), bdx.ptr(), l, accumulate, nullptr);
            int stray = 0;
            EXPECT_LT(rel_l2(bdx.download(&stray), ref), tolerance(p)) << what.str();
            EXPECT_EQ(stray, 0) << what.str() << ": wrote outside dx";
          }
}

TEST(GpuTrain, GradientAddAndBiasGradientMatchReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  for (Precision p : kStorage) {
    const DType t = storage_type(p);
    for (const Layout& lay : kLayouts)
      for (int C : kChannels) {
        const Dims d = random_dims(rng, C);
        const int64_t rows = rows_of(d);
        const size_t n = size_t(rows) * C;
        std::ostringstream what;
        what << precision_name(p) << " " << lay.name << " " << d.str();
        const auto a = rounded(random_vector(n, rng), t), b = rounded(random_vector(n, rng), t);
        const int ld = ld_for(lay, C);
        Rows dst(rows, C, t, ld, lay.off), src(rows, C, t, ld ? ld + 1 : 0, lay.off);
        dst.upload(a), src.upload(b);
        launch_grad_add(t, dst.ptr(), dst.ld(), src.ptr(), src.ld(), rows, C, nullptr);
        int stray = 0;
        EXPECT_LT(rel_l2(dst.download(&stray), add(to_ref(a), b)), tolerance(p))
            << what.str() << " add";
        EXPECT_EQ(stray, 0) << what.str() << ": the add wrote outside dst";
        DeviceArray<float> db(C);
        DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, C));
        launch_bias_backward(t, src.ptr(), src.ld(), db.get(), rows, C, scratch.get(), nullptr);
        EXPECT_LT(sum_error(db.download(), bias_backward_ref(to_ref(b), C),
                            bias_backward_ref(absolute(to_ref(b)), C)),
                  kF32)
            << what.str() << " bias";
      }
    // Many rows: hundreds of chunks.
    const int64_t rows = 3 * 57 * 59;
    const auto dy = rounded(random_vector(size_t(rows) * 40, rng), t);
    DeviceBuffer ddy(dy, t);
    DeviceArray<float> db(40);
    DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, 40));
    launch_bias_backward(t, ddy.get(), 0, db.get(), rows, 40, scratch.get(), nullptr);
    EXPECT_LT(sum_error(db.download(), bias_backward_ref(to_ref(dy), 40),
                        bias_backward_ref(absolute(to_ref(dy)), 40)),
              kF32)
        << precision_name(p) << " bias over " << rows << " rows";
  }
}

// ---- Pooling backward --------------------------------------------------------------------------

namespace {

struct PoolCase {
  int kernel, stride, pad;
};
// ResNet's stem (3/2 pad 1), VGG's 2/2, a stride-1 3x3 with padding (Inception's branch pools),
// AlexNet's overlapping 3/2, a 5/3 pad 2, and a 1x1 stride 2 that leaves inputs out of every
// window.
const PoolCase kPools[] = {{3, 2, 1}, {2, 2, 0}, {3, 1, 1}, {3, 2, 0}, {5, 3, 2}, {1, 2, 0}};

PoolSpec spec_of(const PoolGeom& g) {
  PoolSpec s;
  s.x = g.x, s.y = g.y, s.kernel = g.kernel, s.stride = g.stride, s.pad = g.pad;
  s.count_include_pad = g.count_include_pad;
  return s;
}

Dims pool_dims(std::mt19937& rng, int channels, const PoolCase& pc) {
  Dims d = random_dims(rng, channels);
  d.h = std::max(d.h, pc.kernel), d.w = std::max(d.w, pc.kernel);
  return d;
}

}  // namespace

TEST(GpuTrain, MaxPoolBackwardRoutesToTheFirstMaximum) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  for (Precision p : kStorage)
    for (const PoolCase& pc : kPools)
      for (bool ties : {false, true})
        for (int C : {3, 35, 16, 40}) {  // 16, 40: packed, the vectorised kernel
          const DType t = storage_type(p);
          const Dims d = pool_dims(rng, C, pc);
          const PoolGeom g = pool_geom(d, pc.kernel, pc.stride, pc.pad);
          const bool strided = ties && C % 8 != 0, accumulate = C == 35 || C == 40;
          std::ostringstream what;
          what << precision_name(p) << " " << d.str() << " k" << pc.kernel << " s" << pc.stride
               << " p" << pc.pad << (ties ? " ties" : "") << (strided ? " strided" : "")
               << (accumulate ? " accumulate" : "");
          // Ties: values from {-1, 0, 1}, so most windows hold several maxima (and some are all
          // equal); the gradient must reach the first in scan order only.
          std::vector<float> x = random_vector(size_t(d.numel()), rng, -2, 2);
          if (ties)
            for (float& v : x) v = std::round(v / 2);
          x = rounded(x, t);
          const auto dy = rounded(random_vector(size_t(g.y.numel()), rng), t);
          const auto dx0 = rounded(random_vector(size_t(d.numel()), rng), t);
          RefVec ref = maxpool_backward_ref(to_ref(x), to_ref(dy), g);
          if (accumulate) ref = add(ref, dx0);
          const int64_t in_rows = rows_of(d), out_rows = rows_of(g.y);
          Rows bx(in_rows, C, t, strided ? C + 4 : 0, strided ? 3 : 0);
          Rows bdx(in_rows, C, t, strided ? C + 4 : 0, strided ? 3 : 0);
          Rows bdy(out_rows, C, t, strided ? C + 7 : 0, strided ? 2 : 0);
          bx.upload(x), bdy.upload(dy);
          if (accumulate) bdx.upload(dx0);
          PoolSpec s = spec_of(g);
          s.ld_x = bx.ld(), s.ld_y = bdy.ld();
          launch_maxpool_backward(t, bx.ptr(), bdy.ptr(), bdx.ptr(), s, accumulate, nullptr);
          int stray = 0;
          EXPECT_LT(rel_l2(bdx.download(&stray), ref), tolerance(p)) << what.str();
          EXPECT_EQ(stray, 0) << what.str() << ": wrote outside dx";
        }
}

// The stem pool's training form (launch_maxpool_forward_places, launch_maxpool_backward_places):
// y bit for bit launch_maxpool's, the places the host threads' (maxpool_k3s2p1_forward_places_
// emulate), and dx from the places bit for bit launch_maxpool_backward's from x, with ties, ±0,
// ±inf and NaN, odd and even sizes, accumulate.
TEST(GpuTrain, MaxPoolPlacesGiveTheBackwardFromXBitForBit) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  int checked = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int hw : {9, 16, 17})
      for (int values : {0, 1, 2})  // uniform; ties from {-1, 0, 1}; with ±0, ±inf and NaN
        for (bool accumulate : {false, true}) {
          const int C = t == DType::F32 ? 12 : 24;
          const Dims d{3, C, hw, hw + 3};
          const StemPoolCase pc = stem_pool_case(t, d, values, rng);
          const PoolGeom& g = pc.g;
          const PoolSpec& s = pc.s;
          ASSERT_TRUE(maxpool_places_apply(t, s));
          const std::vector<uint8_t>&xs = pc.x, &dys = pc.dy, &dx0s = pc.dx0;
          std::ostringstream what;
          what << dtype_name(t) << " " << d.str() << " values " << values
               << (accumulate ? " accumulate" : "");
          DeviceArray<uint8_t> bx(xs), bdy(dys), by(size_t(g.y.numel()) * dtype_size(t)),
              by_ref(size_t(g.y.numel()) * dtype_size(t)), bpl(maxpool_places_bytes(s)), bdx(dx0s),
              bdx_ref(dx0s);
          launch_maxpool_forward_places(t, bx.get(), by.get(), bpl.get(), s, nullptr);
          launch_maxpool(t, bx.get(), by_ref.get(), s, nullptr);
          EXPECT_EQ(by.download(), by_ref.download()) << what.str() << ": y";
          std::vector<uint8_t> ys(size_t(g.y.numel()) * dtype_size(t)), pl(bpl.size());
          maxpool_k3s2p1_forward_places_emulate(t, xs.data(), ys.data(), pl.data(), s);
          EXPECT_EQ(bpl.download(), pl) << what.str() << ": places";
          if (!accumulate) {  // dx must be overwritten
            bdx.upload(std::vector<uint8_t>(dx0s.size(), 0xFF));
            bdx_ref.upload(std::vector<uint8_t>(dx0s.size(), 0xFF));
          }
          launch_maxpool_backward_places(t, bpl.get(), bdy.get(), bdx.get(), s, accumulate,
                                         nullptr);
          launch_maxpool_backward(t, bx.get(), bdy.get(), bdx_ref.get(), s, accumulate, nullptr);
          const std::vector<uint8_t> got = bdx.download();
          EXPECT_EQ(got, bdx_ref.download()) << what.str() << ": dx";
          // And the reference's routing (maxpool_backward_ref), to fp16's rounding.
          RefVec ref =
              maxpool_backward_ref(to_ref(from_storage(xs, t)), to_ref(from_storage(dys, t)), g);
          if (accumulate) ref = add(ref, from_storage(dx0s, t));
          EXPECT_LT(rel_l2(from_storage(got, t), ref), t == DType::F32 ? 1e-6 : 4e-3) << what.str();
          ++checked;
        }
  EXPECT_EQ(checked, 54);
}

// A device float array's bit patterns, for comparisons that must hold over NaN too.
static std::vector<uint32_t> float_bits(const DeviceArray<float>& a) {
  const std::vector<float> v = a.download();
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

// The stem's BatchNorm + ReLU fused into its pool (launch_bn_relu_maxpool_forward_places after a
// statistics-only launch_bn_forward_train) against the BatchNorm's apply followed by the pool with
// places: the same pooled y, places, batch statistics and running statistics, bit for bit, and
// the same as the host threads'; over ties, ±0, ±inf and NaN, with and without gamma and beta.
// A statistics-only forward with a residual or a mask is refused.
TEST(GpuTrain, BatchNormReluFusedIntoThePoolGivesTheSameBits) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  int checked = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int hw : {9, 16, 17})
      for (int values : {0, 1, 2})
        for (bool affine : {false, true}) {
          const int C = t == DType::F32 ? 12 : 24;
          const Dims d{3, C, hw, hw + 3};
          const StemPoolCase pc = stem_pool_case(t, d, values, rng);
          const PoolSpec& s = pc.s;
          std::ostringstream what;
          what << dtype_name(t) << " " << d.str() << " values " << values
               << (affine ? " affine" : "");
          const std::vector<float> gamma = random_vector(C, rng, 0.5, 1.5),
                                   beta = random_vector(C, rng, -.5, .5);
          const size_t ybytes = size_t(pc.g.y.numel()) * dtype_size(t);
          DeviceArray<uint8_t> bx(pc.x), ba(pc.x.size()), by_two(ybytes), by_one(ybytes),
              pl_two(maxpool_places_bytes(s)), pl_one(maxpool_places_bytes(s));
          DeviceArray<float> g(gamma), b(beta), mean_two(C), is_two(C), mean_one(C), is_one(C);
          const std::vector<float> r0 = random_vector(C, rng, -.1, .1),
                                   v0 = random_vector(C, rng, 0.5, 1.5);
          DeviceArray<float> rm_two(r0), rv_two(v0), rm_one(r0), rv_one(v0);
          const int64_t rows = int64_t(d.n) * d.h * d.w;
          DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(rows, C));
          BnTrainSpec bs;
          bs.rows = rows, bs.channels = C, bs.act = Act::ReLU;
          const float* ga = affine ? g.get() : nullptr;
          const float* be = affine ? b.get() : nullptr;
          launch_bn_forward_train(t, bx.get(), nullptr, ba.get(), ga, be, mean_two.get(),
                                  is_two.get(), rm_two.get(), rv_two.get(), bs, scratch.get(),
                                  nullptr);
          launch_maxpool_forward_places(t, ba.get(), by_two.get(), pl_two.get(), s, nullptr);
          launch_bn_forward_train(t, bx.get(), nullptr, nullptr, ga, be, mean_one.get(),
                                  is_one.get(), rm_one.get(), rv_one.get(), bs, scratch.get(),
                                  nullptr);
          launch_bn_relu_maxpool_forward_places(t, bx.get(), mean_one.get(), is_one.get(), ga, be,
                                                by_one.get(), pl_one.get(), s, nullptr);
          const std::vector<uint8_t> y = by_one.download(), pl = pl_one.download();
          EXPECT_EQ(y, by_two.download()) << what.str() << ": y";
          EXPECT_EQ(pl, pl_two.download()) << what.str() << ": places";
          // As bits: "values 2" puts NaN into channels, whose statistics are NaN both ways, and a
          // float NaN never compares equal (call 140 failed on exactly these 72 comparisons).
          EXPECT_EQ(float_bits(mean_one), float_bits(mean_two)) << what.str() << ": mean";
          EXPECT_EQ(float_bits(is_one), float_bits(is_two)) << what.str() << ": invstd";
          EXPECT_EQ(float_bits(rm_one), float_bits(rm_two)) << what.str() << ": running mean";
          EXPECT_EQ(float_bits(rv_one), float_bits(rv_two)) << what.str() << ": running var";
          // The host threads from the device's statistics: the same bits.
          const std::vector<float> mh = mean_one.download(), ih = is_one.download();
          std::vector<uint8_t> yh(ybytes), plh(pl.size());
          bn_relu_maxpool_k3s2p1_forward_places_emulate(
              t, pc.x.data(), mh.data(), ih.data(), affine ? gamma.data() : nullptr,
              affine ? beta.data() : nullptr, yh.data(), plh.data(), s);
          EXPECT_EQ(y, yh) << what.str() << ": y against the host threads";
          EXPECT_EQ(pl, plh) << what.str() << ": places against the host threads";
          ++checked;
        }
  EXPECT_EQ(checked, 54);
  BnTrainSpec bs;
  bs.rows = 4, bs.channels = 8, bs.act = Act::ReLU;
  DeviceArray<float> f(256);
  DeviceArray<uint8_t> m(16);
  EXPECT_THROW(launch_bn_forward_train(DType::F32, f.get(), f.get(), nullptr, nullptr, nullptr,
                                       f.get(), f.get(), nullptr, nullptr, bs, f.get(), nullptr),
               std::invalid_argument);
  EXPECT_THROW(
      launch_bn_forward_train(DType::F32, f.get(), nullptr, nullptr, nullptr, nullptr, f.get(),
                              f.get(), nullptr, nullptr, bs, f.get(), nullptr, m.get()),
      std::invalid_argument);
}

// The stem's weight gradient kernel (kernels/stem_wgrad.h) against its host threads and the
// direct loops: ResNet's stem at batch 2 (224x224: a tile a row of 112, 224 tiles over the
// kernel's blocks, one each), the same over 5 blocks (45 tiles each: the next tile's dy and rows
// loaded while one computes, and the ring filled whole at the second image), a small 3x3/1 conv of
// 4 channels (a ring of 4 rows), a 3x3/3 one (no rows shared) and a 3x3/2 one into 16 outputs (the
// ring, and ldmatrix's x2 form), fp16 and bf16, dw overwritten and accumulated; the scratch's
// first bytes after the partial sums untouched.
TEST(GpuTrain, StemWgradMatchesItsHostCodeAndTheReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  struct Case {
    Dims x;
    int K, kernel, stride, pad, max_blocks;
  };
  const Case cases[] = {{{2, 3, 224, 224}, 64, 7, 2, 3, 0}, {{2, 3, 224, 224}, 64, 7, 2, 3, 5},
                        {{3, 4, 10, 13}, 32, 3, 1, 1, 0},   {{3, 4, 10, 13}, 32, 3, 1, 1, 4},
                        {{2, 3, 30, 30}, 16, 3, 3, 0, 3},   {{2, 3, 30, 30}, 16, 3, 2, 1, 3}};
  for (DType t : {DType::F16, DType::BF16})
    for (const Case& c : cases)
      for (bool accumulate : {false, true}) {
        const ConvGeom g = conv_geom(c.x, c.K, c.kernel, c.kernel, c.stride, c.pad, c.pad);
        StemWgradSpec s;
        s.x = g.x, s.y = g.y, s.kernel = c.kernel, s.stride = c.stride, s.pad = c.pad;
        s.accumulate = accumulate, s.max_blocks = c.max_blocks;
        const StemWgradGeometry geo = stem_wgrad_geometry(s);
        std::vector<float> x = random_vector(size_t(g.x.numel()), rng, -1, 1);
        std::vector<float> dy = random_vector(size_t(g.y.numel()), rng, -1, 1);
        const std::vector<uint8_t> xs = to_storage(x, t), dys = to_storage(dy, t);
        x = from_storage(xs, t), dy = from_storage(dys, t);
        const size_t n = size_t(c.K) * c.kernel * c.kernel * c.x.c;
        const std::vector<float> dw0 = random_vector(n, rng, -1, 1);
        std::vector<float> host = dw0;
        stem_wgrad_emulate(t, xs.data(), dys.data(), host.data(), s);
        DeviceArray<uint8_t> bx(xs), bdy(dys);
        DeviceArray<float> bdw(dw0), scratch(geo.scratch / sizeof(float) + 64);
        launch_stem_wgrad(t, bx.get(), bdy.get(), bdw.get(), s, scratch.get(), nullptr);
        const std::vector<float> got = bdw.download();
        std::ostringstream what;
        what << dtype_name(t) << " " << g.x.str() << " -> " << g.y.str() << ", " << geo.blocks
             << " blocks" << (accumulate ? ", accumulate" : "");
        // A block sums its tiles' products in fp32 (the mma's accumulators), the host in another
        // order: the difference grows with the square root of a block's sum. One tile a block
        // (112 pixels) stays under 1e-5; 45 tiles a block (5,040 pixels) measured 1.17e-5 on an
        // H100 (call 116). A wrong tap, tile or row is off by 1e-3 or more.
        const double terms = double((geo.tiles + geo.blocks - 1) / geo.blocks) * kStemWgradPix;
        const double tol = std::max(1e-5, 4e-7 * std::sqrt(terms));
        EXPECT_LT(rel_l2(got, to_ref(host)), tol) << what.str() << ": against the host threads";
        RefVec ref = conv_backward_filter_ref(to_ref(x), to_ref(dy), g);
        if (accumulate) ref = add(ref, dw0);
        EXPECT_LT(rel_l2(got, ref), tol) << what.str() << ": against the reference";
        const std::vector<float> tail = scratch.download();
        int touched = 0;
        for (size_t i = geo.scratch / sizeof(float); i < tail.size(); ++i)
          touched += !std::isnan(tail[i]);  // poisoned 0xFF: NaN
        EXPECT_EQ(touched, 0) << what.str() << ": wrote past the partial sums";
      }
}

// The new launchers refuse what they cannot serve before launching anything: buffers misaligned
// for their word loads and stores, and shapes outside their kernels.
TEST(GpuTrain, PlacesAndStemWgradRefuseMisalignedBuffers) {
  DeviceArray<uint8_t> buf(1 << 20);
  char* base = reinterpret_cast<char*>(buf.get());
  PoolSpec s;
  s.x = {1, 8, 8, 8}, s.y = {1, 8, 4, 4}, s.kernel = 3, s.stride = 2, s.pad = 1;
  uint8_t* pl = reinterpret_cast<uint8_t*>(base + 4096);
  EXPECT_THROW(launch_maxpool_forward_places(DType::F16, base + 2, base + 8192, pl, s, nullptr),
               std::invalid_argument);
  EXPECT_THROW(
      launch_maxpool_backward_places(DType::F16, pl + 4, base, base + 8192, s, false, nullptr),
      std::invalid_argument);
  StemWgradSpec w;
  w.x = {1, 3, 16, 16}, w.y = {1, 64, 8, 8};
  EXPECT_THROW(launch_stem_wgrad(DType::F16, base + 2, base + 8192,
                                 reinterpret_cast<float*>(base + 16384), w, base + 65536, nullptr),
               std::invalid_argument);
  EXPECT_THROW(launch_stem_wgrad(DType::F16, base, base + 8192,
                                 reinterpret_cast<float*>(base + 16384), w, base + 65540, nullptr),
               std::invalid_argument);
  EXPECT_THROW(launch_stem_wgrad(DType::F16, base, base + 8196,  // dy: 16-byte copies
                                 reinterpret_cast<float*>(base + 16384), w, base + 65536, nullptr),
               std::invalid_argument);
  EXPECT_THROW(launch_stem_wgrad(DType::F32, base, base + 8192,
                                 reinterpret_cast<float*>(base + 16384), w, base + 65536, nullptr),
               std::invalid_argument);
  CNN_CHECK_CUDA(cudaDeviceSynchronize());  // and nothing was launched that failed
}

TEST(GpuTrain, AvgPoolBackwardMatchesReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  for (Precision p : kStorage)
    for (const PoolCase& pc : kPools)
      for (bool include_pad : {true, false})
        for (int C : {3, 35}) {
          const DType t = storage_type(p);
          const Dims d = pool_dims(rng, C, pc);
          const PoolGeom g = pool_geom(d, pc.kernel, pc.stride, pc.pad, include_pad);
          const bool strided = include_pad, accumulate = C == 35;
          std::ostringstream what;
          what << precision_name(p) << " " << d.str() << " k" << pc.kernel << " s" << pc.stride
               << " p" << pc.pad << (include_pad ? " count_include_pad" : "")
               << (strided ? " strided" : "") << (accumulate ? " accumulate" : "");
          const auto dy = rounded(random_vector(size_t(g.y.numel()), rng), t);
          const auto dx0 = rounded(random_vector(size_t(d.numel()), rng), t);
          RefVec ref = avgpool_backward_ref(to_ref(dy), g);
          if (accumulate) ref = add(ref, dx0);
          Rows bdx(rows_of(d), C, t, strided ? C + 4 : 0, strided ? 3 : 0);
          Rows bdy(rows_of(g.y), C, t, strided ? C + 7 : 0, strided ? 2 : 0);
          bdy.upload(dy);
          if (accumulate) bdx.upload(dx0);
          PoolSpec s = spec_of(g);
          s.ld_x = bdx.ld(), s.ld_y = bdy.ld();
          launch_avgpool_backward(t, bdy.ptr(), bdx.ptr(), s, accumulate, nullptr);
          int stray = 0;
          EXPECT_LT(rel_l2(bdx.download(&stray), ref), tolerance(p)) << what.str();
          EXPECT_EQ(stray, 0) << what.str() << ": wrote outside dx";
        }
  // Global average pooling: the reference is the average pool whose window is the whole image.
  for (Precision p : kStorage)
    for (int C : kChannels)
      for (bool accumulate : {false, true}) {
        const DType t = storage_type(p);
        const Dims d = random_dims(rng, C);
        PoolGeom whole;
        whole.x = d, whole.y = {d.n, C, 1, 1};
        whole.kernel = d.h, whole.kernel_w = d.w;
        const auto dy = rounded(random_vector(size_t(d.n) * C, rng), t);
        const auto dx0 = rounded(random_vector(size_t(d.numel()), rng), t);
        RefVec ref = avgpool_backward_ref(to_ref(dy), whole);
        if (accumulate) ref = add(ref, dx0);
        Rows bdx(rows_of(d), C, t, accumulate ? 0 : C + 2, accumulate ? 0 : 1);
        Rows bdy(d.n, C, t, accumulate ? 0 : C + 5, 0);
        bdy.upload(dy);
        if (accumulate) bdx.upload(dx0);
        PoolSpec s;
        s.x = d, s.y = whole.y, s.ld_x = bdx.ld(), s.ld_y = bdy.ld();
        launch_global_avgpool_backward(t, bdy.ptr(), bdx.ptr(), s, accumulate, nullptr);
        int stray = 0;
        EXPECT_LT(rel_l2(bdx.download(&stray), ref), tolerance(p))
            << precision_name(p) << " global " << d.str() << (accumulate ? " accumulate" : "");
        EXPECT_EQ(stray, 0) << "global average pool backward wrote outside dx";
      }
}

// ---- Squeeze-excitation scale ------------------------------------------------------------------

TEST(GpuTrain, ScaleBackwardMatchesReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  std::vector<Dims> dims;
  for (int c : kChannels) dims.push_back(random_dims(rng, c));
  dims.push_back({2, 96, 56, 56});  // EfficientNet's early stage: many chunks per image
  dims.push_back({3, 1152, 7, 7});  // a late stage: many channel tiles
  for (Precision p : kStorage)
    for (const Dims& d : dims)
      for (bool accumulate : {false, true}) {
        const DType t = storage_type(p);
        std::ostringstream what;
        what << precision_name(p) << " " << d.str() << (accumulate ? " accumulate" : "");
        const size_t n = size_t(d.numel());
        const auto x = rounded(random_vector(n, rng, -2, 2), t);
        const auto dy = rounded(random_vector(n, rng), t);
        const auto dx0 = rounded(random_vector(n, rng), t);
        const auto gate = random_vector(size_t(d.n) * d.c, rng, 0, 1);
        ScaleGradRef ref = scale_backward_ref(to_ref(x), to_ref(gate), to_ref(dy), d);
        const RefVec dgate_mag =
            scale_backward_ref(absolute(to_ref(x)), to_ref(gate), absolute(to_ref(dy)), d).dgate;
        if (accumulate) ref.dx = add(ref.dx, dx0);
        DeviceBuffer bx(x, t), bdy(dy, t), bdx(n, t);
        if (accumulate) bdx.upload(dx0);
        DeviceArray<float> dgate_in(gate), dgate(gate.size());
        DeviceArray<uint8_t> scratch(channel_reduce_scratch_bytes(int64_t(d.h) * d.w, d.c, d.n));
        launch_scale_backward(t, bx.get(), dgate_in.get(), bdy.get(), bdx.get(), dgate.get(), d,
                              accumulate, scratch.get(), nullptr);
        EXPECT_LT(rel_l2(bdx.download(), ref.dx), tolerance(p)) << what.str() << " dx";
        EXPECT_LT(sum_error(dgate.download(), ref.dgate, dgate_mag), kF32)
            << what.str() << " dgate";
      }
}

// The training forward of the scale (x * gate, gate in the storage type) and the conversions the
// step's scale backward runs (the gate to fp32, dgate back, added or not).
TEST(GpuTrain, ScaleForwardAndConvertMatchReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  for (Precision p : kStorage) {
    const DType t = storage_type(p);
    const Dims d{3, 40, 5, 7};
    const size_t n = size_t(d.numel()), nc = size_t(d.n) * d.c;
    const auto x = rounded(random_vector(n, rng, -2, 2), t);
    const auto gate = rounded(random_vector(nc, rng, 0, 1), t);
    RefVec ref(n);
    for (int i = 0; i < d.n; ++i)
      for (int r = 0; r < d.h * d.w; ++r)
        for (int c = 0; c < d.c; ++c) {
          const size_t k = (size_t(i) * d.h * d.w + r) * d.c + c;
          ref[k] = double(x[k]) * gate[size_t(i) * d.c + c];
        }
    DeviceBuffer bx(x, t), bg(gate, t), by(n, t);
    launch_scale_forward(t, bx.get(), bg.get(), by.get(), d, nullptr);
    EXPECT_LT(rel_l2(by.download(), ref), tolerance(p)) << precision_name(p) << " scale";
    // t -> fp32 exactly (the values are representable), fp32 -> t rounded, then added.
    DeviceArray<float> g32(nc);
    launch_convert(t, bg.get(), DType::F32, g32.get(), int64_t(nc), false, nullptr);
    EXPECT_EQ(g32.download(), gate) << precision_name(p) << " to fp32";
    const auto base = rounded(random_vector(nc, rng), t);
    DeviceBuffer dst(base, t);
    launch_convert(DType::F32, g32.get(), t, dst.get(), int64_t(nc), true, nullptr);
    RefVec sum(nc);
    for (size_t i = 0; i < nc; ++i) sum[i] = double(base[i]) + gate[i];
    EXPECT_LT(rel_l2(dst.download(), sum), tolerance(p)) << precision_name(p) << " accumulate";
  }
}

// LRN's backward against lrn_backward_ref (itself checked against finite differences in
// test_train_refs.cpp): AlexNet-LRN's two shapes' channel counts, odd and even window sizes,
// accumulating or not.
TEST(GpuTrain, LrnBackwardMatchesReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  struct Case {
    Dims d;
    int size;
  };
  const Case cases[] = {{{2, 96, 5, 7}, 5}, {{3, 256, 3, 3}, 5}, {{2, 10, 4, 4}, 4}};
  for (Precision p : kStorage)
    for (const Case& cs : cases)
      for (bool accumulate : {false, true}) {
        const DType t = storage_type(p);
        const size_t n = size_t(cs.d.numel());
        const auto x = rounded(random_vector(n, rng, -3, 3), t);
        const auto dy = rounded(random_vector(n, rng), t);
        const auto dx0 = rounded(random_vector(n, rng), t);
        LrnGeom g{cs.d, cs.size, 1e-2, 0.75, 2.0};
        RefVec ref = lrn_backward_ref(to_ref(x), to_ref(dy), g);
        if (accumulate) ref = add(ref, dx0);
        DeviceBuffer bx(x, t), bdy(dy, t), bdx(n, t);
        if (accumulate) bdx.upload(dx0);
        LrnSpec s;
        s.x = cs.d, s.size = cs.size, s.alpha = g.alpha, s.beta = g.beta, s.k = g.k;
        launch_lrn_backward(t, bx.get(), bdy.get(), bdx.get(), s, accumulate, nullptr);
        EXPECT_LT(rel_l2(bdx.download(), ref), tolerance(p))
            << precision_name(p) << " " << cs.d.str() << " size " << cs.size
            << (accumulate ? " accumulate" : "");
      }
}

// ---- Dropout -----------------------------------------------------------------------------------

namespace {

double keep_fraction(const std::vector<uint8_t>& m) {
  size_t k = 0;
  for (uint8_t v : m) k += v;
  return double(k) / m.size();
}

double agreement(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t shift = 0) {
  size_t same = 0;
  for (size_t i = 0; i + shift < a.size(); ++i) same += a[i] == b[i + shift];
  return double(same) / (a.size() - shift);
}

}  // namespace

TEST(GpuTrain, DropoutMaskIsDeterministicFairAndFresh) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = (1 << 20) + 7;
  const uint64_t key = rng(), offset = rng() % 1000;
  DeviceBuffer x(size_t(n), DType::F32), y(size_t(n), DType::F32);
  CNN_CHECK_CUDA(cudaMemset(x.get(), 0, size_t(n) * sizeof(float)));
  DeviceArray<uint8_t> mask{size_t(n)};
  DeviceArray<uint64_t> device_offset(std::vector<uint64_t>{3});
  for (double p : {0.1, 0.5, 0.75}) {
    auto draw = [&](uint64_t s, uint64_t off, const uint64_t* dev) {
      DropoutRng r;
      r.seed = s, r.offset = off, r.device_offset = dev;
      launch_dropout_forward(DType::F32, x.get(), y.get(), mask.get(), n, p, r, nullptr);
      return mask.download();
    };
    const auto m = draw(key, offset, nullptr);
    EXPECT_TRUE(m == dropout_mask_host(key, offset, n, p)) << "p " << p << ": not the host's mask";
    EXPECT_TRUE(draw(key, offset, nullptr) == m) << "p " << p << ": the same seed drew another";
    EXPECT_TRUE(draw(key, offset + 4, device_offset.get()) ==
                dropout_mask_host(key, offset + 7, n, p))
        << "p " << p << ": the device offset is not added";
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(keep_fraction(m), 1 - p, 5 * sigma) << "p " << p;
    // Another offset, another seed, and the neighbouring element agree as independent draws do.
    const double same = p * p + (1 - p) * (1 - p), sigma_same = std::sqrt(same * (1 - same) / n);
    EXPECT_NEAR(agreement(m, draw(key, offset + 1, nullptr)), same, 5 * sigma_same) << "p " << p;
    EXPECT_NEAR(agreement(m, draw(key ^ 1, offset, nullptr)), same, 5 * sigma_same) << "p " << p;
    EXPECT_NEAR(agreement(m, m, 1), same, 5 * sigma_same) << "p " << p << ": neighbours";
  }
  EXPECT_EQ(keep_fraction(dropout_mask_host(key, offset, 1000, 0.0)), 1.0) << "p 0 drops";
}

TEST(GpuTrain, DropoutForwardAndBackwardMatchReference) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  for (Precision p : kStorage)
    for (double drop : {0.0, 0.2, 0.5})
      for (bool accumulate : {false, true}) {
        const DType t = storage_type(p);
        const size_t n = size_t(random_dims(rng, 33).numel());
        std::ostringstream what;
        what << precision_name(p) << " p " << drop << " n " << n
             << (accumulate ? " accumulate" : "");
        const auto x = rounded(random_vector(n, rng, -3, 3), t);
        const auto dy = rounded(random_vector(n, rng), t);
        const auto dx0 = rounded(random_vector(n, rng), t);
        DeviceBuffer bx(x, t), by(n, t), bdy(dy, t), bdx(n, t);
        if (accumulate) bdx.upload(dx0);
        DeviceArray<uint8_t> mask(n);
        DropoutRng r;
        r.seed = rng(), r.offset = rng();
        launch_dropout_forward(t, bx.get(), by.get(), mask.get(), int64_t(n), drop, r, nullptr);
        launch_dropout_backward(t, bdy.get(), bdx.get(), mask.get(), int64_t(n), drop, accumulate,
                                nullptr);
        const auto m = mask.download();
        EXPECT_TRUE(m == dropout_mask_host(r.seed, r.offset, int64_t(n), drop)) << what.str();
        EXPECT_LT(rel_l2(by.download(), dropout_forward_ref(to_ref(x), m, drop)), tolerance(p))
            << what.str() << " forward";
        RefVec ref = dropout_backward_ref(to_ref(dy), m, drop);
        if (accumulate) ref = add(ref, dx0);
        EXPECT_LT(rel_l2(bdx.download(), ref), tolerance(p)) << what.str() << " backward";
      }
}

// ---- Optimizers --------------------------------------------------------------------------------

namespace {

// A gradient as the device holds it: in type t, times the loss scale; and as the reference sees
// it (divided by the scale again, exact for a power of two).
struct Grad {
  std::vector<float> device;
  RefVec ref;
};
Grad make_grad(size_t n, DType t, float scale, std::mt19937& rng) {
  std::vector<float> g = random_vector(n, rng);
  for (float& v : g) v *= scale;
  Grad r;
  r.device = rounded(g, t);
  r.ref.resize(n);
  for (size_t i = 0; i < n; ++i) r.ref[i] = double(r.device[i]) / scale;
  return r;
}

struct GradCase {
  DType t;
  float scale;  // 0: no loss scale pointer
};
const GradCase kGradCases[] = {{DType::F32, 0.0f}, {DType::F16, 1024.0f}, {DType::BF16, 256.0f}};

}  // namespace

TEST(GpuTrain, SgdMatchesReferenceOverSeveralSteps) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  struct Case {
    const char* name;
    SgdRef h;
    bool with_step;  // false: the buffer starts at zero and the step count is not read
  };
  const Case cases[] = {
      {"plain", {0.1, 0.0, 0.0, 0.0, false}, true},
      {"momentum+wd", {0.1, 0.9, 1e-2, 0.0, false}, true},
      {"momentum, no step count", {0.1, 0.9, 1e-2, 0.0, false}, false},
      {"dampening", {0.05, 0.8, 0.0, 0.3, false}, true},
      {"nesterov+wd", {0.1, 0.9, 5e-2, 0.0, true}, true},
  };
  for (const Case& cs : cases)
    for (const GradCase& gc : kGradCases) {
      std::uniform_int_distribution<int> size(1000, 5000);
      const size_t n = size_t(size(rng));
      std::ostringstream what;
      what << cs.name << " grads " << dtype_name(gc.t) << " n " << n;
      const auto p0 = random_vector(n, rng);
      RefVec p_ref = to_ref(p0);
      SgdState state;
      DeviceArray<float> p(p0), buf(std::vector<float>(n, 0.0f));
      DeviceArray<float> scale(std::vector<float>{gc.scale});
      DeviceArray<int> step(std::vector<int>{0});
      DeviceBuffer g(n, gc.t), copy(n, gc.t);
      StepControl c;
      c.loss_scale = gc.scale != 0 ? scale.get() : nullptr;
      c.step = cs.with_step ? step.get() : nullptr;
      for (int k = 0; k < 3; ++k) {
        const Grad gr = make_grad(n, gc.t, gc.scale != 0 ? gc.scale : 1.0f, rng);
        g.upload(gr.device);
        sgd_step_ref(p_ref, gr.ref, state, cs.h);
        if (cs.with_step) launch_step_advance(step.get(), nullptr, nullptr);
        launch_sgd_step(p.get(), buf.get(), g.get(), gc.t, int64_t(n), cs.h, c, copy.get(), gc.t,
                        nullptr);
        EXPECT_LT(rel_l2(p.download(), p_ref), kF32) << what.str() << " step " << k + 1;
        if (cs.h.momentum != 0) {
          EXPECT_LT(rel_l2(buf.download(), state.momentum_buffer), kF32)
              << what.str() << " momentum buffer, step " << k + 1;
        }
        EXPECT_LT(rel_l2(copy.download(), p_ref),
                  tolerance(gc.t == DType::F32 ? Precision::FP32 : Precision::FP16))
            << what.str() << " weights' copy, step " << k + 1;
      }
    }
}

TEST(GpuTrain, AdamMatchesReferenceOverSeveralSteps) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  struct Case {
    const char* name;
    AdamRef h;
  };
  const Case cases[] = {
      {"default", {0.05, 0.9, 0.999, 1e-8, 0.0}},
      {"weight decay", {0.05, 0.9, 0.999, 1e-8, 1e-2}},
      {"beta2 0.99, eps 1e-3", {0.02, 0.8, 0.99, 1e-3, 0.0}},
  };
  for (const Case& cs : cases)
    for (const GradCase& gc : kGradCases) {
      std::uniform_int_distribution<int> size(1000, 5000);
      const size_t n = size_t(size(rng));
      std::ostringstream what;
      what << cs.name << " grads " << dtype_name(gc.t) << " n " << n;
      const auto p0 = random_vector(n, rng);
      RefVec p_ref = to_ref(p0);
      AdamState state;
      DeviceArray<float> p(p0), m(std::vector<float>(n, 0.0f)), v(std::vector<float>(n, 0.0f));
      DeviceArray<float> scale(std::vector<float>{gc.scale});
      DeviceArray<int> step(std::vector<int>{0});
      DeviceBuffer g(n, gc.t), copy(n, gc.t);
      StepControl c;
      c.loss_scale = gc.scale != 0 ? scale.get() : nullptr;
      c.step = step.get();
      for (int k = 0; k < 4; ++k) {
        const Grad gr = make_grad(n, gc.t, gc.scale != 0 ? gc.scale : 1.0f, rng);
        g.upload(gr.device);
        adam_step_ref(p_ref, gr.ref, state, cs.h);
        launch_step_advance(step.get(), nullptr, nullptr);
        launch_adam_step(p.get(), m.get(), v.get(), g.get(), gc.t, int64_t(n), cs.h, c, copy.get(),
                         gc.t, nullptr);
        EXPECT_LT(rel_l2(p.download(), p_ref), kF32) << what.str() << " step " << k + 1;
        EXPECT_LT(rel_l2(m.download(), state.m), kF32) << what.str() << " m, step " << k + 1;
        EXPECT_LT(rel_l2(v.download(), state.v), kF32) << what.str() << " v, step " << k + 1;
        EXPECT_LT(rel_l2(copy.download(), p_ref),
                  tolerance(gc.t == DType::F32 ? Precision::FP32 : Precision::FP16))
            << what.str() << " weights' copy, step " << k + 1;
      }
      EXPECT_EQ(step.download()[0], 4);
    }
}

// ---- Mixed precision ---------------------------------------------------------------------------

// The grouped optimizer steps (launch_sgd_steps, launch_adam_steps) against a launch per tensor:
// the same weights, momentum / m and v, and working copies, bit for bit, after three steps and a
// skipped fourth (a found overflow), for 150 tensors of mixed sizes (1 element to 300k; two tables
// of each) and gradient types (fp32, fp16, bf16; the copies in fp16), with a loss scale.
TEST(GpuTrain, GroupedOptimizerStepsMatchOneLaunchEach) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  const int64_t sizes[] = {1, 7, 64, 256, 1000, 4097, 65536, 300001};
  struct T {
    std::unique_ptr<DeviceArray<float>> p, m, v, p1, m1, v1;
    std::unique_ptr<DeviceBuffer> g, copy, copy1;
    int64_t n;
    DType gt;
  };
  for (bool adam : {false, true}) {
    std::vector<T> ts;
    for (int k = 0; k < 150; ++k) {  // 50 of each gradient type: two tables each
      T t;
      t.n = sizes[size_t(k) % 8];
      t.gt = k % 3 == 0 ? DType::F32 : k % 3 == 1 ? DType::F16 : DType::BF16;
      const auto p0 = random_vector(size_t(t.n), rng);
      const std::vector<float> zero(size_t(t.n), 0.0f);
      t.p = std::make_unique<DeviceArray<float>>(p0);
      t.p1 = std::make_unique<DeviceArray<float>>(p0);
      t.m = std::make_unique<DeviceArray<float>>(zero);
      t.m1 = std::make_unique<DeviceArray<float>>(zero);
      t.v = std::make_unique<DeviceArray<float>>(zero);
      t.v1 = std::make_unique<DeviceArray<float>>(zero);
      t.g = std::make_unique<DeviceBuffer>(size_t(t.n), t.gt);
      t.copy = std::make_unique<DeviceBuffer>(size_t(t.n), DType::F16);
      t.copy1 = std::make_unique<DeviceBuffer>(size_t(t.n), DType::F16);
      ts.push_back(std::move(t));
    }
    DeviceArray<float> scale(std::vector<float>{1024.0f});
    DeviceArray<int> step(std::vector<int>{0}), found(std::vector<int>{0});
    StepControl c;
    c.loss_scale = scale.get();
    c.step = step.get();
    c.found_inf = found.get();
    SgdRef h{0.1, 0.9, 1e-2, 0.0, false};
    AdamRef ah;
    ah.weight_decay = 1e-2;
    std::vector<OptTensor> grouped;
    for (T& t : ts) {
      OptTensor o;
      o.p = t.p->get(), o.m = t.m->get(), o.v = adam ? t.v->get() : nullptr;
      o.g = t.g->get(), o.gt = t.gt, o.n = t.n, o.copy = t.copy->get();
      grouped.push_back(o);
    }
    ASSERT_EQ(opt_groups(grouped).size(), 6u);
    std::vector<std::vector<float>> before;
    for (T& t : ts) before.push_back(t.p->download());
    for (int k = 0; k < 4; ++k) {
      found.upload(std::vector<int>{k == 3 ? 1 : 0});  // the fourth step overflowed
      for (T& t : ts) t.g->upload(make_grad(size_t(t.n), t.gt, 1024.0f, rng).device);
      launch_step_advance(step.get(), found.get(), nullptr);
      if (adam)
        launch_adam_steps(grouped, ah, c, DType::F16, nullptr);
      else
        launch_sgd_steps(grouped, h, c, DType::F16, nullptr);
      for (T& t : ts) {
        if (adam)
          launch_adam_step(t.p1->get(), t.m1->get(), t.v1->get(), t.g->get(), t.gt, t.n, ah, c,
                           t.copy1->get(), DType::F16, nullptr);
        else
          launch_sgd_step(t.p1->get(), t.m1->get(), t.g->get(), t.gt, t.n, h, c, t.copy1->get(),
                          DType::F16, nullptr);
      }
    }
    int wrong = 0, moved = 0;
    for (size_t k = 0; k < ts.size(); ++k) moved += ts[k].p->download() != before[k];
    EXPECT_EQ(moved, int(ts.size())) << "tensors the steps changed";
    for (T& t : ts) {
      const bool same =
          t.p->download() == t.p1->download() && t.m->download() == t.m1->download() &&
          t.v->download() == t.v1->download() && t.copy->download() == t.copy1->download();
      wrong += !same;
      EXPECT_TRUE(same) << (adam ? "adam" : "sgd") << " tensor of " << t.n << " "
                        << dtype_name(t.gt);
      if (wrong > 3) break;
    }
    EXPECT_EQ(step.download()[0], 3);
  }
}

TEST(GpuTrain, CheckFiniteFindsEveryInfAndNan) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  // More buffers than one launch takes, of every type and of sizes from 1 to 70000.
  std::uniform_int_distribution<int> size(1, 70000);
  std::vector<DType> types;
  std::vector<std::vector<float>> values;
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<GradBuffer> table;
  for (int b = 0; b < 130; ++b) {
    const DType t = DType(b % 3);
    types.push_back(t);
    // Large finite values stay finite: fp16's largest is 65504.
    auto v = random_vector(size_t(b % 7 == 0 ? 1 : size(rng)), rng, -6e4f, 6e4f);
    values.push_back(rounded(v, t));
    bufs.push_back(std::make_unique<DeviceBuffer>(values.back(), t));
    table.push_back({bufs.back()->get(), int64_t(values.back().size()), t});
  }
  DeviceArray<int> found(std::vector<int>{0});
  launch_check_finite(table, found.get(), nullptr);
  EXPECT_EQ(found.download()[0], 0) << "finite gradients flagged";
  std::uniform_int_distribution<int> pick(0, 129);
  for (int trial = 0; trial < 12; ++trial) {
    // The last element of the last buffer (in the second launch), a first element, then anywhere.
    const int b = trial == 0 ? 129 : pick(rng);
    const size_t at = trial == 0   ? values[b].size() - 1
                      : trial == 1 ? 0
                                   : size_t(rng() % values[b].size());
    const float bad = trial % 3 == 0 ? NAN : (trial % 3 == 1 ? INFINITY : -INFINITY);
    auto v = values[b];
    v[at] = bad;
    bufs[b]->upload(v);
    found.upload({0});
    launch_check_finite(table, found.get(), nullptr);
    EXPECT_EQ(found.download()[0], 1) << bad << " at " << at << " of buffer " << b << " ("
                                      << dtype_name(types[b]) << ", " << v.size() << ") missed";
    bufs[b]->upload(values[b]);
  }
  // The flag is only ever set, never cleared, by the check.
  found.upload({1});
  launch_check_finite(table, found.get(), nullptr);
  EXPECT_EQ(found.download()[0], 1);
}

TEST(GpuTrain, OverflowSkipsTheStepAndBacksOffTheScale) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  const size_t n = 3001;
  for (const GradCase& gc : kGradCases) {
    const auto p0 = random_vector(n, rng), s0 = random_vector(n, rng),
               v0 = random_vector(n, rng, 0, 1);
    auto g = rounded(random_vector(n, rng), gc.t);
    g[n / 2] = INFINITY;
    DeviceBuffer dg(g, gc.t), copy(n, gc.t);
    DeviceArray<float> p(p0), buf(s0), m(s0), v(v0);
    DeviceArray<int> step(std::vector<int>{5});
    LossScaleState st0 = loss_scale_initial_state(4096.0f);
    st0.good_steps = 7;
    DeviceArray<LossScaleState> state(std::vector<LossScaleState>{st0});
    const auto copy0 = copy.download();
    const std::vector<GradBuffer> grads = {{dg.get(), int64_t(n), gc.t}};
    launch_check_finite(grads, found_inf_field(state.get()), nullptr);
    StepControl c;
    c.found_inf = found_inf_field(state.get()), c.loss_scale = loss_scale_field(state.get()),
    c.step = step.get();
    launch_step_advance(step.get(), c.found_inf, nullptr);
    launch_sgd_step(p.get(), buf.get(), dg.get(), gc.t, int64_t(n), {0.1, 0.9, 1e-4, 0.0, false}, c,
                    copy.get(), gc.t, nullptr);
    launch_adam_step(p.get(), m.get(), v.get(), dg.get(), gc.t, int64_t(n), AdamRef{}, c,
                     copy.get(), gc.t, nullptr);
    EXPECT_EQ(state.download()[0].found_inf, 1) << dtype_name(gc.t) << ": the inf was missed";
    launch_loss_scale_update(state.get(), LossScaleParams{}, nullptr);
    EXPECT_TRUE(p.download() == p0) << dtype_name(gc.t) << ": a skipped step moved the weights";
    EXPECT_TRUE(buf.download() == s0) << dtype_name(gc.t) << ": SGD's buffer changed";
    EXPECT_TRUE(m.download() == s0 && v.download() == v0) << dtype_name(gc.t) << ": Adam's m, v";
    const auto copy1 = copy.download();
    EXPECT_EQ(std::memcmp(copy1.data(), copy0.data(), n * sizeof(float)), 0)
        << dtype_name(gc.t) << ": the weights' copy was written";
    EXPECT_EQ(step.download()[0], 5) << "a skipped step was counted";
    const LossScaleState st = state.download()[0];
    EXPECT_EQ(st.scale, 2048.0f);
    EXPECT_EQ(st.good_steps, 0);
    EXPECT_EQ(st.skipped_steps, 1);
    EXPECT_EQ(st.found_inf, 0) << "the update leaves the flag set for the next step";
  }
}

TEST(GpuTrain, LossScaleFollowsGradScaler) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  // A random run of overflows against LossScaleRef, a short interval so the scale also grows.
  {
    LossScaleParams params;
    params.interval = 3;
    LossScaleRef ref;
    ref.scale = 65536.0, ref.interval = 3;
    DeviceArray<LossScaleState> state(std::vector<LossScaleState>{loss_scale_initial_state()});
    std::bernoulli_distribution overflow(0.3);
    int skipped = 0;
    for (int k = 0; k < 80; ++k) {
      const bool inf = overflow(rng);
      LossScaleState st = state.download()[0];
      st.found_inf = inf ? 1 : 0;
      state.upload({st});
      launch_loss_scale_update(state.get(), params, nullptr);
      skipped += !ref.update(inf);
      st = state.download()[0];
      ASSERT_EQ(st.scale, float(ref.scale)) << "step " << k;
      ASSERT_EQ(st.good_steps, ref.good_steps) << "step " << k;
      ASSERT_EQ(st.skipped_steps, skipped) << "step " << k;
      ASSERT_EQ(st.found_inf, 0) << "step " << k;
    }
  }
  // torch's default growth_interval: 1999 good steps keep the scale, the 2000th doubles it.
  DeviceArray<LossScaleState> state(std::vector<LossScaleState>{loss_scale_initial_state(1024)});
  for (int k = 0; k < 1999; ++k) launch_loss_scale_update(state.get(), LossScaleParams{}, nullptr);
  LossScaleState st = state.download()[0];
  EXPECT_EQ(st.scale, 1024.0f);
  EXPECT_EQ(st.good_steps, 1999);
  launch_loss_scale_update(state.get(), LossScaleParams{}, nullptr);
  st = state.download()[0];
  EXPECT_EQ(st.scale, 2048.0f);
  EXPECT_EQ(st.good_steps, 0);
  EXPECT_EQ(st.skipped_steps, 0);
}

// ---- A captured step ---------------------------------------------------------------------------

// A miniature fp16 training step: BatchNorm + ReLU forward (running statistics), its output as
// logits for softmax cross-entropy scaled by the device loss scale, BatchNorm backward through the
// ReLU, dropout of dx with the device offset bumped each step, the overflow check, the step count,
// SGD on gamma and Adam on beta (with fp16 copies), and the loss-scale update (growing every step).
// Run eagerly twice from one state, then from the same state captured once and replayed twice:
// every buffer must match bit for bit after each run.
TEST(GpuTrain, CapturedStepReplaysLikeEager) {
  const unsigned seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937 rng(seed);
  const DType t = DType::F16;
  const Dims d{2, 16, 7, 7};
  const int C = d.c;
  const int64_t rows = rows_of(d);
  const auto x = rounded(random_vector(size_t(d.numel()), rng, -2, 2), t);
  std::vector<int> labels(rows);
  for (int& l : labels) l = int(rng() % C);
  const auto gamma0 = random_vector(C, rng, 0.5, 1.5), beta0 = random_vector(C, rng, -.5, .5);

  DeviceBuffer bx(x, t), by(size_t(d.numel()), t), bdz(size_t(d.numel()), t),
      bdx(size_t(d.numel()), t), bdrop(size_t(d.numel()), t);
  DeviceBuffer gamma16(C, t), beta16(C, t);
  DeviceArray<int> dlabels(labels), step(1);
  DeviceArray<float> gamma(C), beta(C), mean(C), invstd(C), rm(C), rv(C), dgamma(C), dbeta(C),
      mom(C), am(C), av(C), loss(1);
  DeviceArray<uint8_t> mask(size_t(d.numel())), bn_scratch(channel_reduce_scratch_bytes(rows, C)),
      xent_scratch(xent_scratch_bytes(int(rows)));
  DeviceArray<uint64_t> offset(1);
  DeviceArray<LossScaleState> state(1);
  LossScaleParams growth_each_step;
  growth_each_step.interval = 1;

  auto init = [&] {
    gamma.upload(gamma0), beta.upload(beta0);
    rm.upload(std::vector<float>(C, 0.0f)), rv.upload(std::vector<float>(C, 1.0f));
    mom.upload(std::vector<float>(C, 0.0f)), am.upload(std::vector<float>(C, 0.0f));
    av.upload(std::vector<float>(C, 0.0f));
    step.upload({0}), offset.upload({0}), state.upload({loss_scale_initial_state(1024)});
    xent_scratch.zero();
  };
  auto run = [&](cudaStream_t s) {
    BnTrainSpec bn;
    bn.rows = rows, bn.channels = C, bn.act = Act::ReLU;
    launch_bn_forward_train(t, bx.get(), nullptr, by.get(), gamma.get(), beta.get(), mean.get(),
                            invstd.get(), rm.get(), rv.get(), bn, bn_scratch.get(), s);
    launch_softmax_xent(t, by.get(), dlabels.get(), int(rows), C, 1.0,
                        loss_scale_field(state.get()), loss.get(), bdz.get(), xent_scratch.get(),
                        s);
    launch_bn_backward(t, bx.get(), by.get(), bdz.get(), bdx.get(), gamma.get(), beta.get(),
                       mean.get(), invstd.get(), dgamma.get(), dbeta.get(), bn, false, nullptr,
                       false, bn_scratch.get(), s);
    DropoutRng r;
    r.seed = 1234, r.device_offset = offset.get();
    launch_dropout_forward(t, bdx.get(), bdrop.get(), mask.get(), d.numel(), 0.3, r, s);
    launch_counter_add(offset.get(), 1, s);
    int* found = found_inf_field(state.get());
    launch_check_finite(
        {{dgamma.get(), C, DType::F32}, {dbeta.get(), C, DType::F32}, {bdrop.get(), d.numel(), t}},
        found, s);
    launch_step_advance(step.get(), found, s);
    StepControl c;
    c.found_inf = found, c.loss_scale = loss_scale_field(state.get()), c.step = step.get();
    launch_sgd_step(gamma.get(), mom.get(), dgamma.get(), DType::F32, C,
                    {0.1, 0.9, 1e-4, 0.0, false}, c, gamma16.get(), t, s);
    launch_adam_step(beta.get(), am.get(), av.get(), dbeta.get(), DType::F32, C, AdamRef{}, c,
                     beta16.get(), t, s);
    launch_loss_scale_update(state.get(), growth_each_step, s);
  };
  auto raw = [](const void* p, size_t bytes) {
    std::vector<uint8_t> b(bytes);
    CNN_CHECK_CUDA(cudaDeviceSynchronize());
    CNN_CHECK_CUDA(cudaMemcpy(b.data(), p, bytes, cudaMemcpyDeviceToHost));
    return b;
  };
  auto snapshot = [&] {
    const size_t h = size_t(d.numel()) * 2, f = size_t(C) * 4;
    return std::vector<std::vector<uint8_t>>{
        raw(by.get(), h),          raw(bdz.get(), h),
        raw(bdx.get(), h),         raw(bdrop.get(), h),
        raw(mask.get(), h / 2),    raw(gamma.get(), f),
        raw(beta.get(), f),        raw(rm.get(), f),
        raw(rv.get(), f),          raw(mom.get(), f),
        raw(am.get(), f),          raw(av.get(), f),
        raw(gamma16.get(), f / 2), raw(beta16.get(), f / 2),
        raw(loss.get(), 4),        raw(step.get(), 4),
        raw(offset.get(), 8),      raw(state.get(), sizeof(LossScaleState))};
  };
  const char* names[] = {
      "y",          "dlogits",      "dx",          "dropped",  "mask",   "gamma",
      "beta",       "running mean", "running var", "momentum", "adam m", "adam v",
      "gamma fp16", "beta fp16",    "loss",        "step",     "offset", "loss scale state"};
  cudaStream_t stream;
  CNN_CHECK_CUDA(cudaStreamCreate(&stream));
  init();
  run(stream);
  const auto eager1 = snapshot();
  run(stream);
  const auto eager2 = snapshot();
  EXPECT_NE(eager1[4], eager2[4]) << "the second step drew the same dropout mask";
  EXPECT_NE(eager1[5], eager2[5]) << "the second step left gamma alone";
  const LossScaleState st = state.download()[0];
  EXPECT_EQ(st.scale, 4096.0f) << "the scale did not grow twice";
  EXPECT_EQ(step.download()[0], 2);

  init();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CNN_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  run(stream);
  CNN_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CNN_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int k = 0; k < 2; ++k) {
    CNN_CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CNN_CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto got = snapshot();
    const auto& want = k == 0 ? eager1 : eager2;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i] == want[i]) << "replay " << k + 1 << ": " << names[i] << " differs";
  }
  CNN_CHECK_CUDA(cudaGraphExecDestroy(exec));
  CNN_CHECK_CUDA(cudaGraphDestroy(graph));
  CNN_CHECK_CUDA(cudaStreamDestroy(stream));
}
