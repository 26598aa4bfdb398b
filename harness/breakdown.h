// The per-layer breakdown (issue 8): each layer timed alone, its work and traffic, and where it
// sits under the machine's ceilings (a large GEMM's TFLOP/s and a device-to-device copy's GB/s,
// both measured by the suite). Host-only arithmetic and output here, tested on a CPU; the
// timing is Model::time_each_op and harness/ceilings.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cnnbench {

struct LayerCost {
  std::string name, op, engine;
  double us = 0;     // the layer alone, per run
  double flops = 0;  // 2 x multiply-accumulates of its convs and linears, whole batch
  double bytes = 0;  // inputs + outputs + weights, whole batch
};

struct Ceilings {
  double tflops = 0;  // the GEMM ceiling
  double gbps = 0;    // the copy ceiling (bytes read + written per second)
};

struct LayerBound {
  double tflops = 0, gbps = 0;
  double intensity = 0;  // flop per byte
  double ridge = 0;      // the ceilings' ratio: above it compute bound, below memory bound
  std::string bound;     // "compute" or "memory"
  // The roofline's time (the larger of flops / peak and bytes / bandwidth) over the measured
  // time: 1 is at the ceiling.
  double of_roofline = 0;
};

LayerBound roofline(const LayerCost& c, const Ceilings& k);
// The layer's time at its roofline, in microseconds: the larger of flops / peak and bytes /
// bandwidth (0 for a missing ceiling).
double roofline_us(const LayerCost& c, const Ceilings& k);

struct Breakdown {
  std::vector<LayerCost> layers;
  Ceilings ceilings;
  double graph_us = 0;  // the whole forward, one CUDA-graph replay
  double layer_sum_us() const;
};

// The layers' time were each at its roofline (the larger of flops / peak and bytes / bandwidth),
// summed: the floor this set of layers and kernels' traffic leaves, in microseconds.
double roofline_floor_us(const Breakdown& b);
// The layers merged by their `op` (time, work and traffic summed), in order of first appearance;
// the name of each row is its op and the count ("fwd Conv (53)").
Breakdown by_op(const Breakdown& b);

std::string breakdown_table(const Breakdown& b);
nlohmann::json breakdown_json(const Breakdown& b);

}  // namespace cnnbench
