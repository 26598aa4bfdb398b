#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "harness/check.h"
#include "kernels/activation.cuh"
#include "kernels/convert.cuh"
#include "kernels/pointwise.h"

namespace cnnbench {

const char* act_name(Act a) {
  switch (a) {
    case Act::ReLU:
      return "relu";
    case Act::SiLU:
      return "silu";
    case Act::Sigmoid:
      return "sigmoid";
    default:
      return "";
  }
}

double act_ref(Act a, double v) {
  switch (a) {
    case Act::ReLU:
      return v > 0 ? v : 0.0;
    case Act::SiLU:
      return v / (1.0 + std::exp(-v));
    case Act::Sigmoid:
      return 1.0 / (1.0 + std::exp(-v));
    default:
      return v;
  }
}

namespace {

template <typename T>
__global__ void epilogue_kernel(T* y, const T* x, const T* scale, const T* bias, const T* z,
                                Act act, int64_t rows, int channels, int ld_y, int ld_x, int ld_z,
                                bool z_after_act) {
  const int64_t total = rows * channels;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t r = i / channels;
    const int c = int(i - r * channels);
    float v = load_f(x, r * ld_x + c);
    if (scale) v *= load_f(scale, c);
    if (bias) v += load_f(bias, c);
    if (z && !z_after_act) v += load_f(z, r * ld_z + c);
    v = activate(act, v);
    if (z && z_after_act) v += load_f(z, r * ld_z + c);
    store_f(y, r * ld_y + c, v);
  }
}

template <typename T>
__global__ void copy_channels_kernel(T* dst, int ld_dst, const T* src, int ld_src, int64_t rows,
                                     int channels) {
  const int64_t total = rows * channels;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t r = i / channels;
    const int c = int(i - r * channels);
    dst[r * ld_dst + c] = src[r * ld_src + c];
  }
}

// A thread a row: its `channels` values, then zeros up to `padded`. P > 0: the padded row is P
// elements of 8 or 16 bytes (the stems: 3 channels to 4 or 8), stored at once; P = 0: any width,
// element by element. Until 2026-12-06 a thread an element, dividing a 64-bit index for each:
// ResNet-50's training stem at 256 padded its 77 MB of images into 205 MB in 259 us (call 100,
// an H100: 1.1 TB/s).
template <typename T, int P>
__global__ void pad_channels_kernel(T* dst, int padded, const T* src, int channels, int64_t rows) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    const T* in = src + r * channels;
    if constexpr (P > 0) {
      using Word = std::conditional_t<sizeof(T) * P == 16, uint4, uint2>;
      static_assert(sizeof(Word) == sizeof(T) * P, "a padded row is one 8- or 16-byte word");
      T v[P];
#pragma unroll
      for (int c = 0; c < P; ++c) v[c] = c < channels ? in[c] : T(0.0f);
      Word w;
      memcpy(&w, v, sizeof w);
      reinterpret_cast<Word*>(dst)[r] = w;
    } else {
      for (int c = 0; c < padded; ++c) dst[r * padded + c] = c < channels ? in[c] : T(0.0f);
    }
  }
}

int blocks_for(int64_t n, int threads) {
  return int(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 132 * 16)));
}

}  // namespace

void launch_epilogue(DType t, void* y, const void* x, const void* scale, const void* bias,
                     const void* z, Act act, const RowLayout& l, cudaStream_t stream) {
  const int C = l.channels;
  const int ld_y = l.ld_y > 0 ? l.ld_y : C, ld_x = l.ld_x > 0 ? l.ld_x : C;
  const int ld_z = l.ld_z > 0 ? l.ld_z : C;
  const int threads = 256;
  CNN_DISPATCH_DTYPE(
      t, epilogue_kernel<T><<<blocks_for(l.rows * C, threads), threads, 0, stream>>>(
             static_cast<T*>(y), static_cast<const T*>(x), static_cast<const T*>(scale),
             static_cast<const T*>(bias), static_cast<const T*>(z), act, l.rows, C, ld_y, ld_x,
             ld_z, l.z_after_act));
  CNN_CHECK_LAUNCH();
}

void launch_copy_channels(DType t, void* dst, int ld_dst, const void* src, int ld_src, int64_t rows,
                          int channels, cudaStream_t stream) {
  const int threads = 256;
  CNN_DISPATCH_DTYPE(
      t, copy_channels_kernel<T><<<blocks_for(rows * channels, threads), threads, 0, stream>>>(
             static_cast<T*>(dst), ld_dst, static_cast<const T*>(src), ld_src, rows, channels));
  CNN_CHECK_LAUNCH();
}

void launch_pad_channels(DType t, void* dst, int padded, const void* src, int channels,
                         int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return;
  const int threads = 256;
  const int bytes = padded * int(dtype_size(t));
  const bool word = (bytes == 8 || bytes == 16) && reinterpret_cast<uintptr_t>(dst) % bytes == 0;
  CNN_DISPATCH_DTYPE(t, {
    auto go = [&](auto p) {
      // P's word for this T, or the element loop (never taken: the calls below match P to T).
      constexpr int P = sizeof(T) * decltype(p)::value == 8 || sizeof(T) * decltype(p)::value == 16
                            ? decltype(p)::value
                            : 0;
      pad_channels_kernel<T, P><<<blocks_for(rows, threads), threads, 0, stream>>>(
          static_cast<T*>(dst), padded, static_cast<const T*>(src), channels, rows);
    };
    if (word && padded == 2 && sizeof(T) == 4)
      go(std::integral_constant<int, 2>{});
    else if (word && padded == 4)
      go(std::integral_constant<int, 4>{});
    else if (word && padded == 8 && sizeof(T) == 2)
      go(std::integral_constant<int, 8>{});
    else
      go(std::integral_constant<int, 0>{});
  });
  CNN_CHECK_LAUNCH();
}

}  // namespace cnnbench
