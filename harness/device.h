// Device and version discovery, and the device-level memory high-water mark.
#pragma once

#include <string>

#include "harness/context.h"

namespace cnnbench {

// Number of CUDA devices; 0 with `reason` filled when there is none (no driver, no GPU).
int cuda_device_count(std::string* reason);
// Everything about device `device` and the libraries actually loaded.
DeviceInfo discover_device(int device = 0);

// The device's free memory now (cudaMemGetInfo).
uint64_t device_free_bytes();
// The memory the suite uses now: total - free from cudaMemGetInfo, so the CUDA context and the
// libraries' own allocations count, less the ballast of a DeviceMemoryCap (which stands for the
// memory a smaller card does not have).
uint64_t device_used_bytes();

// --memory-limit (issue 5): while it lives, the rest of the device is held by one allocation (the
// ballast), so every allocation past `limit_bytes` of used memory fails as it would on a card of
// that size: ours, cuDNN's and cuBLAS's alike, and the CUDA context and the libraries' own
// memory count toward the limit. UserError where the limit is below what is already in use; no
// ballast where it is at or above the device's size.
class DeviceMemoryCap {
 public:
  explicit DeviceMemoryCap(uint64_t limit_bytes);
  ~DeviceMemoryCap();
  DeviceMemoryCap(const DeviceMemoryCap&) = delete;
  DeviceMemoryCap& operator=(const DeviceMemoryCap&) = delete;
  uint64_t ballast_bytes() const { return bytes_; }

 private:
  void* ballast_ = nullptr;
  uint64_t bytes_ = 0;
};

// Tracks device_used_bytes() at its highest across sample() calls.
class DevicePeak {
 public:
  void reset() { peak_ = 0; }
  uint64_t sample();  // returns the current used bytes
  uint64_t peak() const { return peak_; }

 private:
  uint64_t peak_ = 0;
};

}  // namespace cnnbench
