#include "harness/session.h"

#include <cctype>
#include <cstdio>
#include <string>

#include "harness/check.h"
#include "harness/cli.h"

namespace cnnbench {

void require_cuda_device() {
  std::string reason;
  if (cuda_device_count(&reason) == 0) throw UserError("no CUDA device: " + reason);
}

void build_and_capture(GpuContext& ctx, const std::function<std::unique_ptr<Model>()>& make,
                       std::unique_ptr<Model>& model, std::unique_ptr<Runner>& runner,
                       std::vector<std::string>& repairs, const std::function<void()>& built,
                       int max_repairs) {
  for (int round = 0;; ++round) {
    runner.reset();
    model.reset();  // the previous build's memory goes before the next is planned
    model = make();
    runner = std::make_unique<Runner>(*model, ctx);
    if (built) built();
    try {
      runner->capture();
      return;
    } catch (const GraphMismatch&) {
      if (round >= max_repairs) throw;
      const std::string banned = model->ban_first_departing_engine();
      if (banned.empty()) throw;
      std::fprintf(stderr, "cnnbench: the CUDA graph departed from eager; banned %s, rebuilding\n",
                   banned.c_str());
      repairs.push_back(banned);
    }
  }
}

std::unique_ptr<Prepared> prepare_model(GpuContext& ctx, const Graph& g, const HostWeights& w,
                                        const CompileOptions& opt, double warmup_ms,
                                        const std::function<void(const Prepared&)>& built) {
  auto p = std::make_unique<Prepared>();
  p->key = g.name() + "/" + precision_name(opt.precision) + "/batch:" + std::to_string(opt.batch);
  p->device_before = p->peak.sample();
  build_and_capture(
      ctx, [&] { return std::make_unique<Model>(ctx, g, w, opt); }, p->model, p->runner, p->repairs,
      [&] {
        if (built) built(*p);
      });
  p->peak.sample();
  // Warm-up: at least three replays and at least warmup_ms of them.
  double spent = 0;
  int replays = 0;
  while (replays < 3 || spent < warmup_ms) {
    const double ms = p->runner->time_ms(true, 1);
    spent += ms;
    ++replays;
    p->single_forward_ms = (replays == 1) ? ms : std::min(p->single_forward_ms, ms);
  }
  p->peak.sample();
  return p;
}

int parse_build_threads(const std::string& s) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || n < 1 || n > 64)
    throw UserError("--build_threads takes a whole number of threads from 1 to 64, not '" + s +
                    "'");
  return n;
}

double parse_graph_tune_us(const std::string& s) {
  const double us = parse_number(s, "graph_tune_us");
  if (us < 0 || us > 1e5)
    throw UserError("--graph_tune_us takes microseconds from 0 (off) to 100000, not '" + s + "'");
  return us;
}

std::vector<std::string> parse_engine_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    // Commas inside a tag's knob braces do not split it.
    size_t end = start;
    int depth = 0;
    while (end < s.size() && (s[end] != ',' || depth > 0)) {
      depth += s[end] == '{' ? 1 : s[end] == '}' ? -1 : 0;
      ++end;
    }
    const std::string item = s.substr(start, end - start);
    if (item != kNondeterministic && (item.size() < 4 || item.compare(0, 3, "eng") != 0 ||
                                      !std::isdigit(static_cast<unsigned char>(item[3]))))
      throw UserError(
          "--exclude_engines takes cuDNN engine names like eng4, tags like eng8{k24=0}, or "
          "'nondeterministic', not '" +
          item + "'");
    out.push_back(item);
    start = end + 1;
  }
  return out;
}

}  // namespace cnnbench
