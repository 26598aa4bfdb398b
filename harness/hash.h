// FNV-1a, 64 bits: a cheap, stable hash of bytes (seeds by name, a layout or a set of weights
// compared across processes). Not for security.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cnnbench {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace cnnbench
