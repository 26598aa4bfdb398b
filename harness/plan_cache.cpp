#include "harness/plan_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/check.h"
#include "harness/context.h"

namespace cnnbench {

std::string plan_cache_scope_device(const DeviceInfo& d) {
  return d.name + " sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
}

std::string plan_cache_scope_library(const DeviceInfo& d) {
  return "cuDNN " + version_string(d.cudnn_loaded);
}

std::string plan_cache_search(bool mode_b, double graph_tune_below_us) {
  if (graph_tune_below_us <= 0) return mode_b ? "2 A+B" : "2 A";
  char graph[48];
  std::snprintf(graph, sizeof graph, " graph<%gus", graph_tune_below_us);
  return std::string(mode_b ? "3 A+B" : "3 A") + graph;
}

std::string bytes_to_hex(const void* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  const auto* b = static_cast<const unsigned char*>(p);
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) out[2 * i] = digits[b[i] >> 4], out[2 * i + 1] = digits[b[i] & 15];
  return out;
}

bool hex_to_bytes(const std::string& hex, void* p, size_t n) {
  if (hex.size() != 2 * n) return false;
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::vector<unsigned char> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  std::copy(out.begin(), out.end(), static_cast<unsigned char*>(p));
  return true;
}

bool DiskPlanCache::Key::operator<(const Key& o) const {
  return std::tie(device, library, key, search) < std::tie(o.device, o.library, o.key, o.search);
}

std::map<DiskPlanCache::Key, CachedPlan> DiskPlanCache::read(const std::string& path) {
  std::map<Key, CachedPlan> out;
  std::ifstream f(path);
  if (!f) return out;  // no file yet
  std::stringstream text;
  text << f.rdbuf();
  const std::string bad = "plan cache " + path + ": ";
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception&) {
    throw UserError(bad + "not JSON (delete it to start a new cache)");
  }
  if (!doc.is_object() || !doc.contains("cnnbench_plan_cache"))
    throw UserError(bad + "not a cnnbench plan cache (no \"cnnbench_plan_cache\" field)");
  if (doc["cnnbench_plan_cache"] != kFormat && doc["cnnbench_plan_cache"] != 1)
    throw UserError(bad + "format " + doc["cnnbench_plan_cache"].dump() + ", this cnnbench reads " +
                    "1 and " + std::to_string(kFormat) + " (delete it to start a new cache)");
  if (!doc.contains("entries") || !doc["entries"].is_array())
    throw UserError(bad + "no \"entries\" list");
  int i = 0;
  for (const auto& e : doc["entries"]) {
    ++i;
    try {
      Key k{e.at("device").get<std::string>(), e.at("library").get<std::string>(),
            e.value("search", std::string("1")), e.at("key").get<std::string>()};
      CachedPlan p;
      p.engine = e.at("engine").get<std::string>();
      p.fused = e.at("fused").get<bool>();
      p.staged = e.value("staged", false);
      p.tuned_us = e.value("tuned_us", 0.0);
      p.tuned_in_graph = e.value("tuned_in_graph", false);
      p.tuned_eager_us = e.value("tuned_eager_us", 0.0);
      p.candidates = e.value("candidates", 0);
      if (k.key.empty() || p.engine.empty()) throw std::runtime_error("an empty key or engine");
      out[k] = p;
    } catch (const std::exception& ex) {
      throw UserError(bad + "entry " + std::to_string(i) + " is malformed (" + ex.what() + ")");
    }
  }
  return out;
}

DiskPlanCache::DiskPlanCache(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw UserError("--plan_cache needs a file name");
  entries_ = read(path_);
  // Writable before anything is measured: the file itself, or a file beside it.
  const bool exists = access(path_.c_str(), F_OK) == 0;
  const std::string probe = exists ? path_ : path_ + ".probe";
  {
    std::ofstream w(probe, std::ios::app);
    if (!w) throw UserError("--plan_cache: cannot write " + path_);
  }
  if (!exists) std::remove(probe.c_str());
}

void DiskPlanCache::set_scope(const std::string& device, const std::string& library,
                              const std::string& search) {
  device_ = device;
  library_ = library;
  search_ = search;
}

const CachedPlan* DiskPlanCache::find(const std::string& key) const {
  auto it = entries_.find(Key{device_, library_, search_, key});
  return it == entries_.end() ? nullptr : &it->second;
}

bool DiskPlanCache::in_other_search(const std::string& key) const {
  // Keys order by device, library, key, then search: this key's entries sit side by side.
  for (auto it = entries_.lower_bound(Key{device_, library_, "", key});
       it != entries_.end() && it->first.device == device_ && it->first.library == library_ &&
       it->first.key == key;
       ++it)
    if (it->first.search != search_) return true;
  return false;
}

void DiskPlanCache::put(const std::string& key, const CachedPlan& plan) {
  const Key k{device_, library_, search_, key};
  entries_[k] = plan;
  written_[k] = plan;
}

void DiskPlanCache::save() {
  if (written_.empty()) return;
  // What the file holds now (another process may have added entries), then ours over it.
  std::map<Key, CachedPlan> merged = read(path_);
  for (const auto& [k, p] : written_) merged[k] = p;
  nlohmann::ordered_json doc;
  doc["cnnbench_plan_cache"] = kFormat;
  doc["entries"] = nlohmann::ordered_json::array();
  for (const auto& [k, p] : merged)
    doc["entries"].push_back({{"device", k.device},
                              {"library", k.library},
                              {"search", k.search},
                              {"key", k.key},
                              {"engine", p.engine},
                              {"fused", p.fused},
                              {"staged", p.staged},
                              {"tuned_us", p.tuned_us},
                              {"tuned_in_graph", p.tuned_in_graph},
                              {"tuned_eager_us", p.tuned_eager_us},
                              {"candidates", p.candidates}});
  const std::string tmp = path_ + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    f << doc.dump(1) << "\n";
    if (!f) {
      std::remove(tmp.c_str());
      throw UserError("--plan_cache: cannot write " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw UserError("--plan_cache: cannot replace " + path_);
  }
  for (const auto& [k, p] : merged) entries_.emplace(k, p);  // others' entries, for find()
  written_.clear();
}

}  // namespace cnnbench
