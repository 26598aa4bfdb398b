#include "harness/device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "harness/check.h"

namespace cnnbench {

namespace {
std::string library_of(const void* symbol) {
  Dl_info info{};
  if (!dladdr(symbol, &info) || !info.dli_fname) return "unknown";
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) ? std::string(resolved) : std::string(info.dli_fname);
}

// NVML, loaded at run time (no link dependency: a machine without it still runs the suite).
// The few entry points used, declared as the driver's libnvidia-ml.so.1 exports them.
struct Nvml {
  using Device = void*;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*by_pci)(const char*, Device*) = nullptr;
  int (*uuid)(Device, char*, unsigned) = nullptr;
  int (*power_limit)(Device, unsigned*) = nullptr;     // mW
  int (*app_clock)(Device, int, unsigned*) = nullptr;  // type 1 SM, 2 memory; MHz
  int (*max_clock)(Device, int, unsigned*) = nullptr;
  int (*ecc_mode)(Device, int*, int*) = nullptr;  // current, pending; 1 enabled
};

void add_nvml_info(DeviceInfo& d, int device) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  Nvml n;
  auto sym = [&](auto& f, const char* name) {
    f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
  };
  sym(n.init, "nvmlInit_v2");
  sym(n.shutdown, "nvmlShutdown");
  sym(n.driver_version, "nvmlSystemGetDriverVersion");
  sym(n.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  sym(n.uuid, "nvmlDeviceGetUUID");
  sym(n.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  sym(n.app_clock, "nvmlDeviceGetApplicationsClock");
  sym(n.max_clock, "nvmlDeviceGetMaxClockInfo");
  sym(n.ecc_mode, "nvmlDeviceGetEccMode");
  if (!n.init || !n.shutdown || n.init() != 0) {
    dlclose(lib);
    return;
  }
  char buf[96] = {0};
  if (n.driver_version && n.driver_version(buf, sizeof buf) == 0) d.driver_release = buf;
  char pci[32] = {0};
  Nvml::Device dev = nullptr;
  if (cudaDeviceGetPCIBusId(pci, sizeof pci, device) == cudaSuccess && n.by_pci &&
      n.by_pci(pci, &dev) == 0) {
    unsigned v = 0;
    if (n.uuid && n.uuid(dev, buf, sizeof buf) == 0) d.uuid = buf;
    if (n.power_limit && n.power_limit(dev, &v) == 0) d.power_limit_w = v / 1000.0;
    if (n.app_clock && n.app_clock(dev, 1, &v) == 0) d.app_sm_clock_mhz = int(v);
    if (n.app_clock && n.app_clock(dev, 2, &v) == 0) d.app_mem_clock_mhz = int(v);
    if (n.max_clock && n.max_clock(dev, 1, &v) == 0) d.max_sm_clock_mhz = int(v);
    int cur = -1, pending = -1;
    if (n.ecc_mode && n.ecc_mode(dev, &cur, &pending) == 0) d.ecc = cur == 1 ? "on" : "off";
  }
  cudaGetLastError();
  n.shutdown();
  dlclose(lib);
}

// The CUDA runtime's UUID as NVML writes it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string uuid_string(const cudaUUID_t& u) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    const auto b = static_cast<unsigned char>(u.bytes[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
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
  d.uuid = uuid_string(prop.uuid);
  d.ecc = prop.ECCEnabled ? "on" : "off";
  add_nvml_info(d, device);  // the driver's release, power limit and clocks, where NVML loads
  return d;
}

namespace {
uint64_t g_ballast_bytes = 0;  // held by the DeviceMemoryCap alive, if any
}  // namespace

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
  g_ballast_bytes += bytes_;
}

DeviceMemoryCap::~DeviceMemoryCap() {
  if (ballast_) {
    cudaFree(ballast_);
    g_ballast_bytes -= bytes_;
  }
}

uint64_t device_used_bytes() {
  size_t free_bytes = 0, total = 0;
  CNN_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  const uint64_t used = total - free_bytes;
  return used > g_ballast_bytes ? used - g_ballast_bytes : 0;
}

uint64_t DevicePeak::sample() {
  const uint64_t used = device_used_bytes();
  if (used > peak_) peak_ = used;
  return used;
}

}  // namespace cnnbench
