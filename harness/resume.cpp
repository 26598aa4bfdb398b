#include "harness/resume.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "harness/check.h"

namespace cnnbench {

namespace {
// The benchmark entries of a Google Benchmark JSON, also one cut off mid-list (the complete
// entries before the cut), or of a results-lines file.
std::vector<nlohmann::json> entries_of(const std::string& text, const std::string& path) {
  std::vector<nlohmann::json> out;
  if (path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) break;  // the line a killed run was writing
      if (!j.contains("context")) out.push_back(j);
    }
    return out;
  }
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    // Cut off: keep everything up to the last complete entry and close the list.
    const size_t end = text.rfind("\n    }");
    if (end == std::string::npos || text.find("\"benchmarks\"") == std::string::npos)
      throw UserError("--resume: " + path + " is not Google Benchmark JSON, nor a cut-off one");
    doc = nlohmann::json::parse(text.substr(0, end + 6) + "\n  ]\n}\n", nullptr, false);
    if (doc.is_discarded())
      throw UserError("--resume: " + path + " is cut off where it cannot be mended");
  }
  if (!doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    throw UserError("--resume: " + path + " has no benchmarks list");
  for (const auto& e : doc["benchmarks"]) out.push_back(e);
  return out;
}
}  // namespace

std::set<std::string> completed_benchmarks(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UserError("--resume: cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  struct Seen {
    int iterations = 0, repetitions = 1;
    bool failed = false;
  };
  std::map<std::string, Seen> seen;
  for (const nlohmann::json& e : entries_of(ss.str(), path)) {
    const std::string name = e.value("run_name", e.value("name", std::string()));
    if (name.empty()) continue;
    Seen& s = seen[name];
    if (e.value("error_occurred", false)) s.failed = true;
    if (e.value("run_type", std::string("iteration")) == "iteration" &&
        !e.value("error_occurred", false))
      ++s.iterations;
    s.repetitions = std::max(s.repetitions, e.value("repetitions", 1));
  }
  std::set<std::string> done;
  for (const auto& [name, s] : seen)
    if (!s.failed && s.iterations >= s.repetitions) done.insert(name);
  return done;
}

}  // namespace cnnbench
