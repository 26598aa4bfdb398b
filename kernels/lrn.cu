#include <cmath>
#include <cstdint>

#include "harness/check.h"
#include "kernels/channel_kernels.cuh"
#include "kernels/convert.cuh"
#include "kernels/lrn.h"

namespace cnnbench {

namespace {

// One thread per output; neighbours in a row of channels are neighbouring threads, so the
// window's loads hit the same cache lines.
template <typename T>
__global__ void lrn_kernel(const T* x, T* y, int64_t rows, int C, int ld_x, int ld_y, int size,
                           float alpha_over_n, float beta, float k) {
  const int64_t total = rows * C;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int lo = (size - 1) / 2, hi = size / 2;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t r = i / C;
    const int c = int(i - r * C);
    const T* row = x + r * ld_x;
    float sq = 0.0f;
    for (int j = max(c - lo, 0); j <= min(c + hi, C - 1); ++j) {
      const float v = load_f(row, j);
      sq += v * v;
    }
    store_f(y, r * ld_y + c, load_f(row, c) * powf(k + alpha_over_n * sq, -beta));
  }
}

// Packed rows whose channel count the 16-byte pack divides: a thread owns one pack of V channels
// of one row and reads the packs on either side for the window (sizes up to 2V + 1), the same
// sums in the same order as lrn_kernel, so the results are the same bit for bit. 32-bit indices.
template <typename T, int V>
__global__ void __launch_bounds__(256)
    lrn_vec(const T* x, T* y, int rows, int C, int size, float alpha_over_n, float beta, float k) {
  const int packs = C / V;
  const int total = rows * packs;
  const int lo = (size - 1) / 2, hi = size / 2;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int pk = i % packs, r = i / packs;
    const T* row = x + int64_t(r) * C;
    float v[3 * V];  // the packs before, at and after this one (zeros off the row's ends)
    ck::load_pack<T, V>(pk > 0 ? row : nullptr, pk - 1, *reinterpret_cast<float(*)[V]>(v));
    ck::load_pack<T, V>(row, pk, *reinterpret_cast<float(*)[V]>(v + V));
    ck::load_pack<T, V>(pk + 1 < packs ? row : nullptr, pk + 1,
                        *reinterpret_cast<float(*)[V]>(v + 2 * V));
    float out[V];
#pragma unroll
    for (int q = 0; q < V; ++q) {
      const int c = pk * V + q;
      float sq = 0.0f;
      // The window's offsets in increasing order, unrolled so that v stays in registers.
#pragma unroll
      for (int d = -V; d <= V; ++d) {
        const int j = c + d;
        if (d < -lo || d > hi || j < 0 || j >= C) continue;
        const float u = v[V + q + d];
        sq += u * u;
      }
      out[q] = v[V + q] * powf(k + alpha_over_n * sq, -beta);
    }
    ck::store_pack<T, V>(y + int64_t(r) * C, pk, out);
  }
}

}  // namespace

void launch_lrn(DType t, const void* x, void* y, const LrnSpec& s, cudaStream_t stream) {
  const int64_t rows = int64_t(s.x.n) * s.x.h * s.x.w;
  const int C = s.x.c;
  const int threads = 256;
  const int V = 16 / int(dtype_size(t));
  const bool packed = (s.ld_x <= 0 || s.ld_x == C) && (s.ld_y <= 0 || s.ld_y == C);
  const bool aligned =
      reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (packed && aligned && C % V == 0 && s.size <= 2 * V + 1 && rows * C / V < int64_t(1) << 30) {
    CNN_DISPATCH_DTYPE(t, {
      constexpr int W = 16 / int(sizeof(T));
      const int64_t n = rows * C / W;
      const int blocks =
          int(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 132 * 16)));
      lrn_vec<T, W><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                    int(rows), C, s.size, float(s.alpha / s.size),
                                                    float(s.beta), float(s.k));
    });
    CNN_CHECK_LAUNCH();
    return;
  }
  const int blocks =
      int(std::max<int64_t>(1, std::min<int64_t>((rows * C + threads - 1) / threads, 132 * 16)));
  CNN_DISPATCH_DTYPE(
      t, lrn_kernel<T><<<blocks, threads, 0, stream>>>(
             static_cast<const T*>(x), static_cast<T*>(y), rows, C, s.ld_x > 0 ? s.ld_x : C,
             s.ld_y > 0 ? s.ld_y : C, s.size, float(s.alpha / s.size), float(s.beta), float(s.k)));
  CNN_CHECK_LAUNCH();
}

std::vector<double> lrn_reference(const std::vector<float>& x, const LrnSpec& s) {
  const int C = s.x.c;
  const int64_t rows = int64_t(s.x.n) * s.x.h * s.x.w;
  std::vector<double> y(size_t(rows) * C);
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) {
      double sq = 0;
      for (int j = c - (s.size - 1) / 2; j <= c + s.size / 2; ++j)
        if (j >= 0 && j < C) sq += double(x[size_t(r) * C + j]) * x[size_t(r) * C + j];
      y[size_t(r) * C + c] = x[size_t(r) * C + c] / std::pow(s.k + s.alpha / s.size * sq, s.beta);
    }
  return y;
}

}  // namespace cnnbench
