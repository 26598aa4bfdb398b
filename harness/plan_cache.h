// The autotune plan cache on disk (issue 9): which engine autotune chose for a layer, keyed by the
// GPU, the cuDNN version loaded and the layer's plan key (its shape, precision, output alignment
// and engine mode: ConvOp::plan_key). A second run with the same file builds that one engine per
// shape instead of timing the top-k of each: it starts in seconds and picks the same plans. A
// plan is still refused if its CUDA-graph replay departs from a direct run, and an engine that
// heuristics no longer offer (another cuDNN, another driver) falls back to tuning, which then
// rewrites the entry. Host-only: the file format and its merge are tested on a CPU.
//
// File: JSON, {"cnnbench_plan_cache": 2, "entries": [{"device", "library", "search", "key",
// "engine", "fused", "staged", "tuned_us", "tuned_in_graph", "tuned_eager_us", "candidates"}]}. One
// file may hold several GPUs and cuDNN versions: save() keeps every entry of other scopes, and
// merges with what another process wrote to the file since it was read (its entries win only where
// this process has none). "search" names what autotune timed when it chose (plan_cache_search): an
// entry chosen from a narrower search (heuristics mode A only, or a concat-slice conv without its
// staged form, as every entry written before 2026-12-05 was) is not taken, so the layer is tuned
// again and the new entry written beside the old one. An entry without the field reads as "1".
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cnnbench {

struct DeviceInfo;

// The scope strings of a device: "NVIDIA H200 sm_90" and "cuDNN 9.19.0" (the library loaded).
std::string plan_cache_scope_device(const DeviceInfo& d);
std::string plan_cache_scope_library(const DeviceInfo& d);
// What autotune searches in this build: "2 A+B" with heuristics mode B, "2 A" without. The
// leading number changes whenever the search itself does (2: both forms of a slice conv timed;
// 3: the fastest candidates of layers under graph_tune_below_us timed again in a CUDA graph,
// "3 A+B graph<100us"; with that round off the search is 2's).
std::string plan_cache_search(bool mode_b, double graph_tune_below_us);

// An opaque library object (cuBLASLt's cublasLtMatmulAlgo_t, 64 bytes) as lower-case hex, and
// back: false where `hex` is not exactly 2 * n hex digits. A classifier's cuBLASLt algorithm is
// kept in the cache this way (engine "cublasLt <hex>"), its key naming the cuBLAS version.
std::string bytes_to_hex(const void* p, size_t n);
bool hex_to_bytes(const std::string& hex, void* p, size_t n);

struct CachedPlan {
  std::string engine;           // EngineInfo::tag(): "eng4{k24=23}+rtc"
  bool fused = true;            // the fused graph, or the conv alone plus our epilogue kernel
  bool staged = false;          // written into a packed staging buffer, then copied into its slice
  double tuned_us = 0;          // what autotune measured when it chose it
  bool tuned_in_graph = false;  // tuned_us from the graph round (an optional field, format 2)
  double tuned_eager_us = 0;    // the same plan's eager time (optional)
  int candidates = 0;           // how many it timed then
};

class DiskPlanCache {
 public:
  // Written as 2 (entries carry "search"); format 1 files (before 2026-12-05) are read, their
  // entries as search "1". A binary from before then refuses a format 2 file by name rather
  // than dropping the field when it rewrites it.
  static constexpr int kFormat = 2;

  // Reads `path` if it exists (UserError naming the file where it is not a plan cache of this
  // format) and checks that it can be written (UserError otherwise), before any measurement.
  explicit DiskPlanCache(std::string path);

  // The scope of find() and put(): the GPU ("NVIDIA H200 sm_90"), the library ("cuDNN 9.19.0"),
  // known once the device is open, and the search (plan_cache_search).
  void set_scope(const std::string& device, const std::string& library, const std::string& search);

  const CachedPlan* find(const std::string& key) const;  // nullptr: none in this scope
  // Whether an entry for `key` exists for this GPU and library under another search: a lookup
  // that find() missed for that reason counts as outdated, not as a miss.
  bool in_other_search(const std::string& key) const;
  void put(const std::string& key, const CachedPlan& plan);

  // Writes the file (a temporary beside it, then a rename), merged with its current contents.
  // UserError if it cannot. Does nothing when nothing was put since the last save.
  void save();

  const std::string& path() const { return path_; }
  size_t size() const { return entries_.size(); }  // every scope
  // This process's use: lookups that found an entry, entries whose engine was used, entries
  // found but not usable (the engine no longer offered, or refused), lookups that found one only
  // from another search (tuned again), lookups that found none.
  int hits = 0, used = 0, stale = 0, outdated = 0, misses = 0;

 private:
  struct Key {
    std::string device, library, search, key;
    bool operator<(const Key& o) const;
  };
  static std::map<Key, CachedPlan> read(const std::string& path);  // {} where no file
  std::string path_, device_, library_, search_;
  std::map<Key, CachedPlan> entries_;
  std::map<Key, CachedPlan> written_;  // put() since the last save
};

}  // namespace cnnbench
