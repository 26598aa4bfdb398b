// A detector's post-processing on the GPU (issue 6): each head's raw output decoded into one rows
// buffer of [batch][rows][5 + classes] (YOLOR's torch.cat of the heads), then confidence
// filtering and class-aware NMS (kernels/detect_gpu.h), enqueued after the network's forward or
// replayed as one CUDA graph of its own.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "kernels/detect_gpu.h"
#include "networks/compile.h"

namespace cnnbench {

class DetectPost {
 public:
  // The model's outputs must be the heads in order (YOLOR: strides 8, 16, 32), each of
  // 3 x (5 + classes) channels and input / stride rows and columns; UserError otherwise.
  // `capacity`: the most candidates an image may have (an image with more is an overflow).
  DetectPost(const Model& m, const std::vector<YoloHead>& heads, int classes, const NmsOptions& o,
             int capacity);
  ~DetectPost();
  DetectPost(const DetectPost&) = delete;
  DetectPost& operator=(const DetectPost&) = delete;

  void enqueue(cudaStream_t s);  // decode + NMS, launch by launch
  void launch(cudaStream_t s);   // the same, as a CUDA graph captured on first use

  struct Result {
    std::vector<std::vector<Detection>> detections;  // per image, by score
    std::vector<int> candidates;                     // per image: (row, class) pairs over conf
    int overflow = 0;  // the most candidates of an image beyond the capacity, or 0
  };
  Result download(cudaStream_t s) const;  // synchronizes s
  const float* rows() const { return rows_; }
  // The detections on the device: [batch][max_det] (the first counts of each image are valid).
  const Detection* detections_ptr() const { return out_; }
  int64_t rows_per_image() const { return rows_per_image_; }
  size_t device_bytes() const { return bytes_; }

 private:
  const Model& model_;
  std::vector<YoloHead> heads_;
  std::vector<int> ny_, nx_;
  int classes_ = 0;
  NmsOptions opt_;
  YoloNmsPlan plan_;
  int64_t rows_per_image_ = 0;
  size_t bytes_ = 0;
  float* rows_ = nullptr;
  void* workspace_ = nullptr;
  Detection* out_ = nullptr;
  int* out_count_ = nullptr;
  int* overflow_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace cnnbench
