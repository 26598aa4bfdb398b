#include "harness/detect_post.h"

#include <string>

#include "harness/check.h"
#include "kernels/storage.h"
#include "kernels/timing.h"

namespace cnnbench {

DetectPost::DetectPost(const Model& m, const std::vector<YoloHead>& heads, int classes,
                       const NmsOptions& o, int capacity)
    : model_(m), heads_(heads), classes_(classes), opt_(o) {
  if (m.output_count() != heads.size())
    throw UserError("detection: the network has " + std::to_string(m.output_count()) +
                    " outputs for " + std::to_string(heads.size()) + " YOLO heads");
  const Dims in = m.input_dims();
  for (size_t k = 0; k < heads.size(); ++k) {
    const Dims d = m.output_dims(k);
    const int stride = heads[k].stride;
    if (d.c != 3 * (5 + classes) || d.h * stride != in.h || d.w * stride != in.w)
      throw UserError("detection: output " + std::to_string(k) + " is " + d.str() +
                      ", not 3 x (5 + " + std::to_string(classes) + ") channels at stride " +
                      std::to_string(stride) + " of " + in.str());
    ny_.push_back(d.h), nx_.push_back(d.w);
    rows_per_image_ += int64_t(3) * d.h * d.w;
  }
  const int batch = m.batch();
  plan_ = plan_yolo_nms(batch, rows_per_image_, classes, capacity);
  const size_t rows_bytes = size_t(batch) * rows_per_image_ * (5 + classes) * sizeof(float);
  const size_t out_bytes = size_t(batch) * o.max_det * sizeof(Detection);
  try {
    CNN_CHECK_CUDA(cudaMalloc(&rows_, rows_bytes));
    CNN_CHECK_CUDA(cudaMalloc(&workspace_, plan_.workspace_bytes));
    CNN_CHECK_CUDA(cudaMalloc(&out_, out_bytes));
    CNN_CHECK_CUDA(cudaMalloc(&out_count_, sizeof(int) * batch));
    CNN_CHECK_CUDA(cudaMalloc(&overflow_, sizeof(int)));
  } catch (...) {
    cudaFree(rows_), cudaFree(workspace_), cudaFree(out_), cudaFree(out_count_);
    cudaFree(overflow_);
    throw;
  }
  bytes_ = rows_bytes + plan_.workspace_bytes + out_bytes + sizeof(int) * (batch + 1);
}

DetectPost::~DetectPost() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  cudaFree(rows_), cudaFree(workspace_), cudaFree(out_), cudaFree(out_count_), cudaFree(overflow_);
}

void DetectPost::enqueue(cudaStream_t s) {
  const DType t = storage_type(model_.precision());
  int64_t offset = 0;
  for (size_t k = 0; k < heads_.size(); ++k) {
    launch_yolo_decode(model_.output_ptr(k), t, model_.batch(), ny_[k], nx_[k], heads_[k], classes_,
                       offset, rows_per_image_, rows_, s);
    offset += int64_t(3) * ny_[k] * nx_[k];
  }
  launch_yolo_nms(plan_, rows_, opt_, workspace_, out_, out_count_, overflow_, s);
}

void DetectPost::launch(cudaStream_t s) {
  if (!exec_) capture_graph([this](cudaStream_t st) { enqueue(st); }, s, &graph_, &exec_);
  CNN_CHECK_CUDA(cudaGraphLaunch(exec_, s));
}

DetectPost::Result DetectPost::download(cudaStream_t s) const {
  CNN_CHECK_CUDA(cudaStreamSynchronize(s));
  const int batch = model_.batch();
  Result r;
  std::vector<int> counts(batch);
  r.candidates.resize(batch);
  CNN_CHECK_CUDA(
      cudaMemcpy(counts.data(), out_count_, sizeof(int) * batch, cudaMemcpyDeviceToHost));
  CNN_CHECK_CUDA(cudaMemcpy(r.candidates.data(), yolo_nms_counts(plan_, workspace_),
                            sizeof(int) * batch, cudaMemcpyDeviceToHost));
  CNN_CHECK_CUDA(cudaMemcpy(&r.overflow, overflow_, sizeof(int), cudaMemcpyDeviceToHost));
  std::vector<Detection> all(size_t(batch) * opt_.max_det);
  CNN_CHECK_CUDA(
      cudaMemcpy(all.data(), out_, sizeof(Detection) * all.size(), cudaMemcpyDeviceToHost));
  for (int n = 0; n < batch; ++n)
    r.detections.emplace_back(all.begin() + int64_t(n) * opt_.max_det,
                              all.begin() + int64_t(n) * opt_.max_det + counts[n]);
  return r;
}

}  // namespace cnnbench
