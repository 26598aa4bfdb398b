#include "harness/offsets.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace cnnbench {

std::vector<size_t> plan_offsets(const std::vector<LiveBuffer>& buffers, size_t* peak) {
  std::vector<int> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> offset(buffers.size(), 0);
  std::vector<int> placed;
  size_t high = 0;
  for (int i : order) {
    const LiveBuffer& b = buffers[i];
    std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of conflicting buffers
    for (int j : placed) {
      const LiveBuffer& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) busy.push_back({offset[j], offset[j] + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& r : busy) {
      if (at + b.bytes <= r.first) break;
      at = std::max(at, r.second);
    }
    offset[i] = at;
    high = std::max(high, at + b.bytes);
    placed.push_back(i);
  }
  if (peak) *peak = high;
  return offset;
}

}  // namespace cnnbench
