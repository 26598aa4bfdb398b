// Issue 5 on the host: the max-batch search against a fake allocator with a known limit, the card
// table of configs/gpus.yaml, --memory-limit, and which library errors count as out of memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "harness/check.h"
#include "harness/gpus.h"
#include "harness/max_batch.h"

namespace cnnbench {
namespace {

using testing::HasSubstr;

// A device of `limit` bytes on which a model at batch b needs base + b * per bytes, allocated in
// chunks and freed again; an allocation past the limit fails as cudaMalloc does.
// `need`, where given, replaces that line (a workspace that jumps, say); `granule` rounds the
// reported peak up, as a device's allocation granularity does.
struct FakeDevice {
  uint64_t limit, base, per;
  std::function<uint64_t(int)> need_of = nullptr;
  uint64_t granule = 1;
  uint64_t live = 0;
  std::set<int> tried;
  int tries_twice = 0;
  Attempt run(int b) {
    tries_twice += !tried.insert(b).second;
    Attempt a;
    std::vector<uint64_t> held;
    const uint64_t need = need_of ? need_of(b) : base + uint64_t(b) * per;
    for (uint64_t got = 0; got < need;) {
      const uint64_t chunk = std::min<uint64_t>(need - got, std::max(per * 3 + 1, need / 16 + 1));
      if (live + chunk > limit) {
        a.fit = Fit::OutOfMemory;
        a.message = "cudaErrorMemoryAllocation";
        break;
      }
      live += chunk, got += chunk;
      held.push_back(chunk);
    }
    if (a.fit == Fit::Fits)
      a.peak_mib = double((live + granule - 1) / granule * granule) / 1048576.0;
    for (uint64_t c : held) live -= c;  // everything freed, whatever happened
    return a;
  }
};

TEST(MaxBatch, FindsTheExactLargestBatchFromAnyStart) {
  for (uint64_t limit : {uint64_t(1000), uint64_t(12345), uint64_t(999999)})
    for (int start : {1, 3, 64, 1000, 5000}) {
      FakeDevice d{limit, 100, 37};
      const MaxBatch r = search_max_batch([&](int b) { return d.run(b); }, start, 100000);
      const int want = int((limit - 100) / 37);
      EXPECT_EQ(r.largest, want) << "limit " << limit << " start " << start;
      EXPECT_EQ(r.first_failed, want + 1) << "limit " << limit << " start " << start;
      EXPECT_FALSE(r.capped);
      EXPECT_TRUE(r.error.empty());
      EXPECT_EQ(d.live, 0u) << "leaked";
      EXPECT_EQ(d.tries_twice, 0);
      EXPECT_LE(r.attempts.size(), 2 * size_t(std::log2(100000.0)) + 4);
      EXPECT_GT(r.peak_mib_at_largest, 0.0);
    }
}

// The largest batch that fits, counted on the fake's own terms.
int largest_fitting(FakeDevice d, int cap) {
  int b = 0;
  while (b < cap && d.run(b + 1).fit == Fit::Fits) ++b;
  return b;
}

TEST(MaxBatch, AGuessFromTheMemoryPerImageGivesTheSameAnswerInFewerTries) {
  const double mib = 1.0 / 1048576.0;
  for (uint64_t limit : {uint64_t(12345), uint64_t(999999), uint64_t(3) << 20})
    for (int start : {1, 3, 64, 1000, 5000}) {
      FakeDevice plain{limit, 100, 37}, guided{limit, 100, 37};
      const MaxBatch a = search_max_batch([&](int b) { return plain.run(b); }, start, 100000);
      const MaxBatch g =
          search_max_batch([&](int b) { return guided.run(b); }, start, 100000, limit * mib);
      const int want = int((limit - 100) / 37);
      EXPECT_EQ(g.largest, want) << "limit " << limit << " start " << start;
      EXPECT_EQ(g.first_failed, want + 1);
      EXPECT_EQ(guided.live, 0u) << "leaked";
      EXPECT_EQ(guided.tries_twice, 0);
      // Far from the boundary, the guesses save most of the doubling and the bisection: on an exact
      // line, two batches, the guess and a few steps around it.
      if (start * 16 < want) {
        EXPECT_LT(g.attempts.size(), a.attempts.size()) << "limit " << limit << " start " << start;
        EXPECT_LE(g.attempts.size(), 8u);
      }
    }
}

TEST(MaxBatch, AWrongGuessStillEndsExact) {
  const double mib = 1.0 / 1048576.0;
  const uint64_t limit = uint64_t(8) << 30;
  // A workspace that jumps by a quarter of the device past batch 3000; a quadratic term; a peak
  // reported in 2 MiB steps; a fixed part that only large batches show.
  const std::vector<std::function<uint64_t(int)>> needs = {
      [](int b) { return (uint64_t(3) << 20) * b + (b > 3000 ? uint64_t(2) << 30 : 0); },
      [](int b) { return (uint64_t(1) << 20) * b + uint64_t(b) * b * 600; },
      [](int b) { return (uint64_t(3) << 20) * b + (uint64_t(500) << 20); },
      [](int b) { return (uint64_t(3) << 20) * b + (b > 1000 ? uint64_t(1) << 30 : 0); },
  };
  for (size_t i = 0; i < needs.size(); ++i)
    for (int start : {1, 64, 256, 2048, 20000}) {
      FakeDevice d{limit, 0, 0, needs[i], 2u << 20};
      const int want = largest_fitting(d, 100000);
      const MaxBatch r =
          search_max_batch([&](int b) { return d.run(b); }, start, 100000, limit * mib);
      EXPECT_EQ(r.largest, want) << "need " << i << " start " << start;
      EXPECT_EQ(r.first_failed, want + 1) << "need " << i << " start " << start;
      EXPECT_EQ(d.tries_twice, 0);
      EXPECT_LE(r.attempts.size(), 2 * size_t(std::log2(100000.0)) + 4);
    }
  // A guess past the cap: the cap is tried, fits, and is reported as such.
  FakeDevice big{uint64_t(1) << 40, 10, 1};
  const MaxBatch capped =
      search_max_batch([&](int b) { return big.run(b); }, 8, 300, double(uint64_t(1) << 40) * mib);
  EXPECT_TRUE(capped.capped);
  EXPECT_EQ(capped.largest, 300);
}

// StyleGAN's discriminator takes batches of 4 or more only in multiples of its mbstd group (4):
// the search tries multiples only, from the multiple below the start, and answers in batches.
// Call 68 (no multiple) guessed batch 9 and stopped on the trainer's refusal.
TEST(MaxBatch, AMultipleKeepsEveryBatchTriedAMultiple) {
  const double mib = 1.0 / 1048576.0;
  for (uint64_t limit : {uint64_t(1000), uint64_t(12345), uint64_t(3) << 20})
    for (int start : {1, 8, 10, 64, 5000})
      for (double lim : {0.0, limit * mib}) {
        FakeDevice d{limit, 100, 37};
        const MaxBatch r = search_max_batch(
            [&](int b) {
              if (b % 4) return Attempt{b, Fit::Error, "the batch must divide by the mbstd group"};
              return d.run(b);
            },
            start, 100000, lim, 4);
        const int want = int((limit - 100) / 37) / 4 * 4;
        EXPECT_EQ(r.error, "") << "limit " << limit << " start " << start;
        EXPECT_EQ(r.largest, want) << "limit " << limit << " start " << start;
        EXPECT_EQ(r.first_failed, want + 4) << "limit " << limit << " start " << start;
        for (const Attempt& a : r.attempts) EXPECT_EQ(a.batch % 4, 0) << a.batch;
        EXPECT_EQ(d.tries_twice, 0);
      }
  // The error names the batch, not the multiple's count.
  FakeDevice d{100000, 100, 37};
  const MaxBatch err = search_max_batch(
      [&](int b) {
        if (b == 32) return Attempt{b, Fit::Error, "cudaErrorIllegalAddress", 0};
        return d.run(b);
      },
      8, 4096, 0, 4);
  EXPECT_THAT(err.error, HasSubstr("batch 32: cudaErrorIllegalAddress"));
  EXPECT_EQ(err.largest, 16);
  EXPECT_THROW(search_max_batch([&](int b) { return d.run(b); }, 1, 16, 0, 0),
               std::invalid_argument);
}

TEST(MaxBatch, CapNothingFitsAndARealErrorStop) {
  FakeDevice big{1 << 30, 10, 1};
  const MaxBatch capped = search_max_batch([&](int b) { return big.run(b); }, 1, 256);
  EXPECT_TRUE(capped.capped);
  EXPECT_EQ(capped.largest, 256);
  EXPECT_EQ(capped.first_failed, 0);

  FakeDevice tiny{50, 100, 1};
  const MaxBatch none = search_max_batch([&](int b) { return tiny.run(b); }, 16, 256);
  EXPECT_EQ(none.largest, 0);
  EXPECT_EQ(none.first_failed, 1);

  // An illegal address at batch 32 is no out-of-memory: the search stops and says so.
  FakeDevice d{100000, 100, 37};
  const MaxBatch err = search_max_batch(
      [&](int b) {
        if (b == 32) return Attempt{b, Fit::Error, "cudaErrorIllegalAddress", 0};
        return d.run(b);
      },
      1, 4096);
  EXPECT_THAT(err.error, HasSubstr("batch 32: cudaErrorIllegalAddress"));
  EXPECT_EQ(err.attempts.back().batch, 32);
  EXPECT_EQ(err.largest, 16);
}

TEST(Gpus, TheRepositoryTableHasTheArticlesCards) {
  const GpuTable t = load_gpu_table(std::string(CNNBENCH_TEST_DATA) + "/../../configs/gpus.yaml");
  EXPECT_EQ(t.sizes, (std::vector<int>{8, 16, 24, 32, 40, 48, 80, 141}));
  // The article's cards and sizes (paperspace_tasks_seed.yaml, gpu_memory_gb).
  const std::vector<std::pair<std::string, double>> article = {
      {"M4000", 8},    {"P4000", 8},      {"RTX4000", 8},    {"P5000", 16},
      {"RTX5000", 16}, {"A4000", 16},     {"V100-16GB", 16}, {"P6000", 24},
      {"A5000", 24},   {"V100-32GB", 32}, {"A100", 40},      {"A6000", 48}};
  for (const auto& [name, gib] : article) {
    const MemoryLimit m = parse_memory_limit(name, t);
    EXPECT_EQ(m.bytes, uint64_t(gib * 1073741824.0)) << name;
  }
}

TEST(Gpus, MemoryLimitTakesSizesAndCardNames) {
  const GpuTable t = parse_gpu_table(
      "sizes: [8, 16]\ncards:\n  - {name: A100-80GB, memory_gib: 80}\n  - {name: T4, memory_gib: "
      "16}\n",
      "test.yaml");
  EXPECT_EQ(parse_memory_limit("16", t).bytes, 16ull << 30);
  EXPECT_EQ(parse_memory_limit("16GB", t).bytes, 16ull << 30);
  EXPECT_EQ(parse_memory_limit("24 GiB", t).bytes, 24ull << 30);
  EXPECT_EQ(parse_memory_limit("7.5g", t).bytes, uint64_t(7.5 * (1ull << 30)));
  EXPECT_EQ(parse_memory_limit("a100_80gb", t).label, "A100-80GB (80 GiB)");
  EXPECT_EQ(parse_memory_limit("t4", t).bytes, 16ull << 30);
  try {
    parse_memory_limit("rtx9090", t);
    FAIL() << "an unknown card was taken";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'rtx9090'"));
    EXPECT_THAT(e.what(), HasSubstr("A100-80GB, T4"));
  }
  EXPECT_THROW(parse_memory_limit("0", t), UserError);
  EXPECT_THROW(parse_memory_limit("-4", t), UserError);
  EXPECT_THROW(parse_gpu_table("sizes: [8]\ncards: []\n", "empty.yaml"), UserError);
  EXPECT_THROW(parse_gpu_table("sizes: [8]\ncards:\n  - {name: X, memory_gib: 0}\n", "z.yaml"),
               UserError);
}

TEST(Check, OutOfMemoryIsTheLibrariesAllocationFailuresOnly) {
  EXPECT_TRUE(is_out_of_memory(
      LibraryError("CUDA", 2, "cudaErrorMemoryAllocation", "cudaMalloc", "a.cpp", 1)));
  EXPECT_TRUE(is_out_of_memory(
      LibraryError("cuDNN", 4004, "DEVICE_ALLOCATION_FAILED", "build", "a.cpp", 1)));
  EXPECT_TRUE(is_out_of_memory(LibraryError("cuBLAS", 3, "ALLOC_FAILED", "matmul", "a.cpp", 1)));
  EXPECT_FALSE(
      is_out_of_memory(LibraryError("CUDA", 700, "cudaErrorIllegalAddress", "sync", "a.cpp", 1)));
  EXPECT_FALSE(is_out_of_memory(LibraryError("cuDNN", 3000, "NOT_SUPPORTED", "x", "a.cpp", 1)));
  EXPECT_FALSE(is_out_of_memory(UserError("bad flag")));
}

// No cuDNN engine for a conv is an out-of-memory only when the device is nearly full (call 15's
// search at EfficientNet-B0 batch 2049 under an 8 GB cap), a real refusal otherwise.
TEST(Check, NoEngineNearlyOutOfMemoryIsAnOutOfMemory) {
  const LibraryError low = no_engine_error("conv:fp16:2049x3x64x64", 300ull << 20, "p", "a.cpp", 1);
  EXPECT_TRUE(is_out_of_memory(low));
  EXPECT_NE(std::string(low.what()).find("300 MiB of device memory free"), std::string::npos)
      << low.what();
  EXPECT_NE(std::string(low.what()).find("conv:fp16:2049x3x64x64"), std::string::npos);
  const LibraryError high = no_engine_error("conv:fp16:x", kNoEngineLowMemory, "p", "a.cpp", 1);
  EXPECT_FALSE(is_out_of_memory(high));
  EXPECT_EQ(high.code, 3000);
  EXPECT_FALSE(is_out_of_memory(no_engine_error("conv", UINT64_MAX, "p", "a.cpp", 1)));
}

// The errors that end a run (issue 10): those that leave CUDA's context unusable. An
// out-of-memory or a bad launch configuration does not; the run goes on after them.
TEST(Check, StickyErrorsAreTheOnesThatLoseTheContext) {
  for (int code : {700, 702, 710, 714, 715, 716, 717, 718, 719, 214})
    EXPECT_TRUE(is_sticky_cuda_code(code)) << code;
  for (int code : {0, 1, 2, 9, 98, 100, 209, 400, 801, 999})  // value, memory, config, image...
    EXPECT_FALSE(is_sticky_cuda_code(code)) << code;
  // No device here (or a healthy one): the context is not lost.
  EXPECT_EQ(sticky_error_now(), "");
}

}  // namespace
}  // namespace cnnbench
