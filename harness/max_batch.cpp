#include "harness/max_batch.h"

#include <algorithm>
#include <map>

namespace cnnbench {

const char* fit_name(Fit f) {
  switch (f) {
    case Fit::Fits:
      return "fits";
    case Fit::OutOfMemory:
      return "out of memory";
    case Fit::Error:
      return "error";
  }
  return "?";
}

MaxBatch search_max_batch(const std::function<Attempt(int batch)>& try_batch, int start, int cap) {
  MaxBatch r;
  cap = std::max(cap, 1);
  std::map<int, Attempt> seen;
  // Tries b once; false when a real error ends the search.
  auto attempt = [&](int b) {
    auto it = seen.find(b);
    if (it == seen.end()) {
      Attempt a = try_batch(b);
      a.batch = b;
      r.attempts.push_back(a);
      it = seen.emplace(b, a).first;
    }
    const Attempt& a = it->second;
    if (a.fit == Fit::Error) {
      r.error = "batch " + std::to_string(b) + ": " + a.message;
      return false;
    }
    if (a.fit == Fit::Fits && b > r.largest) {
      r.largest = b;
      r.peak_mib_at_largest = a.peak_mib;
    }
    if (a.fit == Fit::OutOfMemory && (r.first_failed == 0 || b < r.first_failed))
      r.first_failed = b;
    return true;
  };
  int b = std::clamp(start, 1, cap);
  // Bracket: one batch that fits and one that does not (or batch 1 failing, or the cap fitting).
  while (true) {
    if (!attempt(b)) return r;
    if (r.largest > 0 && r.first_failed > 0) break;
    if (r.first_failed == 0) {  // everything so far fitted
      if (b == cap) {
        r.capped = true;
        return r;
      }
      b = int(std::min<long>(2L * b, cap));
    } else {  // everything so far failed
      if (b == 1) return r;
      b = std::max(1, b / 2);
    }
  }
  // Bisect between them.
  while (r.first_failed - r.largest > 1) {
    const int mid = r.largest + (r.first_failed - r.largest) / 2;
    if (!attempt(mid)) return r;
  }
  return r;
}

}  // namespace cnnbench
