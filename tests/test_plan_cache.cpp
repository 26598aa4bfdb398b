// The autotune plan cache's file (harness/plan_cache.h): scopes, the round trip, the merge of two
// processes' entries, and the errors a bad file gives.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "harness/check.h"
#include "harness/context.h"
#include "harness/plan_cache.h"
#include "kernels/matmul.h"

using namespace cnnbench;

namespace {

std::string fresh(const std::string& name) {
  const std::string path = testing::TempDir() + "/" + name;
  std::remove(path.c_str());
  return path;
}

std::string text_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

CachedPlan plan(const std::string& engine, double us) {
  CachedPlan p;
  p.engine = engine;
  p.fused = engine.find("rtc") != std::string::npos;
  p.tuned_us = us;
  p.tuned_in_graph = us < 10;
  p.tuned_eager_us = us + 7;
  p.candidates = 8;
  return p;
}

void expect_user_error(const std::string& path, const std::string& needle) {
  try {
    DiskPlanCache c(path);
    FAIL() << "no error for " << path;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(PlanCache, RoundTripWithinItsScope) {
  const std::string path = fresh("plans_round.json");
  {
    DiskPlanCache c(path);
    c.set_scope("NVIDIA H200 sm_90", "cuDNN 9.19.0", "2 A+B");
    EXPECT_EQ(c.find("conv:fp16:a"), nullptr);
    c.put("conv:fp16:a", plan("eng4{k24=23}+rtc", 12.5));
    c.put("conv:fp16:b", plan("eng0", 3.0));
    ASSERT_NE(c.find("conv:fp16:a"), nullptr);
    c.save();
  }
  DiskPlanCache again(path);
  again.set_scope("NVIDIA H200 sm_90", "cuDNN 9.19.0", "2 A+B");
  const CachedPlan* a = again.find("conv:fp16:a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->engine, "eng4{k24=23}+rtc");
  EXPECT_TRUE(a->fused);
  EXPECT_DOUBLE_EQ(a->tuned_us, 12.5);
  EXPECT_FALSE(a->tuned_in_graph);
  EXPECT_EQ(a->candidates, 8);
  ASSERT_NE(again.find("conv:fp16:b"), nullptr);
  EXPECT_FALSE(again.find("conv:fp16:b")->fused);
  EXPECT_TRUE(again.find("conv:fp16:b")->tuned_in_graph);
  EXPECT_DOUBLE_EQ(again.find("conv:fp16:b")->tuned_eager_us, 10.0);
  // Another cuDNN, or another GPU, finds nothing: an engine choice is theirs to make.
  again.set_scope("NVIDIA H200 sm_90", "cuDNN 9.14.0", "2 A+B");
  EXPECT_EQ(again.find("conv:fp16:a"), nullptr);
  again.set_scope("NVIDIA A100 sm_80", "cuDNN 9.19.0", "2 A+B");
  EXPECT_EQ(again.find("conv:fp16:a"), nullptr);
  EXPECT_EQ(again.size(), 2u);
}

TEST(PlanCache, TwoProcessesMergeAndOtherScopesAreKept) {
  const std::string path = fresh("plans_merge.json");
  DiskPlanCache first(path), second(path);  // both read the file before either wrote it
  first.set_scope("GPU-A", "cuDNN 9.19.0", "2 A+B");
  second.set_scope("GPU-B", "cuDNN 9.14.0", "2 A+B");
  first.put("k1", plan("eng1", 1));
  first.save();
  second.put("k2", plan("eng2", 2));
  second.put("k1", plan("eng3", 3));  // the same key in another scope: a separate entry
  second.save();
  DiskPlanCache all(path);
  EXPECT_EQ(all.size(), 3u);
  all.set_scope("GPU-A", "cuDNN 9.19.0", "2 A+B");
  ASSERT_NE(all.find("k1"), nullptr);
  EXPECT_EQ(all.find("k1")->engine, "eng1");
  all.set_scope("GPU-B", "cuDNN 9.14.0", "2 A+B");
  EXPECT_EQ(all.find("k1")->engine, "eng3");
  EXPECT_EQ(all.find("k2")->engine, "eng2");
  // No temporary file is left beside it.
  EXPECT_NE(access((path + ".tmp." + std::to_string(getpid())).c_str(), F_OK), 0);
}

TEST(PlanCache, AnEntryFromANarrowerSearchIsTunedAgain) {
  // A file written before 2026-12-05: no "search" field, so the slice convs' staged form and
  // heuristics mode B were never timed for its choices.
  const std::string path = fresh("plans_old.json");
  std::ofstream(path) << "{\"cnnbench_plan_cache\": 1, \"entries\": [{\"device\": \"G\", "
                         "\"library\": \"L\", \"key\": \"k\", \"engine\": \"eng1\", "
                         "\"fused\": true, \"staged\": false}]}";
  {
    DiskPlanCache c(path);
    c.set_scope("G", "L", "1");
    ASSERT_NE(c.find("k"), nullptr);  // read as search "1"
    c.set_scope("G", "L", plan_cache_search(true, 100));
    EXPECT_EQ(c.find("k"), nullptr);
    EXPECT_TRUE(c.in_other_search("k"));
    EXPECT_FALSE(c.in_other_search("k2"));
    c.set_scope("G", "L2", plan_cache_search(true, 100));
    EXPECT_FALSE(c.in_other_search("k"));  // another library's entry is not this one's
    c.set_scope("G", "L", plan_cache_search(true, 100));
    c.put("k", plan("eng7", 2));  // tuned again: written beside the old entry
    c.save();
  }
  {  // rewritten as format 2, the old entry kept as search "1"
    std::ifstream f(path);
    std::stringstream text;
    text << f.rdbuf();
    EXPECT_NE(text.str().find("\"cnnbench_plan_cache\": 2"), std::string::npos);
    EXPECT_NE(text.str().find("\"search\": \"1\""), std::string::npos);
  }
  DiskPlanCache again(path);
  EXPECT_EQ(again.size(), 2u);
  again.set_scope("G", "L", plan_cache_search(true, 100));
  ASSERT_NE(again.find("k"), nullptr);
  EXPECT_EQ(again.find("k")->engine, "eng7");
  again.set_scope("G", "L", plan_cache_search(false, 100));  // mode A only: a search of its own
  EXPECT_EQ(again.find("k"), nullptr);
  EXPECT_NE(plan_cache_search(true, 100), plan_cache_search(false, 100));
  // The graph round is a search of its own, and so is its threshold; without it the search is
  // the one entries were written under before the round existed.
  EXPECT_EQ(plan_cache_search(true, 0), "2 A+B");
  EXPECT_EQ(plan_cache_search(false, 0), "2 A");
  EXPECT_EQ(plan_cache_search(true, 100), "3 A+B graph<100us");
  EXPECT_NE(plan_cache_search(true, 100), plan_cache_search(true, 50));
  again.set_scope("G", "L", plan_cache_search(true, 0));
  EXPECT_EQ(again.find("k"), nullptr);  // eng7 was chosen with the graph round
  again.set_scope("G", "L", "1");
  EXPECT_EQ(again.find("k")->engine, "eng1");
}

TEST(PlanCache, NothingPutWritesNothing) {
  const std::string path = fresh("plans_none.json");
  DiskPlanCache c(path);
  c.set_scope("GPU", "cuDNN", "2 A+B");
  c.save();
  EXPECT_NE(access(path.c_str(), F_OK), 0);  // neither the file nor its probe
  EXPECT_NE(access((path + ".probe").c_str(), F_OK), 0);
}

TEST(PlanCache, BadFilesAreNamed) {
  const std::string dir = testing::TempDir() + "/";
  std::ofstream(dir + "pc_text.json") << "engines: many";
  expect_user_error(dir + "pc_text.json", "pc_text.json: not JSON");
  std::ofstream(dir + "pc_other.json") << "{\"benchmarks\": []}";
  expect_user_error(dir + "pc_other.json", "not a cnnbench plan cache");
  std::ofstream(dir + "pc_format.json") << "{\"cnnbench_plan_cache\": 7, \"entries\": []}";
  expect_user_error(dir + "pc_format.json", "format 7, this cnnbench reads 1 and 2");
  std::ofstream(dir + "pc_entry.json")
      << "{\"cnnbench_plan_cache\": 1, \"entries\": [{\"device\": \"G\", \"library\": \"L\", "
         "\"key\": \"k\", \"engine\": \"eng1\", \"fused\": true}, {\"device\": \"G\", "
         "\"library\": \"L\", \"key\": \"k2\", \"fused\": true}]}";
  expect_user_error(dir + "pc_entry.json", "entry 2 is malformed");
  expect_user_error("/nonexistent/dir/plans.json", "--plan_cache: cannot write");
  expect_user_error("", "--plan_cache needs a file name");
}

TEST(PlanCache, ScopeNamesTheGpuAndTheCudnnLoaded) {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.cc_major = 9, d.cc_minor = 0;
  d.cudnn_loaded = 91400;
  d.cudnn_compiled = 91900;  // what counts is the library the run loaded
  EXPECT_EQ(plan_cache_scope_device(d), "NVIDIA H200 sm_90");
  EXPECT_EQ(plan_cache_scope_library(d), "cuDNN 9.14.0");
}

// The classifier's cuBLASLt algorithm goes into the cache as hex (call 70: without it, the
// second pass of a soak chose the classifier's algorithm again, and differently in 5 of 7 cases).
TEST(PlanCache, AnAlgorithmRoundTripsAsHexAndBadHexIsRefused) {
  unsigned char algo[64];
  for (int i = 0; i < 64; ++i) algo[i] = static_cast<unsigned char>(i * 37 + 11);
  const std::string hex = bytes_to_hex(algo, sizeof algo);
  EXPECT_EQ(hex.size(), 128u);
  EXPECT_EQ(hex.substr(0, 6), "0b3055");  // 11, 48, 85
  unsigned char back[64] = {};
  ASSERT_TRUE(hex_to_bytes(hex, back, sizeof back));
  EXPECT_EQ(std::memcmp(algo, back, sizeof algo), 0);
  unsigned char untouched[64] = {};
  EXPECT_FALSE(hex_to_bytes(hex.substr(2), untouched, sizeof untouched));         // short
  EXPECT_FALSE(hex_to_bytes(hex + "00", untouched, sizeof untouched));            // long
  EXPECT_FALSE(hex_to_bytes("zz" + hex.substr(2), untouched, sizeof untouched));  // not hex
  EXPECT_FALSE(hex_to_bytes("0B" + hex.substr(2), untouched, sizeof untouched));  // upper case
  for (unsigned char b : untouched) EXPECT_EQ(b, 0) << "a refused string wrote bytes";

  // The entry survives the file.
  const std::string path = fresh("linear_plans.json");
  LinearSpec s;
  s.batch = 32, s.in_features = 2048, s.out_features = 1000, s.precision = Precision::FP16;
  const std::string key = linear_plan_key(s, true, size_t(32) << 20, 130100);
  EXPECT_EQ(key, "linear fp16 32x2048->1000 bias ws33554432 cublasLt 130100");
  {
    DiskPlanCache c(path);
    c.set_scope("NVIDIA H100 80GB HBM3 sm_90", "cuDNN 9.19.0", "3 A+B graph<100us");
    c.put(key, plan("cublasLt " + hex, 16.2));
    c.save();
  }
  DiskPlanCache again(path);
  again.set_scope("NVIDIA H100 80GB HBM3 sm_90", "cuDNN 9.19.0", "3 A+B graph<100us");
  const CachedPlan* p = again.find(key);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->engine, "cublasLt " + hex);
  // Another cuBLASLt, another batch, another precision or no bias: another key.
  EXPECT_EQ(again.find(linear_plan_key(s, true, size_t(32) << 20, 130200)), nullptr);
  EXPECT_EQ(again.find(linear_plan_key(s, false, size_t(32) << 20, 130100)), nullptr);
  LinearSpec b = s;
  b.batch = 1;
  EXPECT_EQ(again.find(linear_plan_key(b, true, size_t(32) << 20, 130100)), nullptr);
  b = s;
  b.precision = Precision::BF16;
  EXPECT_EQ(again.find(linear_plan_key(b, true, size_t(32) << 20, 130100)), nullptr);
}
