#include "harness/breakdown.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace cnnbench {

LayerBound roofline(const LayerCost& c, const Ceilings& k) {
  LayerBound b;
  const double s = c.us * 1e-6;
  b.tflops = s > 0 ? c.flops / s * 1e-12 : 0;
  b.gbps = s > 0 ? c.bytes / s * 1e-9 : 0;
  b.intensity = c.bytes > 0 ? c.flops / c.bytes : 0;
  b.ridge = k.gbps > 0 ? k.tflops * 1e12 / (k.gbps * 1e9) : 0;
  b.bound = b.intensity >= b.ridge && c.flops > 0 ? "compute" : "memory";
  b.of_roofline = s > 0 ? roofline_us(c, k) * 1e-6 / s : 0;
  return b;
}

double roofline_us(const LayerCost& c, const Ceilings& k) {
  const double t_compute = k.tflops > 0 ? c.flops / (k.tflops * 1e12) : 0;
  const double t_memory = k.gbps > 0 ? c.bytes / (k.gbps * 1e9) : 0;
  return std::max(t_compute, t_memory) * 1e6;
}

double roofline_floor_us(const Breakdown& b) {
  double t = 0;
  for (const LayerCost& l : b.layers) t += roofline_us(l, b.ceilings);
  return t;
}

Breakdown by_op(const Breakdown& b) {
  Breakdown out;
  out.ceilings = b.ceilings, out.graph_us = b.graph_us;
  std::vector<int> counts;
  for (const LayerCost& l : b.layers) {
    size_t i = 0;
    while (i < out.layers.size() && out.layers[i].op != l.op) ++i;
    if (i == out.layers.size()) {
      out.layers.push_back({"", l.op, "", 0, 0, 0});
      counts.push_back(0);
    }
    out.layers[i].us += l.us, out.layers[i].flops += l.flops, out.layers[i].bytes += l.bytes;
    ++counts[i];
  }
  for (size_t i = 0; i < out.layers.size(); ++i)
    out.layers[i].name = out.layers[i].op + " (" + std::to_string(counts[i]) + ")";
  return out;
}

double Breakdown::layer_sum_us() const {
  double t = 0;
  for (const LayerCost& l : layers) t += l.us;
  return t;
}

std::string breakdown_table(const Breakdown& b) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "ceilings: GEMM %.0f TFLOP/s, copy %.0f GB/s (ridge %.0f flop/byte)\n",
                b.ceilings.tflops, b.ceilings.gbps,
                b.ceilings.gbps > 0 ? b.ceilings.tflops * 1e3 / b.ceilings.gbps : 0.0);
  out += line;
  std::snprintf(line, sizeof line, "%-34s %-26s %9s %9s %9s %8s %8s %-7s %6s  %s\n", "layer", "op",
                "us", "GFLOP", "MB", "TFLOP/s", "GB/s", "bound", "roof", "engine");
  out += line;
  for (const LayerCost& l : b.layers) {
    const LayerBound r = roofline(l, b.ceilings);
    std::snprintf(line, sizeof line,
                  "%-34.34s %-26.26s %9.1f %9.3f %9.2f %8.1f %8.0f %-7s %5.0f%%  %s\n",
                  l.name.c_str(), l.op.c_str(), l.us, l.flops * 1e-9, l.bytes * 1e-6, r.tflops,
                  r.gbps, r.bound.c_str(), 100 * r.of_roofline, l.engine.c_str());
    out += line;
  }
  std::snprintf(line, sizeof line,
                "sum of layers %.1f us, whole graph %.1f us (layers alone / graph: %.2f)\n",
                b.layer_sum_us(), b.graph_us, b.graph_us > 0 ? b.layer_sum_us() / b.graph_us : 0.0);
  out += line;
  return out;
}

nlohmann::json breakdown_json(const Breakdown& b) {
  nlohmann::json j;
  j["ceilings"] = {{"gemm_tflops", b.ceilings.tflops}, {"copy_gbps", b.ceilings.gbps}};
  j["graph_us"] = b.graph_us;
  j["layer_sum_us"] = b.layer_sum_us();
  j["layers"] = nlohmann::json::array();
  for (const LayerCost& l : b.layers) {
    const LayerBound r = roofline(l, b.ceilings);
    j["layers"].push_back({{"name", l.name},
                           {"op", l.op},
                           {"engine", l.engine},
                           {"us", l.us},
                           {"flops", l.flops},
                           {"bytes", l.bytes},
                           {"tflops", r.tflops},
                           {"gbps", r.gbps},
                           {"intensity", r.intensity},
                           {"bound", r.bound},
                           {"of_roofline", r.of_roofline}});
  }
  return j;
}

}  // namespace cnnbench
