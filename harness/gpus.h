// Card memory sizes (configs/gpus.yaml) and --memory-limit (issue 5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cnnbench {

struct GpuCard {
  std::string name;   // "A100-80GB"
  double memory_gib;  // as sold
};

struct GpuTable {
  std::vector<int> sizes;  // GiB classes of the max-batch table
  std::vector<GpuCard> cards;
};

// Parses configs/gpus.yaml's text; UserError naming the file and the problem.
GpuTable parse_gpu_table(const std::string& text, const std::string& source);
GpuTable load_gpu_table(const std::string& path);

struct MemoryLimit {
  uint64_t bytes = 0;  // 0: no limit
  std::string label;   // "16 GiB" or "A100 (40 GiB)"
};

// --memory-limit: a size in GiB ("16", "16GB", "16GiB", "7.5g") or a card of `table` by name,
// case and '-', '_', ' ' ignored ("a100-80gb", "V100_32GB"). UserError otherwise, naming the
// cards.
MemoryLimit parse_memory_limit(const std::string& value, const GpuTable& table);

}  // namespace cnnbench
