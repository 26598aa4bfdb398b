// The device memory arena. Every buffer a model needs is declared first (its kind, size and, for
// activations, the steps where it is live); plan() then packs activations whose lifetimes do not
// overlap into the same bytes, and allocate() makes one cudaMalloc per kind. Nothing allocates
// after that, so nothing allocates inside a timed loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cnnbench {

enum class MemKind { Weights, Activations, Workspace };

class Arena {
 public:
  static constexpr size_t kAlignment = 256;

  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // Weights live for the whole run. Activations are live from step `first` to step `last`
  // inclusive. Returns the buffer's id.
  int add_weights(size_t bytes);
  int add_activation(size_t bytes, int first, int last);
  // The shared workspace: one buffer, large enough for the largest request.
  void request_workspace(size_t bytes);

  void plan();                // assigns offsets (host only; testable without a GPU)
  void allocate();            // weights and activations; call after plan()
  void allocate_workspace();  // after every request_workspace()

  void* ptr(int id) const;
  void* workspace() const { return workspace_ptr_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  size_t offset(int id) const { return buffers_.at(id).offset; }
  size_t size(int id) const { return buffers_.at(id).bytes; }

  size_t bytes(MemKind kind) const;
  size_t total_bytes() const;  // the arena's high-water mark: all three kinds together
  // The activations' sum without reuse, to show what the liveness plan saves.
  size_t activations_unplanned_bytes() const;

  // Bytes held on the device by all arenas of this process right now.
  static size_t live_device_bytes();

 private:
  struct Buffer {
    MemKind kind;
    size_t bytes, offset;
    int first, last;
  };
  std::vector<Buffer> buffers_;
  size_t weights_bytes_ = 0, activations_bytes_ = 0, workspace_bytes_ = 0;
  void* weights_ptr_ = nullptr;
  void* activations_ptr_ = nullptr;
  void* workspace_ptr_ = nullptr;
  bool planned_ = false;
};

}  // namespace cnnbench
