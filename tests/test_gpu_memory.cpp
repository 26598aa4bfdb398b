// Issue 5 on the GPU: an out-of-memory leaves the device as it was and the next model builds;
// ResNet-50's planned arena against what the device shows at its fullest; the memory cap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "gpu_util.h"
#include "harness/check.h"
#include "harness/device.h"
#include "harness/runner.h"
#include "harness/session.h"
#include "networks/registry.h"
#include "networks/weights.h"

using namespace cnnbench;
using namespace cnnbench::test;

namespace {

double mib(double bytes) {
  return bytes / 1048576.0;
}

// Builds, captures and runs ResNet-50 once at `batch`; returns the arena's bytes (weights,
// activations, workspace).
size_t build_and_run(GpuContext& ctx, const Graph& g, const HostWeights& w, int batch,
                     DevicePeak* peak = nullptr) {
  CompileOptions opt;
  opt.precision = Precision::FP16;
  opt.batch = batch;
  Model m(ctx, g, w, opt);
  if (peak) peak->sample();
  Runner r(m, ctx);
  r.capture();
  if (peak) peak->sample();
  r.launch(true);
  r.sync();
  if (peak) peak->sample();
  for (float v : m.output()) EXPECT_TRUE(std::isfinite(v));
  return m.arena().total_bytes() + m.arena().bytes(MemKind::Workspace);
}

}  // namespace

// Builds ResNet-50 at `batch` expecting an out-of-memory: true when it was one.
bool fails_out_of_memory(GpuContext& ctx, const Graph& g, const HostWeights& w, int batch) {
  try {
    build_and_run(ctx, g, w, batch);
  } catch (const std::exception& e) {
    EXPECT_TRUE(is_out_of_memory(e)) << "not an out-of-memory: " << e.what();
    return is_out_of_memory(e);
  }
  return false;
}

// With the device capped a few GiB above what it uses, ResNet-50 at batch 2048 cannot fit: the
// failure is an out-of-memory, everything it took comes back (to within 1 MiB), and batch 8
// builds and runs after it. The first failure at 2048 loads kernels of shapes batch 8 never ran
// (lazy module loading keeps 2 MiB in the driver: call 12), so the one measured is the second;
// the first's drift is printed too.
TEST(GpuMemory, OutOfMemoryLeavesTheDeviceAsItWasAndTheNextModelRuns) {
  const Graph g = build_network("resnet50");
  const HostWeights w = random_weights(g, 1);
  GpuContext ctx;
  build_and_run(ctx, g, w, 8);  // the libraries' lazy allocations happen here, before the baseline
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  size_t free_b = 0, total = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_b, &total));
  DeviceMemoryCap cap((total - free_b) + (size_t(3) << 30));
  EXPECT_GT(cap.ballast_bytes(), 0u);
  const uint64_t first = device_free_bytes();
  EXPECT_TRUE(fails_out_of_memory(ctx, g, w, 2048)) << "batch 2048 fitted in 3 GiB";
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  const uint64_t before = device_free_bytes();
  EXPECT_TRUE(fails_out_of_memory(ctx, g, w, 2048)) << "batch 2048 fitted in 3 GiB";
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  const double drift = mib(double(before) - double(device_free_bytes()));
  std::printf("  after the first out-of-memory: %.2f MiB not returned; after the second: %.2f\n",
              mib(double(first) - double(before)), drift);
  EXPECT_LT(std::fabs(drift), 1.0);
  EXPECT_GT(build_and_run(ctx, g, w, 8), 0u);
}

// The arena planned for ResNet-50 fp16 at batch 32 against the device's used memory at its
// fullest, above what the device used before the model (context, libraries): within 10%.
TEST(GpuMemory, ResNet50ArenaMatchesTheDeviceAtItsFullest) {
  const Graph g = build_network("resnet50");
  const HostWeights w = random_weights(g, 1);
  GpuContext ctx;
  build_and_run(ctx, g, w, 32);  // loads what the libraries load lazily
  CNN_CHECK_CUDA(cudaDeviceSynchronize());
  DevicePeak peak;
  const uint64_t base = peak.sample();
  const size_t arena = build_and_run(ctx, g, w, 32, &peak);
  const double device = double(peak.peak() - base);
  std::printf("  arena %.1f MiB, device at its fullest %.1f MiB above the baseline\n", mib(arena),
              mib(device));
  EXPECT_NEAR(double(arena), device, 0.10 * device);
}

// The cap makes the device look as small as asked: free memory falls to the limit less what is
// used, and rises back when the cap goes.
TEST(GpuMemory, TheCapHoldsTheRestOfTheDevice) {
  GpuContext ctx;
  size_t free_b = 0, total = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_b, &total));
  const uint64_t used = total - free_b;
  {
    DeviceMemoryCap cap(used + (size_t(2) << 30));
    const uint64_t now = device_free_bytes();
    EXPECT_NEAR(mib(double(now)), 2048.0, 8.0);
    // The suite's use leaves the ballast out: what it was before the cap.
    EXPECT_NEAR(mib(double(device_used_bytes())), mib(double(used)), 8.0);
  }
  EXPECT_NEAR(mib(double(device_free_bytes())), mib(double(free_b)), 8.0);
  EXPECT_THROW(DeviceMemoryCap(used / 2), UserError);
}

// A checked call that fails leaves nothing behind for the next check: the launch after a handled
// out-of-memory does not report it again as its own (device call 28 found that it did).
TEST(GpuMemory, AHandledOutOfMemoryIsNotReportedAgainByTheNextLaunch) {
  GpuContext ctx;
  void* p = nullptr;
  try {
    CNN_CHECK_CUDA(cudaMalloc(&p, size_t(1) << 50));  // a petabyte: fails on any device
    ADD_FAILURE() << "a petabyte was allocated";
  } catch (const std::exception& e) {
    EXPECT_TRUE(is_out_of_memory(e)) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}
