#include "harness/max_batch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

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

namespace {
// The search in units of `multiple` batches: try_batch gets the batch (units * multiple); the
// result is in units (search_max_batch scales it), the error names the batch.
MaxBatch search_units(const std::function<Attempt(int batch)>& try_batch, int start, int cap,
                      double limit_mib, int multiple) {
  MaxBatch r;
  cap = std::max(cap, 1);
  std::map<int, Attempt> seen;
  // Tries b once; false when a real error ends the search.
  auto attempt = [&](int b) {
    auto it = seen.find(b);
    if (it == seen.end()) {
      Attempt a = try_batch(b * multiple);
      a.batch = b;
      r.attempts.push_back(a);
      it = seen.emplace(b, a).first;
    }
    const Attempt& a = it->second;
    if (a.fit == Fit::Error) {
      r.error = "batch " + std::to_string(b * multiple) + ": " + a.message;
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
  // Steps up from the largest batch that fits (s, 2s, 4s, ...) until one fails; false when the
  // cap fits or an error stops the search.
  auto gallop_up = [&](long s) {
    while (r.first_failed == 0) {
      if (r.largest == cap) {
        r.capped = true;
        return false;
      }
      if (!attempt(int(std::min<long>(r.largest + s, cap)))) return false;
      s *= 2;
    }
    return true;
  };
  // Steps down from the smallest batch that failed (s, 2s, 4s, ...) until one fits, or until the
  // next step would pass the largest that fits (the bisection takes over there).
  auto gallop_down = [&](long s) {
    while (true) {
      const long next = r.first_failed - s;
      if (next <= r.largest) return true;
      if (!attempt(int(next))) return false;
      if (r.largest == next) return true;
      s *= 2;
    }
  };
  // The largest batch whose peak stays within limit_mib, on the line through the smallest and
  // the largest batches that fitted; 0 where there is no limit or no such line.
  auto predict = [&]() -> long {
    const Attempt *lo = nullptr, *hi = nullptr;
    for (const auto& [b, a] : seen)
      if (a.fit == Fit::Fits && a.peak_mib > 0) (lo ? hi : lo) = &a;
    if (limit_mib <= 0 || !lo || !hi) return 0;
    const double per_image = (hi->peak_mib - lo->peak_mib) / double(hi->batch - lo->batch);
    if (!(per_image > 0)) return 0;
    return hi->batch + long(std::floor((limit_mib - hi->peak_mib) / per_image));
  };

  int b = std::clamp(start, 1, cap);
  if (!attempt(b)) return r;
  if (r.largest == 0) {  // halve until one fits
    while (r.largest == 0) {
      if (b == 1) return r;
      b = std::max(1, b / 2);
      if (!attempt(b)) return r;
    }
  } else if (b == cap) {
    r.capped = true;
    return r;
  } else {
    // Twice the first batch: with the first, the memory an image takes.
    if (!attempt(std::min(2 * b, cap))) return r;
    // Guesses just below the predicted boundary, each on the line through the batches that
    // fitted so far (a guess that fits makes the next line longer, so closer), then steps from
    // the last guess, doubling, until the boundary is bracketed: a few probes where the
    // prediction is good, and where it is not, steps that grow as fast as the doubling would.
    long step = 0;
    for (int guess = 0; guess < 3 && r.first_failed == 0 && r.largest < cap; ++guess) {
      const long p = predict();
      if (p <= r.largest) break;
      step = std::max(1L, p / (32L << (4 * guess)));
      if (!attempt(int(std::clamp<long>(p - step, r.largest + 1, cap)))) return r;
    }
    if (step == 0) step = r.largest / 2;  // no prediction: doubling
    if (!(r.first_failed == 0 ? gallop_up(2 * step) : gallop_down(2 * step))) return r;
  }
  // Narrow the bracket: to the predicted boundary where there is a prediction, else to its middle;
  // a guess that does not halve the bracket is followed by a bisection step, so the search never
  // takes more than about twice the bisection's probes.
  bool guess = true;
  while (r.first_failed - r.largest > 1) {
    const int width = r.first_failed - r.largest;
    const long p = guess ? predict() : 0;
    const int next =
        p > 0 ? int(std::clamp<long>(p, r.largest + 1, r.first_failed - 1)) : r.largest + width / 2;
    if (!attempt(next)) return r;
    guess = p <= 0 || 2 * (r.first_failed - r.largest) <= width;
  }
  return r;
}
}  // namespace

MaxBatch search_max_batch(const std::function<Attempt(int batch)>& try_batch, int start, int cap,
                          double limit_mib, int multiple) {
  if (multiple < 1) throw std::invalid_argument("search_max_batch: multiple must be 1 or more");
  MaxBatch r = search_units(try_batch, std::max(1, start / multiple), std::max(1, cap / multiple),
                            limit_mib, multiple);
  r.largest *= multiple;
  r.first_failed *= multiple;
  for (Attempt& a : r.attempts) a.batch *= multiple;
  return r;
}

}  // namespace cnnbench
