// The flushed JSON-lines results (harness/jsonl.h): a run's line carries what Google Benchmark's
// JSON has for it, the counters included, and the tee writes the context first and one line per
// run, readable at once (before the run ends).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/check.h"
#include "harness/jsonl.h"

using namespace cnnbench;
using BmRun = benchmark::BenchmarkReporter::Run;

namespace {
BmRun make_run(const std::string& name, int rep, double ms, double img_s) {
  BmRun r;
  r.run_name.function_name = name;
  r.run_type = BmRun::RT_Iteration;
  r.repetitions = 5;
  r.repetition_index = rep;
  r.iterations = 10;
  r.time_unit = benchmark::kMillisecond;
  r.real_accumulated_time = ms * 1e-3 * 10;  // seconds over 10 iterations
  r.cpu_accumulated_time = ms * 1e-3 * 10;
  r.counters["img_per_s"] = benchmark::Counter(img_s);
  return r;
}
}  // namespace

TEST(JsonLines, ARunsLineHasItsTimesAndCounters) {
  const nlohmann::json j =
      run_json(make_run("resnet50/fp16/graph/batch:32/manual_time", 2, 1.25, 25600));
  EXPECT_EQ(j["run_name"], "resnet50/fp16/graph/batch:32/manual_time");
  EXPECT_EQ(j["run_type"], "iteration");
  EXPECT_EQ(j["repetition_index"], 2);
  EXPECT_EQ(j["time_unit"], "ms");
  EXPECT_NEAR(j["real_time"].get<double>(), 1.25, 1e-12);
  EXPECT_DOUBLE_EQ(j["img_per_s"].get<double>(), 25600);
  BmRun bad = make_run("vgg16/fp16/graph/batch:1/manual_time", 0, 1, 1);
  bad.error_occurred = true;
  bad.error_message = "out of memory";
  const nlohmann::json e = run_json(bad);
  EXPECT_TRUE(e["error_occurred"].get<bool>());
  EXPECT_EQ(e["error_message"], "out of memory");
  EXPECT_EQ(e.count("img_per_s"), 0u);
}

TEST(JsonLines, TheTeeFlushesEachRun) {
  const std::string path = testing::TempDir() + "/results.jsonl";
  {
    JsonLinesTee tee(path, {{"gpu_name", "NVIDIA H200"}});
    std::ostringstream console;
    tee.SetOutputStream(&console);
    tee.SetErrorStream(&console);
    tee.ReportRuns({make_run("a/fp16/graph/batch:1/manual_time", 0, 1, 1000)});
    // Read back while the reporter is alive: the line is there already.
    std::ifstream in(path);
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(nlohmann::json::parse(line)["img_per_s"], 1000);
  }
  EXPECT_THROW(JsonLinesTee("/nonexistent/dir/x.jsonl", {}), UserError);
}
