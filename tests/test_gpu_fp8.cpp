// The FP8 probe on the device (kernels/fp8_conv.h): every variant that builds computes what the
// emulation of its storage says, and on Hopper (compute capability 9.0) or newer at least the
// form of NVIDIA's own FP8 sample builds.
#include <gtest/gtest.h>

#include "harness/device.h"
#include "kernels/fp8_conv.h"

namespace cnnbench {
namespace {

Fp8Case small_case() {
  Fp8Case c;
  c.name = "test.conv";
  c.g.x = Dims{4, 64, 14, 14};
  c.g.y = Dims{4, 128, 14, 14};
  c.g.kernel_h = c.g.kernel_w = 3;
  c.g.pad_h = c.g.pad_w = 1;
  return c;
}

TEST(GpuFp8, EveryVariantThatBuildsMatchesItsEmulation) {
  const Fp8CaseData d = make_fp8_case(small_case(), 11, 1024);
  GpuContext ctx;
  const DeviceInfo dev = discover_device();
  int fp8_ran = 0;
  for (Fp8Variant v : all_fp8_variants()) {
    const Fp8VariantResult r = run_fp8_variant(ctx, d, v, 2, 2);
    SCOPED_TRACE(fp8_variant_name(v));
    if (v == Fp8Variant::Fp16) {
      ASSERT_TRUE(r.error.empty()) << r.error;
    }
    if (!r.error.empty()) {
      std::printf("GpuFp8: %s does not run here: %s\n", fp8_variant_name(v), r.error.c_str());
      continue;
    }
    fp8_ran += fp8_inputs(v);
    std::printf("GpuFp8: %-24s %s %.2f us, rel L2 %.2e exact, %.2e emulated, codes off %lld\n",
                fp8_variant_name(v), r.engines.front().tag.c_str(), r.best_us(), r.rel_l2_exact,
                r.rel_l2_emulated, (long long)r.codes_off);
    EXPECT_TRUE(r.agrees()) << "rel L2 against the emulation " << r.rel_l2_emulated
                            << ", codes off " << r.codes_off;
    if (fp8_output(v) || int8_output(v)) EXPECT_GT(r.amax, 0.0);
  }
  if (dev.cc_major >= 9) EXPECT_GE(fp8_ran, 1) << "no FP8 form builds on " << dev.name;
}

}  // namespace
}  // namespace cnnbench

// The BatchNorm-fusion probe (kernels/bn_fusion_probe.h) on a small layer: the plain convs always
// run and match the host reference; every fused form that builds matches it too (which build is
// the probe's finding, printed, not asserted).
#include "kernels/bn_fusion_probe.h"

namespace cnnbench {
namespace {

TEST(GpuBnFusion, PlainFormsRunAndEveryFormThatBuildsMatchesTheReference) {
  ConvGeometry g;
  g.x = Dims{4, 64, 14, 14};
  g.y = Dims{4, 64, 7, 7};
  g.kernel_h = g.kernel_w = 3, g.stride = 2, g.pad_h = g.pad_w = 1;  // borders and a stride
  const BnFusionData d = make_bn_fusion_data(g, 3);
  GpuContext ctx;
  for (BnFusionVariant v : all_bn_fusion_variants()) {
    SCOPED_TRACE(bn_fusion_variant_name(v));
    const BnFusionResult r = run_bn_fusion_variant(ctx, d, v, 2, 256, 2);
    const bool plain = bn_fusion_baseline(v) == v;
    if (plain) {
      ASSERT_TRUE(r.error.empty()) << r.error;
    }
    if (!r.error.empty()) {
      std::printf("GpuBnFusion: %s does not run here: %s\n", bn_fusion_variant_name(v),
                  r.error.c_str());
      continue;
    }
    std::printf("GpuBnFusion: %-16s %s %.2f us, rel L2 %.2e, stats %.2e\n",
                bn_fusion_variant_name(v), r.engines.front().tag.c_str(), r.best_us(), r.rel_l2,
                r.stats_err);
    EXPECT_TRUE(r.agrees()) << "rel L2 " << r.rel_l2 << ", stats " << r.stats_err;
  }
}

}  // namespace
}  // namespace cnnbench
