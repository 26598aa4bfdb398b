#include "harness/context.h"

#include <unistd.h>  // environ

#include <fstream>

#include "cnnbench_git.h"  // generated at build time: CNNBENCH_GIT

namespace cnnbench {

std::string version_string(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::map<std::string, std::string> cnnbench_switches() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (kv.rfind("CNNBENCH_", 0) == 0 && eq != std::string::npos)
      out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::string switches_text(const std::map<std::string, std::string>& switches) {
  std::string out;
  for (const auto& [k, v] : switches) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out.empty() ? "none" : out;
}

std::vector<std::pair<std::string, std::string>> context_entries(const DeviceInfo& d) {
  auto s = [](auto x) { return std::to_string(x); };
  return {
      {"gpu_name", d.name},
      {"gpu_compute_capability", s(d.cc_major) + "." + s(d.cc_minor)},
      {"gpu_sm_count", s(d.sm_count)},
      {"gpu_memory_mib", s(d.memory_bytes >> 20)},
      {"gpu_sm_clock_mhz", s(d.sm_clock_mhz)},
      {"gpu_mem_clock_mhz", s(d.mem_clock_mhz)},
      {"gpu_memory_bus_bits", s(d.memory_bus_bits)},
      {"gpu_l2_mib", s(d.l2_bytes >> 20)},
      {"gpu_uuid", d.uuid},
      {"gpu_power_limit_w", d.power_limit_w > 0 ? s(int(d.power_limit_w + 0.5)) : "unknown"},
      {"gpu_app_sm_clock_mhz", d.app_sm_clock_mhz > 0 ? s(d.app_sm_clock_mhz) : "unknown"},
      {"gpu_app_mem_clock_mhz", d.app_mem_clock_mhz > 0 ? s(d.app_mem_clock_mhz) : "unknown"},
      {"gpu_max_sm_clock_mhz", d.max_sm_clock_mhz > 0 ? s(d.max_sm_clock_mhz) : "unknown"},
      {"gpu_ecc", d.ecc},
      {"driver_version", cuda_version_string(d.driver_version)},
      {"driver_release", d.driver_release},
      {"cuda_runtime_version", cuda_version_string(d.runtime_version)},
      {"cudnn_version_loaded", version_string(d.cudnn_loaded)},
      {"cudnn_version_compiled", version_string(d.cudnn_compiled)},
      {"cudnn_library_path", d.cudnn_library_path},
      {"cublas_version", version_string(size_t(d.cublas_version))},
      {"cublas_version_compiled", version_string(size_t(d.cublas_compiled))},
      {"cublas_library_path", d.cublas_library_path},
      {"cnnbench_version", CNNBENCH_VERSION},
      {"cnnbench_git", CNNBENCH_GIT},
      {"cnnbench_switches", switches_text(cnnbench_switches())},
  };
}

const std::vector<std::string>& counter_names() {
  static const std::vector<std::string> names = {
      "img_per_s",         "ms_per_batch",        "tflops",        "arena_peak_mib",
      "device_peak_mib",   "device_before_mib",   "weights_mib",   "activations_mib",
      "gradients_mib",     "optimizer_state_mib", "workspace_mib", "batch",
      "replays_per_timing"};
  return names;
}

std::map<std::string, double> counters_for(const Measurement& m) {
  const double mib = 1.0 / (1 << 20);
  const double ms = m.forwards > 0 ? m.total_ms / double(m.forwards) : 0.0;
  const double seconds = ms * 1e-3;
  const uint64_t arena = m.weights_bytes + m.activations_bytes + m.workspace_bytes +
                         m.gradients_bytes + m.optimizer_state_bytes;
  return {
      {"img_per_s", seconds > 0 ? m.batch / seconds : 0.0},
      {"ms_per_batch", ms},
      {"tflops", seconds > 0 ? m.flops_per_image * m.batch / seconds * 1e-12 : 0.0},
      {"arena_peak_mib", arena * mib},
      {"device_peak_mib", m.device_peak_bytes * mib},
      {"device_before_mib", m.device_before_bytes * mib},
      {"gradients_mib", m.gradients_bytes * mib},
      {"optimizer_state_mib", m.optimizer_state_bytes * mib},
      {"weights_mib", m.weights_bytes * mib},
      {"activations_mib", m.activations_bytes * mib},
      {"workspace_mib", m.workspace_bytes * mib},
      {"batch", double(m.batch)},
      {"replays_per_timing", double(m.replays_per_timing)},
  };
}

uint64_t host_rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  return resident * uint64_t(page > 0 ? page : 4096);
}

}  // namespace cnnbench
