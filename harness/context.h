// What goes into the JSON: the run's context (device and versions) and each benchmark's counters.
// Host-only, so the names and the arithmetic are tested without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cnnbench {

struct DeviceInfo {
  int device = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  uint64_t memory_bytes = 0;
  int sm_clock_mhz = 0;   // peak
  int mem_clock_mhz = 0;  // peak
  int memory_bus_bits = 0;
  int l2_bytes = 0;
  int driver_version = 0;   // cudaDriverGetVersion: 13000 for 13.0
  int runtime_version = 0;  // cudaRuntimeGetVersion
  size_t cudnn_loaded = 0;  // cudnnGetVersion(): 91900 for 9.19.0
  size_t cudnn_compiled = 0;
  std::string cudnn_library_path;  // the libcudnn actually loaded
  int cublas_version = 0;          // cublasLtGetVersion()
  int cublas_compiled = 0;
  std::string cublas_library_path;
  // From NVML (libnvidia-ml, loaded at run time where the driver has it; "unknown" or 0 else):
  std::string driver_release = "unknown";  // "580.159.04", where driver_version says 13.0
  std::string uuid = "unknown";            // "GPU-…" (the CUDA runtime's, where NVML is missing)
  double power_limit_w = 0;                // the enforced power-management limit
  int app_sm_clock_mhz = 0, app_mem_clock_mhz = 0;  // application clocks
  int max_sm_clock_mhz = 0;
  std::string ecc = "unknown";  // "on" / "off"
};

// Key/value pairs for benchmark::AddCustomContext, in a fixed order. They include
// "cnnbench_switches": the CNNBENCH_* environment variables this process runs under (the kernels'
// A/B switches, such as CNNBENCH_STEM_WGRAD=1), as KEY=VALUE joined by commas, or "none".
std::vector<std::pair<std::string, std::string>> context_entries(const DeviceInfo& d);
// The CNNBENCH_* environment variables, sorted by name.
std::map<std::string, std::string> cnnbench_switches();
std::string switches_text(const std::map<std::string, std::string>& switches);
std::string version_string(size_t cudnn_style_version);  // 91900 -> "9.19.0"
std::string cuda_version_string(int v);                  // 13000 -> "13.0"

// One benchmark's measurement, summed over its timed replays.
struct Measurement {
  int batch = 0;
  int64_t forwards = 0;  // timed forward passes
  double total_ms = 0;   // their summed device time (CUDA events)
  double flops_per_image = 0;
  uint64_t weights_bytes = 0, activations_bytes = 0, workspace_bytes = 0;
  uint64_t gradients_bytes = 0, optimizer_state_bytes = 0;  // training only
  uint64_t device_before_bytes = 0;  // cudaMemGetInfo: used before the model was built
  uint64_t device_peak_bytes = 0;    // cudaMemGetInfo: used at its highest, context included
  int replays_per_timing = 1;        // forwards between one pair of events
};

// The counter names, in the order they are written.
// The process's resident set (bytes), from /proc/self/statm; 0 where that cannot be read.
uint64_t host_rss_bytes();

const std::vector<std::string>& counter_names();
std::map<std::string, double> counters_for(const Measurement& m);

}  // namespace cnnbench
