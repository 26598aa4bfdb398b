#include "harness/arena.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <stdexcept>

#include "harness/check.h"
#include "harness/offsets.h"

namespace cnnbench {

namespace {
std::atomic<size_t> g_live{0};
size_t align_up(size_t x) {
  return (x + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
}

void* device_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  CNN_CHECK_CUDA(cudaMalloc(&p, bytes));
  g_live += bytes;
  // Zeroed once: engines timed while a model is built read their real input buffers before the
  // op producing them has run (compute-sanitizer initcheck, call 68: ResNet-50's maxpool output,
  // read by layer1's convs at build). Timing on zeros, not on whatever the allocator left
  // (NaNs, denormals), and no read of uninitialized memory.
  CNN_CHECK_CUDA(cudaMemset(p, 0, bytes));
  return p;
}

void device_free(void*& p, size_t bytes) {
  if (!p) return;
  cudaFree(p);  // never throws from a destructor path; an error here would be sticky anyway
  g_live -= bytes;
  p = nullptr;
}
}  // namespace

Arena::~Arena() {
  device_free(weights_ptr_, weights_bytes_);
  device_free(activations_ptr_, activations_bytes_);
  device_free(workspace_ptr_, workspace_bytes_);
}

int Arena::add_weights(size_t bytes) {
  if (planned_) throw std::logic_error("arena: add after plan");
  buffers_.push_back({MemKind::Weights, align_up(bytes), 0, 0, 0});
  return int(buffers_.size()) - 1;
}

int Arena::add_activation(size_t bytes, int first, int last) {
  if (planned_) throw std::logic_error("arena: add after plan");
  if (last < first) throw std::logic_error("arena: lifetime ends before it starts");
  buffers_.push_back({MemKind::Activations, align_up(bytes), 0, first, last});
  return int(buffers_.size()) - 1;
}

void Arena::request_workspace(size_t bytes) {
  if (workspace_ptr_) throw std::logic_error("arena: workspace already allocated");
  workspace_bytes_ = std::max(workspace_bytes_, align_up(bytes));
}

void Arena::plan() {
  // Weights: packed one after another.
  weights_bytes_ = 0;
  for (Buffer& b : buffers_)
    if (b.kind == MemKind::Weights) b.offset = weights_bytes_, weights_bytes_ += b.bytes;

  // Activations: largest first, each at the lowest offset that overlaps no already placed buffer
  // whose lifetime intersects its own (harness/offsets.h).
  std::vector<int> ids;
  std::vector<LiveBuffer> live;
  for (int i = 0; i < int(buffers_.size()); ++i)
    if (buffers_[i].kind == MemKind::Activations) {
      ids.push_back(i);
      live.push_back({buffers_[i].bytes, buffers_[i].first, buffers_[i].last});
    }
  const std::vector<size_t> offsets = plan_offsets(live, &activations_bytes_);
  for (size_t k = 0; k < ids.size(); ++k) buffers_[ids[k]].offset = offsets[k];
  planned_ = true;
}

void Arena::allocate() {
  if (!planned_) plan();
  if (weights_ptr_ || activations_ptr_) throw std::logic_error("arena: allocated twice");
  weights_ptr_ = device_alloc(weights_bytes_);
  activations_ptr_ = device_alloc(activations_bytes_);
}

void Arena::allocate_workspace() {
  if (workspace_ptr_) throw std::logic_error("arena: workspace allocated twice");
  workspace_ptr_ = device_alloc(workspace_bytes_);
}

void* Arena::ptr(int id) const {
  const Buffer& b = buffers_.at(id);
  char* base = static_cast<char*>(b.kind == MemKind::Weights ? weights_ptr_ : activations_ptr_);
  if (!base) throw std::logic_error("arena: buffer used before allocate()");
  return base + b.offset;
}

size_t Arena::bytes(MemKind kind) const {
  switch (kind) {
    case MemKind::Weights:
      return weights_bytes_;
    case MemKind::Activations:
      return activations_bytes_;
    case MemKind::Workspace:
      return workspace_bytes_;
  }
  return 0;
}

size_t Arena::total_bytes() const {
  return weights_bytes_ + activations_bytes_ + workspace_bytes_;
}

size_t Arena::activations_unplanned_bytes() const {
  size_t s = 0;
  for (const Buffer& b : buffers_)
    if (b.kind == MemKind::Activations) s += b.bytes;
  return s;
}

size_t Arena::live_device_bytes() {
  return g_live.load();
}

}  // namespace cnnbench
