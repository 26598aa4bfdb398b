// Standard normal numbers from a counter, the same on the host and the device: element i of
// stream `seed` is Box-Muller on two 24-bit uniforms of splitmix64(seed, i). For a benchmark's
// fresh latents each iteration (NVlabs' training loop draws z with torch.randn every phase), not
// for statistics that need a vetted generator. A CPU test checks its moments.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace cnnbench {

__host__ __device__ __forceinline__ uint64_t splitmix64_at(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__host__ __device__ __forceinline__ float counter_normal(uint64_t seed, uint64_t i) {
  const uint64_t r = splitmix64_at(seed, i);
  const float u1 = (float((r >> 40) & 0xFFFFFF) + 1.f) * (1.f / 16777216.f);  // (0, 1]
  const float u2 = float((r >> 16) & 0xFFFFFF) * (1.f / 16777216.f);          // [0, 1)
  return sqrtf(-2.f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

}  // namespace cnnbench
