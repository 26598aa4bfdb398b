// --resume (issue 10): the benchmarks a partial results file already holds whole, so a rerun
// measures only the rest. Host-only, tested on a CPU.
#pragma once

#include <set>
#include <string>

namespace cnnbench {

// The run names ("resnet50/fp16/graph/batch:32/manual_time") with every repetition present
// (as many iteration entries as "repetitions" says) and none failed, from Google Benchmark's
// JSON (a cut-off one too: the complete entries count) or cnnbench's results lines (.jsonl).
// UserError naming the file where it cannot be read.
std::set<std::string> completed_benchmarks(const std::string& path);

}  // namespace cnnbench
