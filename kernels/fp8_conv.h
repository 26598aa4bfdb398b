// The FP8 probe on the device (issue 9's FP8 lever, before any network runs in FP8): one
// convolution built as a cuDNN graph in each Fp8Variant (kernels/fp8_case.h), every engine
// configuration heuristics offer tried, those that build timed, and the output compared at the
// sampled positions with the exact result and with the emulation of the variant's storage.
#pragma once

#include <string>
#include <vector>

#include "kernels/fp8_case.h"
#include "kernels/op.h"

namespace cnnbench {

struct Fp8EngineResult {
  std::string tag, notes;
  size_t workspace = 0;
  double us = -1;  // median of five timed groups of launches; negative where a launch failed
};

struct Fp8VariantResult {
  Fp8Variant variant = Fp8Variant::Fp16;
  int configs = 0;                    // distinct engine configs heuristics A, B and fallback offer
  std::vector<std::string> refusals;  // "tag: why" for configs that did not build (the first 4)
  std::vector<Fp8EngineResult> engines;  // built and timed, fastest first
  double flops = 0;                      // 2 x MACs, whole batch
  double rel_l2_exact = -1;              // the fastest engine's output against the exact result
  double rel_l2_emulated = -1;           // ... against the emulation of this variant's storage
  // E4M3 and INT8 outputs: samples whose code differs from the emulation's by more than one step
  // (a single step is a tie broken the other way by a different accumulation order).
  int64_t codes_off = 0;
  int64_t samples = 0;  // output positions checked
  double amax = -1;     // E4M3: the graph's AMAX output of the run that set y_scale; INT8: the
                        // sampled exact outputs' amax
  float y_scale = 1.f;  // output_scale_for(variant, amax)
  std::string error;    // where nothing ran: why
  bool agrees() const;  // ran, and within the emulation's tolerance (fp8_conv.cpp says which)
  double best_us() const { return engines.empty() ? -1 : engines.front().us; }
};

// Builds and runs variant v of the case on ctx's handle and stream: at most `max_engines`
// configs that build are timed (`launches` launches per timed group).
Fp8VariantResult run_fp8_variant(GpuContext& ctx, const Fp8CaseData& d, Fp8Variant v,
                                 int max_engines, int launches = 10);

}  // namespace cnnbench
