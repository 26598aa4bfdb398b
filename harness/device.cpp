#include "harness/device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <climits>
#include <cstdlib>

#include "harness/check.h"

namespace cnnbench {

namespace {
std::string library_of(const void* symbol) {
  Dl_info info{};
  if (!dladdr(symbol, &info) || !info.dli_fname) return "unknown";
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) ? std::string(resolved) : std::string(info.dli_fname);
}

int attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  CNN_CHECK_CUDA(cudaDeviceGetAttribute(&v, attr, device));
  return v;
}
}  // namespace

int cuda_device_count(std::string* reason) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();
    return 0;
  }
  if (count == 0 && reason) *reason = "the CUDA runtime reports no devices";
  return count;
}

DeviceInfo discover_device(int device) {
  DeviceInfo d;
  d.device = device;
  cudaDeviceProp prop{};
  CNN_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.memory_bytes = prop.totalGlobalMem;
  d.l2_bytes = prop.l2CacheSize;
  d.sm_clock_mhz = attribute(cudaDevAttrClockRate, device) / 1000;
  d.mem_clock_mhz = attribute(cudaDevAttrMemoryClockRate, device) / 1000;
  d.memory_bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  CNN_CHECK_CUDA(cudaDriverGetVersion(&d.driver_version));
  CNN_CHECK_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
  d.cudnn_loaded = cudnnGetVersion();
  d.cudnn_compiled = CUDNN_VERSION;
  d.cudnn_library_path = library_of(reinterpret_cast<const void*>(&cudnnGetVersion));
  d.cublas_version = int(cublasLtGetVersion());
  d.cublas_compiled = CUBLAS_VERSION;
  d.cublas_library_path = library_of(reinterpret_cast<const void*>(&cublasLtGetVersion));
  return d;
}

uint64_t device_free_bytes() {
  size_t free_bytes = 0, total = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

DeviceMemoryCap::DeviceMemoryCap(uint64_t limit_bytes) {
  size_t free_bytes = 0, total = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  const uint64_t used = total - free_bytes;
  if (limit_bytes >= total) return;
  if (limit_bytes <= used)
    throw UserError("--memory-limit of " + std::to_string(limit_bytes >> 20) +
                    " MiB is below what the device already uses (" + std::to_string(used >> 20) +
                    " MiB: the CUDA context and libraries)");
  bytes_ = free_bytes - (limit_bytes - used);
  CNN_CHECK_CUDA(cudaMalloc(&ballast_, bytes_));
}

DeviceMemoryCap::~DeviceMemoryCap() {
  if (ballast_) cudaFree(ballast_);
}

uint64_t DevicePeak::sample() {
  size_t free_bytes = 0, total = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  const uint64_t used = total - free_bytes;
  if (used > peak_) peak_ = used;
  return used;
}

}  // namespace cnnbench
