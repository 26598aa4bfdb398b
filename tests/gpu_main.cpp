// GPU tests: without a CUDA device, say so and exit 77, which ctest reports as skipped.
#include <gtest/gtest.h>

#include <cstdio>

#include "harness/device.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // Listing needs no device (tests/gpu_filters_test.py checks ctest's filters and shards with it).
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  std::string reason;
  if (cnnbench::cuda_device_count(&reason) == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", reason.c_str());
    return 77;
  }
  const int rc = RUN_ALL_TESTS();
  // A filter that selects nothing is a mistake (a renamed suite), never a pass.
  if (testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::printf("FAILED: the filter selected no test\n");
    return 1;
  }
  return rc;
}
