// --resume's reading of a partial results file (harness/resume.h).
#include <gtest/gtest.h>

#include <fstream>

#include "harness/check.h"
#include "harness/resume.h"

using namespace cnnbench;

namespace {
std::string write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string entry(const std::string& name, int rep, int reps, bool error = false,
                  const char* type = "iteration") {
  return std::string("    {\n      \"name\": \"") + name + "\",\n      \"run_name\": \"" + name +
         "\",\n      \"run_type\": \"" + type +
         "\",\n      \"repetitions\": " + std::to_string(reps) +
         ",\n      \"repetition_index\": " + std::to_string(rep) +
         (error ? ",\n      \"error_occurred\": true" : "") + "\n    }";
}
}  // namespace

TEST(Resume, OnlyWholeSuccessfulBenchmarksCount) {
  const std::string a = "a/fp16/graph/batch:1/manual_time", b = "b/fp16/graph/batch:1/manual_time",
                    c = "c/fp16/graph/batch:1/manual_time";
  // a: both repetitions and its median; b: one of two; c: failed.
  const std::string body = entry(a, 0, 2) + ",\n" + entry(a, 1, 2) + ",\n" +
                           entry(a, 0, 2, false, "aggregate") + ",\n" + entry(b, 0, 2) + ",\n" +
                           entry(c, 0, 1, true);
  const std::string whole = "{\n  \"context\": {},\n  \"benchmarks\": [\n" + body + "\n  ]\n}\n";
  EXPECT_EQ(completed_benchmarks(write("whole.json", whole)), std::set<std::string>{a});
  // Cut off inside b's next entry: what came before still counts.
  const std::string cut = "{\n  \"context\": {},\n  \"benchmarks\": [\n" + entry(a, 0, 2) + ",\n" +
                          entry(a, 1, 2) + ",\n    {\n      \"name\": \"b/fp1";
  EXPECT_EQ(completed_benchmarks(write("cut.json", cut)), std::set<std::string>{a});
  // Results lines, the last one half written.
  const std::string lines = "{\"context\": {}}\n{\"run_name\": \"" + a +
                            "\", \"run_type\": \"iteration\", \"repetitions\": 1}\n{\"run_na";
  EXPECT_EQ(completed_benchmarks(write("run.jsonl", lines)), std::set<std::string>{a});
  EXPECT_THROW(completed_benchmarks(testing::TempDir() + "/absent.json"), UserError);
  EXPECT_THROW(completed_benchmarks(write("junk.json", "not json")), UserError);
}
