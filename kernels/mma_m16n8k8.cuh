// mma.sync m16n8k8 with 16-bit inputs and float accumulators, and what the kernels that use it
// share (the stem's rows kernel, stem.cu; the stem's weight gradient, stem_wgrad.cu), host and
// device where their threads are also run on the host. Fragment layouts (PTX ISA): A 16x8 row
// major, lane (g = lane / 4, q = lane % 4) holding a0 = (row g, columns 2q, 2q + 1) and a1 = (row
// g + 8, the same columns); B 8x8, b = (rows 2q, 2q + 1 of column g); C 16x8, c0 c1 = (row g,
// columns 2q, 2q + 1), c2 c3 = (row g + 8, the same columns).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "kernels/convert.cuh"

namespace cnnbench {
namespace mma {

template <typename T>
__host__ __device__ __forceinline__ T zero_value() {
  T z;
  store_f(&z, 0, 0.0f);
  return z;
}

// Two 16-bit values: one register of a fragment (lo in the low half).
template <typename T>
struct alignas(4) Two {
  T lo, hi;
};

template <typename T>
__device__ __forceinline__ uint32_t reg_of(Two<T> v) {
  uint32_t r;
  static_assert(sizeof(Two<T>) == 4, "two 16-bit values");
  memcpy(&r, &v, 4);
  return r;
}

template <typename T>
__device__ __forceinline__ void mma_16x8x8(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t b);

template <>
__device__ __forceinline__ void mma_16x8x8<__half>(float (&c)[4], uint32_t a0, uint32_t a1,
                                                   uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(b));
}

template <>
__device__ __forceinline__ void mma_16x8x8<__nv_bfloat16>(float (&c)[4], uint32_t a0, uint32_t a1,
                                                          uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(b));
}

// The host's m16n8k8: c[lane][i] += (A B)[row, col] for each lane's four C elements, where
// a0[lane], a1[lane], b[lane] are the lanes' fragment registers as the kernels load them. Summed
// in float in k order (the device's order within an mma is its own: compare with a tolerance).
template <typename T>
void emulate_mma_16x8x8(float (&c)[32][4], const Two<T> (&a0)[32], const Two<T> (&a1)[32],
                        const Two<T> (&b)[32]) {
  float A[16][8], B[8][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, q = lane % 4;
    A[g][2 * q] = load_f(&a0[lane].lo, 0), A[g][2 * q + 1] = load_f(&a0[lane].hi, 0);
    A[g + 8][2 * q] = load_f(&a1[lane].lo, 0), A[g + 8][2 * q + 1] = load_f(&a1[lane].hi, 0);
    B[2 * q][g] = load_f(&b[lane].lo, 0), B[2 * q + 1][g] = load_f(&b[lane].hi, 0);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, q = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i / 2) * 8, col = 2 * q + i % 2;
      float s = 0.0f;
      for (int k = 0; k < 8; ++k) s += A[row][k] * B[k][col];
      c[lane][i] += s;
    }
  }
}

}  // namespace mma
}  // namespace cnnbench
