// GPU tests: without a CUDA device, say so and exit 77, which ctest reports as skipped.
#include <gtest/gtest.h>

#include <cstdio>

#include "harness/device.h"

int main(int argc, char** argv) {
  std::string reason;
  if (cnnbench::cuda_device_count(&reason) == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", reason.c_str());
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
