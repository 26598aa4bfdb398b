// Results that survive a killed run (issue 10): beside Google Benchmark's JSON, which is whole
// only once the run ends, every finished benchmark run is appended to a JSON-lines file and
// flushed at once. The first line is {"context": {...}}; every other one is a benchmark entry
// in the shape of Google Benchmark's JSON (name, run_name, run_type, repetition_index, times,
// counters, error), except the note() lines, each an object of one key other than "name".
// tools/compare_pytorch.read_benchmark_json reads such a file as a document.
#pragma once

#include <benchmark/benchmark.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cnnbench {

// One run as a JSON object (the fields Google Benchmark's JSON reporter writes for it).
nlohmann::json run_json(const benchmark::BenchmarkReporter::Run& r);

// The console reporter, and each run also appended to `path` as one flushed JSON line.
class JsonLinesTee : public benchmark::ConsoleReporter {
 public:
  // UserError where the file cannot be opened (before anything is measured).
  JsonLinesTee(const std::string& path, const nlohmann::json& context);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  // One more line, flushed at once: what a benchmark learnt before it finished (the batches a
  // max-batch search tried, as {"max_batch_attempt": {...}}), so a killed run keeps it.
  void note(const nlohmann::json& line);

 private:
  std::ofstream out_;
  std::string path_;
  nlohmann::json context_;
};

}  // namespace cnnbench
