// Device and version discovery, and the device-level memory high-water mark.
#pragma once

#include <string>

#include "harness/context.h"

namespace cnnbench {

// Number of CUDA devices; 0 with `reason` filled when there is none (no driver, no GPU).
int cuda_device_count(std::string* reason);
// Everything about device `device` and the libraries actually loaded.
DeviceInfo discover_device(int device = 0);

// Tracks the device's used memory (total - free from cudaMemGetInfo, so the context and the
// libraries' own allocations count) at its highest across sample() calls.
class DevicePeak {
 public:
  void reset() { peak_ = 0; }
  uint64_t sample();  // returns the current used bytes
  uint64_t peak() const { return peak_; }

 private:
  uint64_t peak_ = 0;
};

}  // namespace cnnbench
