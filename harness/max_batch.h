// The largest batch that fits (issue 5): double the batch until a run no longer fits, then bisect
// to the exact boundary. The search is pure logic over a callback that tries one batch, so it is
// tested against a fake allocator on any host; the binaries give it a callback that builds,
// captures and runs a model and reports an out-of-memory as such.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cnnbench {

enum class Fit { Fits, OutOfMemory, Error };
const char* fit_name(Fit f);  // "fits", "out of memory", "error"

// One batch tried: whether it fitted, the error's text where it did not, and the device memory
// it used at its fullest (0 where unknown).
struct Attempt {
  int batch = 0;
  Fit fit = Fit::Fits;
  std::string message;
  double peak_mib = 0;
};

struct MaxBatch {
  int largest = 0;                // the largest batch that fitted; 0: not even batch 1
  int first_failed = 0;           // the smallest batch that did not fit; 0: none up to the cap
  bool capped = false;            // the cap itself fitted: the true largest may be higher
  std::string error;              // a real error (not an out-of-memory) stopped the search
  std::vector<Attempt> attempts;  // in the order tried
  double peak_mib_at_largest = 0;
};

// Tries `start` (clamped to [1, cap]); halves while batches fail, doubles while they fit, until
// one fitting and one failing batch bracket the boundary; then bisects to first_failed ==
// largest + 1. Assumes that a batch fits when a larger one does. A batch is never tried twice.
// A real error stops the search at once (`error` says which batch and why).
// With `limit_mib` (the memory the device may use, in the units of Attempt::peak_mib), the two
// first batches that fit give the memory an image takes, and the search guesses just below the
// batch that reaches the limit, then steps from the guess, doubling the step, until the boundary
// is bracketed. The answer is the same (the bisection decides it); only the batches tried
// differ: about half as many where memory grows linearly with the batch.
// With `multiple` > 1 only multiples of it are tried (StyleGAN's discriminator groups the batch
// by 4): start and cap are rounded down to multiples (at least one), and `largest`,
// `first_failed` and the attempts are batches, multiples of it.
MaxBatch search_max_batch(const std::function<Attempt(int batch)>& try_batch, int start = 1,
                          int cap = 4096, double limit_mib = 0, int multiple = 1);

}  // namespace cnnbench
