#include "harness/jsonl.h"

#include "harness/check.h"

namespace cnnbench {

namespace {
const char* unit_name(benchmark::TimeUnit u) {
  switch (u) {
    case benchmark::kNanosecond:
      return "ns";
    case benchmark::kMicrosecond:
      return "us";
    case benchmark::kMillisecond:
      return "ms";
    case benchmark::kSecond:
      return "s";
  }
  return "ns";
}
}  // namespace

nlohmann::json run_json(const benchmark::BenchmarkReporter::Run& r) {
  nlohmann::json j;
  j["name"] = r.benchmark_name();
  j["run_name"] = r.run_name.str();
  j["run_type"] =
      r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate ? "aggregate" : "iteration";
  if (r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate)
    j["aggregate_name"] = r.aggregate_name;
  j["repetitions"] = r.repetitions;
  j["repetition_index"] = r.repetition_index;
  j["threads"] = r.threads;
  if (r.error_occurred) {
    j["error_occurred"] = true;
    j["error_message"] = r.error_message;
    return j;
  }
  j["iterations"] = r.iterations;
  j["real_time"] = r.GetAdjustedRealTime();
  j["cpu_time"] = r.GetAdjustedCPUTime();
  j["time_unit"] = unit_name(r.time_unit);
  for (const auto& [name, counter] : r.counters) j[name] = counter.value;
  if (!r.report_label.empty()) j["label"] = r.report_label;
  return j;
}

JsonLinesTee::JsonLinesTee(const std::string& path, const nlohmann::json& context)
    : out_(path, std::ios::trunc), path_(path), context_(context) {
  if (!out_) throw UserError("cannot write the results lines to '" + path + "'");
}

bool JsonLinesTee::ReportContext(const Context& context) {
  out_ << nlohmann::json{{"context", context_}}.dump() << "\n";
  out_.flush();
  return ConsoleReporter::ReportContext(context);
}

void JsonLinesTee::ReportRuns(const std::vector<Run>& runs) {
  for (const Run& r : runs) out_ << run_json(r).dump() << "\n";
  out_.flush();
  ConsoleReporter::ReportRuns(runs);
}

void JsonLinesTee::note(const nlohmann::json& line) {
  out_ << line.dump() << "\n";
  out_.flush();
}

}  // namespace cnnbench
