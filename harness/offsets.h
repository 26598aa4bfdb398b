// Where buffers with lifetimes go in one allocation: the arena's activation plan, host only so
// that the training plan and the tests use the same algorithm without a GPU.
#pragma once

#include <cstddef>
#include <vector>

namespace cnnbench {

// A buffer live from step `first` to step `last` inclusive.
struct LiveBuffer {
  size_t bytes = 0;
  int first = 0, last = 0;
};

// Greedy: largest first (ties in the given order), each at the lowest offset that overlaps no
// already placed buffer whose lifetime intersects its own. Returns one offset per buffer; `peak`
// (if not null) gets the high-water mark, max(offset + bytes).
std::vector<size_t> plan_offsets(const std::vector<LiveBuffer>& buffers, size_t* peak);

}  // namespace cnnbench
