// A layer table entry (LayerRecord, kernels/op.h) as JSON: the fields every layer table writes
// (cnnbench's --layers_out for inference and training, cnnbench_stylegan_train's rows).
#pragma once

#include <nlohmann/json.hpp>

#include "kernels/op.h"

namespace cnnbench {

// Json: nlohmann::json, or nlohmann::ordered_json for a document that keeps its key order.
template <class Json = nlohmann::json>
Json layer_record_json(const LayerRecord& r) {
  return {{"name", r.name},
          {"op", r.op},
          {"shape", r.shape},
          {"engine", r.engine},
          {"engine_notes", r.engine_notes},
          {"fused", r.fused},
          {"workspace_bytes", r.workspace_bytes},
          {"tuned_us", r.tuned_us},
          {"candidates", r.candidates},
          {"build_ms", r.build_ms},
          {"plan_reused", r.plan_reused},
          {"from_plan_cache", r.from_plan_cache},
          {"tuned_in_graph", r.tuned_in_graph},
          {"tuned_eager_us", r.tuned_eager_us},
          {"heuristic_source", r.heuristic_source},
          {"rejected_plans", r.rejected}};
}

}  // namespace cnnbench
